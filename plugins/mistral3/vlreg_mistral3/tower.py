"""The Pixtral tower as Mistral 3 hosts it.

Pixtral runs its convolution on the batch of images padded to the largest one, crops
each image's grid of patches back to its own size and packs every image's patches, in
raster order, into one row ``[1, patches, hidden]`` before ``ln_pre``; every block then
runs on that row. So `PixtralVision.patch_embeddings` is the packed row entering
``ln_pre`` (the convolution's output still holds the padding, which nothing after the
crop reads), and the block values are that row, like the Qwen ViT's.

The blocks attend within each image only, through a block-diagonal mask over the row:
one call of the attention function spans every image, so its pattern is no image's.
The scores and the pattern are refused with `PER_IMAGE` (the queries and keys are
served whole, and each image's span of the row is its grid of patches).
"""

from __future__ import annotations

from typing import Any

from nnsight.intervention.util import first_input, replace_first_input

from vlreg.plugin import Unavailable, Vision, value

#: Why a Pixtral block's attention scores and pattern are not served.
PER_IMAGE = (
    "Pixtral's tower packs every image into one row and attends within each image through a "
    "block-diagonal mask, so one attention call spans all images and no single pattern is an "
    "image's; form an image's pattern from attention_queries and attention_keys over its span of "
    "the row (its patches, in order; vision.geometry gives each image's grid)"
)

#: Tower names, from the tower (``PixtralVisionModel``); none is a Mistral text block's.
TOWER_RENAME = {
    "patch_conv": "patch_embed",
    "transformer.layers": "layers",
    "attention": "self_attn",
    "feed_forward": "mlp",
    "attention_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


class PixtralVision(Vision):
    """The Pixtral tower (``model.vision_tower``): every image's patches in one row."""

    @property
    def image_size(self) -> int:
        """Unavailable: Pixtral has no fixed resolution."""
        raise Unavailable(
            "vision.image_size is unavailable: the processor resizes each image to its own grid of "
            "patches; each image's (height, width) in pixels after the resize is in the processor's "
            "output (image_sizes)"
        )

    patch_embeddings = value(
        "ln_pre.input",
        description="every image's patches cropped from the convolution and packed into one row, entering ln_pre",
    )(lambda vision, raw: first_input(*raw)).writes(
        lambda vision, raw, new: replace_first_input(*raw, new.reshape(first_input(*raw).shape))
    )


def unavailable(part: Any) -> dict:
    """Rows the vision part cannot serve: the per-image pattern."""
    refuse = lambda envoy: PER_IMAGE  # noqa: E731
    return {"self_attn.attention_scores": refuse, "self_attn.attention_probabilities": refuse}
