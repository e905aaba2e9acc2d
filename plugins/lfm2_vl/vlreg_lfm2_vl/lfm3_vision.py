"""LFM3-VL's tower (``lfm3_vl_vision``): LFM2-shaped blocks over the Qwen ViT's packed patches.

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

from vlreg.plugin import Mixer, PackedVision, PerImageAttention, Standard, VisionLayer, VisionMlp, as_patches, patches
from vlreg.plugin import tower_envoys, value


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


def envoys(part: Any) -> dict[type, type]:
    """The tower's classes onto `Lfm3Vision`, its blocks, attention, convolution and MLP."""
    from transformers.models.lfm3_vl import modeling_lfm3_vl as lfm3_vl

    found = tower_envoys("lfm3_vl", ("Lfm3VlVisionModel", "Lfm3VlVisionLayer", "Lfm3VlVisionAttention",
                                     "Lfm3VlVisionMLP"), vision=Lfm3Vision, layer=Lfm3VisionLayer,
                         attention=PerImageAttention, mlp=Lfm3VisionMlp)(part)
    return {**found, lfm3_vl.Lfm3VlVisionShortConv: VisionShortConv}
