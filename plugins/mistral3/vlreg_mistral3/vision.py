"""The Pixtral tower as Mistral 3 hosts it.

Pixtral runs its convolution on the batch of images padded to the largest one, crops
each image's grid of patches back to its own size and packs every image's patches, in
raster order, into one row ``[1, patches, hidden]`` before ``ln_pre``; every block then
runs on that row. So `PixtralVision.patch_embeddings` is the packed row entering
``ln_pre`` (the convolution's output still holds the padding, which nothing after the
crop reads), and the block values are that row, like the Qwen ViT's.

The blocks attend within each image only, through a block-diagonal mask over the row:
one call of the attention function spans every image, so its scores and pattern are
served per image (`PixtralAttention`, a `PackedVisionAttention`): a list of
``[heads, n, n]``, one per image, each image's ``n`` patches counted from the
``image_sizes`` the processor hands the model.
"""

from __future__ import annotations

from typing import Any

from nnsight.intervention.util import first_input, replace_first_input

from vlreg.plugin import PackedVisionAttention, Unavailable, Vision, tower_envoys, value

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

    batch_axis = 1  # the packed row, [1, patches, hidden]: copies of the images extend it

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image the processor scales to a side of no pixels (its longer side is cut to
        ``longest_edge``, the shorter in proportion, rounded down), or to fewer patches than
        the projector's merge takes (LightOnOCR's processor then writes no image token;
        Mistral 3's forward fails on an image of one token)."""
        processor = self.root.processor
        image_processor = getattr(processor, "image_processor", None)
        size, patch = getattr(image_processor, "size", None), getattr(image_processor, "patch_size", None)
        if not size or not patch:
            return None
        longest, step = _field(size, "longest_edge"), _field(patch, "height")
        merge = getattr(self.root._module.config, "spatial_merge_size", 1) or 1
        # Pixtral's processor rounds each side up to whole tokens (patch x merge); LightOnOCR's to whole patches
        unit = step if hasattr(processor, "effective_patch_size") else step * merge
        ratio = max(height / longest, width / longest, 1.0)
        scaled = int(width / ratio), int(height / ratio)
        tokens = [-(-side // unit) * unit // (step * merge) for side in scaled]
        needed = 2 if self.root._module.config.model_type in ("mistral3", "mistral_large4") else 1  # Mistral 3's forward
        if min(tokens) >= 1 and tokens[0] * tokens[1] >= needed:
            return None
        least = step * (merge - 1) + 1 if unit == step else 1
        more = (f", and one of them more than {step * merge} (Mistral 3's forward fails on an image of one token)"
                if needed > 1 else "")
        return (f"the processor scales it to {scaled[0]} x {scaled[1]} pixels (its longer side to at most {longest}), "
                f"which makes {tokens[0]} x {tokens[1]} image tokens of {merge} x {merge} patches of {step} pixels: pass "
                f"an image whose sides, once so scaled, are each at least {least} pixel{'s' if least > 1 else ''}{more}")

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


def _field(size: Any, name: str) -> int:
    """A field of an image processor's size (a dict, or transformers' ``SizeDict``)."""
    return int(size[name] if isinstance(size, dict) else getattr(size, name))


class PixtralAttention(PackedVisionAttention):
    """A Pixtral block's attention: every image's patches in one row, each image attending
    to its own."""

    def image_patches(self, inputs: dict) -> list[int]:
        """``(height // patch) * (width // patch)`` per image, the grid the tower crops each
        image's patches to (the whole padded batch where no ``image_sizes`` is given)."""
        patch = self.root.vision.patch_size
        sizes = inputs.get("image_sizes")
        if sizes is None:
            pixels = inputs["pixel_values"]
            sizes = [pixels.shape[-2:]] * pixels.shape[0]
        return [(int(height) // patch) * (int(width) // patch) for height, width in sizes]


envoys = tower_envoys("pixtral", ("PixtralVisionModel", "PixtralAttentionLayer", "PixtralAttention", "PixtralMLP"),
                      vision=PixtralVision, attention=PixtralAttention)
