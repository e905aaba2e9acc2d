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
"""

from __future__ import annotations

from typing import Any

import transformers
from packaging.version import Version

from vlreg.plugin import PerCall, Unavailable, Vision, adapter, tower_envoys

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
