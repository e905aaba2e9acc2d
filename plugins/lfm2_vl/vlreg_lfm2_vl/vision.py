"""LFM2-VL's tower, SigLIP 2 in its NaFlex form, and the projector run once per crop.

The image processor cuts each image into crops (`vlreg_lfm2_vl.geometry`), each its own
grid of ``patch_size`` patches, and hands the tower every crop's patches already flattened
(``pixel_values`` ``[crops, max_num_patches, 3 * patch_size ** 2]``), each crop's row
padded after its own patches to the longest a crop can be (``pixel_attention_mask`` marks
the real ones, ``spatial_shapes`` each crop's grid in patches). So the tower's values are
``[crops, max_num_patches, vision_hidden_size]``, a crop's own patches first, in raster
order, and the padding after them (`Vision.padded_patches`): the attention masks the
padding's keys, but its rows are computed all the same and are no part of the image.

The tower is laid out as SigLIP is (``embeddings.patch_embedding``, a linear map here;
``encoder.layers``; ``post_layernorm`` over every patch), served with vlreg-llava's
``"siglip"`` adapter; ``patch_embeddings`` is the linear map's output, before the position
embeddings, resized to each crop's grid, are added. The projector folds each 2 x 2 block of
patches into one token (its pixel unshuffle) and maps it through a LayerNorm and a
two-layer MLP to the text model's width. How the wrapper calls it depends on the
transformers release (`PER_CROP`, the one place this plugin asks which release it runs on):

* transformers 5.23 drops each crop's padding and calls it once per crop (`Projector`);
* from 5.24 it calls it once, on every crop's token slots side by side as one grid of
  patches (``[1, 2, 2 * slots, vision_hidden_size]``, a crop's slots as many as its padded
  length allows, the slots past its own tokens reading its first patch), and the
  wrapper keeps the real tokens' rows of its output (``[1, 1, slots, hidden_size]``): the
  features are a selection of ``projector.output``, not all of it.

LFM3-VL's tower (``lfm3_vl_vision``): LFM2-shaped blocks over the Qwen ViT's packed patches.

The tower runs on ``[patches, vision_hidden_size]``, every image's patches in one row in
merge-block order (each 2 x 2 block of patches that becomes one image token consecutive),
as the Qwen ViT does: ``patch_embed`` (a linear map over flattened patches), then
``embedding_norm``, then ``layers``, and no final norm; the projector norms and folds each
merge block itself. A block is LFM2's, pre-norm (``operator_norm``, ``ffn_norm``), its mixer
one of two kinds by ``vision_config.layer_types``:

* ``self_attn`` (``full_attention``): grouped-query attention with per-head ``q_norm`` and
  ``k_norm`` and the 2-D rotary embedding, called once per image over ``cu_seqlens``
  (`vlreg.plugin.PerImageAttention` at its default locations), projected back by ``out_proj``;
* ``short_conv`` (``conv``, `VisionShortConv`): a gated depthwise 2-D convolution over each
  image's grid of patches.

So ``input + (self_attn or short_conv).attention_output + mlp.mlp_output == layer_output``
on every block, and the tower's mixers are declared on its block class (`Lfm3VisionLayer`)
as a hybrid text model's are.
"""

from __future__ import annotations

from typing import Any, ClassVar

import transformers
from packaging.version import Version

from vlreg.plugin import (Mixer, PackedVision, PerCall, PerImageAttention, Standard, Unavailable, Vision, VisionLayer,
                          VisionMlp, adapter, as_patches, patches, tower_envoys, value)

#: Whether the wrapper calls the projector once per crop (transformers before 5.24), not
#: once on all crops' slots packed: nothing in the model's structure says which.
PER_CROP = Version(transformers.__version__) < Version("5.24")

RENAME = adapter("siglip").rename


def _no_fixed_size(vision: Vision) -> int:
    raise Unavailable(
        "vision.image_size is unavailable: the tower has no fixed resolution; each crop is its own grid "
        "of patches, given per crop in the processor's output (spatial_shapes, in patches)"
    )


class NaFlexVision(Vision):
    """SigLIP 2's NaFlex tower: crops of any shape, padded to one length."""

    padded_patches = True
    image_size = property(_no_fixed_size)

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image so far from square that the processor's resize (whole tokens along the
        shorter side, the pixel budget over both) makes more patches than the length every
        crop is padded to, which the tower cannot take."""
        image_processor = getattr(self.root.processor, "image_processor", None)
        if not hasattr(image_processor, "smart_resize"):
            return None
        ip = image_processor
        patch, factor = ip.encoder_patch_size, ip.downsample_factor
        resized = ip.smart_resize(height=height, width=width, downsample_factor=factor,
                                  min_image_tokens=ip.min_image_tokens, max_image_tokens=ip.max_image_tokens,
                                  encoder_patch_size=patch)
        splitting = ip.do_image_splitting and not ip.min_tiles == ip.max_tiles == 1
        padded = max(ip.max_image_tokens * factor**2, (ip.tile_size // patch) ** 2 if splitting else 0)
        patches = (resized[0] // patch) * (resized[1] // patch)
        if patches <= padded:
            return None
        return (f"the processor resizes it (or its thumbnail) to {resized[0]} x {resized[1]} pixels, {patches} patches of "
                f"{patch}, past the {padded} every crop is padded to: pass an image closer to square (pad it)")


class Projector(PerCall):
    """LFM2-VL's projector: called once per crop, in crop order (each image's tiles, then
    its thumbnail), so ``input`` and ``output`` are lists: crop ``i``'s unpadded tower
    output as its ``[1, rows, columns, vision_hidden_size]`` grid of patches, and its
    ``[1, rows / 2, columns / 2, hidden_size]`` tokens."""

    def calls(self, inputs: dict) -> int:
        pixels = inputs.get("pixel_values")
        return 0 if pixels is None else int(pixels.shape[0])


#: SigLIP 2's classes onto the standard envoys, the tower onto `NaFlexVision`.
envoys = tower_envoys("siglip2", ("Siglip2VisionModel", "Siglip2EncoderLayer", "Siglip2Attention", "Siglip2MLP"),
                      vision=NaFlexVision)


def wrapper_envoys(part: Any) -> dict[type, type]:
    """The wrapper's projector onto `Projector` where it is called once per crop; else the
    standard projector (one call)."""
    from transformers.models.lfm2_vl import modeling_lfm2_vl as wrapper

    return {wrapper.Lfm2VlMultiModalProjector: Projector} if PER_CROP else {}


# -- LFM3-VL's tower (``lfm3_vl_vision``) ----------------------------------------

class Lfm3Vision(PackedVision):
    """The tower over every image's patches packed in one row; the processor is Qwen2-VL's,
    whose resize refuses an image more than 200 times as long one way as the other."""

    max_aspect_ratio = 200


class Lfm3VisionLayer(VisionLayer):
    """A tower block: attention (``self_attn``) or the 2-D short convolution
    (``short_conv``), then the MLP."""

    mixers = (Mixer("self_attn"), Mixer("short_conv", native="conv"))


class VisionShortConv(Standard):
    """LFM3-VL's gated 2-D convolution (``short_conv``), every value ``[1, patches, hidden]``
    in the tower's merge-block order.

    ``in_proj`` makes three rows per patch: an input gate, an output gate and the
    convolution's input; each image's gated input is laid out on its grid, convolved
    depthwise (``spatial_conv``, ``conv_kernel_size`` taps a side, each channel its own, zero
    padding at the image's edges, so no image reads another's patches), put back in
    merge-block order and joined; the output gate multiplies the join before ``out_proj``:

        attention_output = out_proj(output_gate * conv(input_gate * conv_input))

    * ``conv_output``: the join of every image's convolution, before the output gate;
    * ``attention_output``: what the mixer adds to the stream (the name every mixer shares).
    """

    sourced = True
    #: nnsight's name for the join of the per-image convolutions in the module's forward.
    join_call: ClassVar[str] = "torch_cat_0"
    order = ("conv_output", "attention_output")

    conv_output = value(
        lambda m: f"{m.path}.source.{m.join_call}.output",
        description="every image's convolution of its gated input, joined, before the output gate, [1, patches, hidden]",
    )(lambda m, raw: as_patches(raw)).writes(lambda m, raw, new: new.reshape(raw.shape))
    attention_output = patches(description="what the mixer adds to the stream, [1, patches, hidden]",
                               read=lambda raw: raw, put=lambda raw, new: new)

    @property
    def kernel_size(self) -> int:
        """The side of the square of patches the convolution reads around each one."""
        return int(self._module.spatial_conv.kernel_size[0])


class Lfm3VisionMlp(VisionMlp):
    """The tower's SwiGLU (``w1``, ``w3``, ``w2``); its width is ``w1``'s."""

    _widening = ("w1",)


def lfm3_envoys(part: Any) -> dict[type, type]:
    """LFM3-VL's tower classes onto `Lfm3Vision`, its blocks, attention, convolution and MLP."""
    from transformers.models.lfm3_vl import modeling_lfm3_vl as lfm3_vl

    found = tower_envoys("lfm3_vl", ("Lfm3VlVisionModel", "Lfm3VlVisionLayer", "Lfm3VlVisionAttention",
                                     "Lfm3VlVisionMLP"), vision=Lfm3Vision, layer=Lfm3VisionLayer,
                         attention=PerImageAttention, mlp=Lfm3VisionMlp)(part)
    return {**found, lfm3_vl.Lfm3VlVisionShortConv: VisionShortConv}
