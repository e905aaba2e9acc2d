"""The towers of Idefics2, Idefics3 and SmolVLM: SigLIP's layout under classes of their own;
IDEFICS (1)'s: CLIP's.

``embeddings.patch_embedding``, ``encoder.layers`` of ``layer_norm1``, ``self_attn``,
``layer_norm2``, ``mlp``, then ``post_layernorm`` over every patch: the names come from the
``"siglip"`` adapter vlreg-llava publishes, and each family's classes are mapped onto the
standard envoys by name. Idefics2's tower runs on frames of each image's own size (`Idefics2Vision`).
IDEFICS's tower is laid out as CLIP's: the same names but ``post_layernorm``, which norms only
the pooled class token, and a class token before every image's patches (`IdeficsVision`).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Unavailable, Vision, VisionAttention, VisionLayer, VisionMlp, adapter, tower_envoys

SIGLIP = adapter("siglip")

#: family -> (its transformers module, the class-name prefix of its tower's classes)
FAMILIES = {"idefics2": ("idefics2", "Idefics2"), "idefics3": ("idefics3", "Idefics3"), "smolvlm": ("smolvlm", "SmolVLM")}


class Idefics2Vision(Vision):
    """The Idefics2 tower: the SigLIP layout, on frames of each image's own size. Its
    processor loads every image through transformers' ``load_image``, which takes PIL
    images only. A batch's frames are padded to the largest (a split image's crops to the
    whole image's frame), and the tower masks the padding's patches."""

    takes_arrays = False
    padded_patches = True

    def image_refusal(self, width: int, height: int) -> str | None:
        """A side under 2 pixels, where the processor splits images: each of its four crops
        would have a side of none, which it divides by."""
        image_processor = getattr(self.root.processor, "image_processor", None)
        if getattr(image_processor, "do_image_splitting", False) and min(width, height) < 2:
            return ("Idefics2's processor cuts each image into four crops of half its sides (do_image_splitting), so "
                    "it needs each side at least 2 pixels: pass an image at least 2 x 2 pixels (resize or pad it), "
                    "or give the trace do_image_splitting=False")
        return None

    @property
    def image_size(self) -> int:
        raise Unavailable(
            "vision.image_size is unavailable: Idefics2's processor keeps each image's aspect (its sides "
            "between shortest_edge and longest_edge) and pads a batch's frames to the largest; each frame's "
            "pixels are in the encoding's pixel_attention_mask, and its tokens' boxes in vision.geometry"
        )


def envoys(part: Any) -> dict[type, type]:
    """The tower's module classes, laid out as SigLIP's, onto the standard envoys (Idefics2's
    tower onto `Idefics2Vision`). Keyed by the tower's own model type, so a wrapper of another
    plugin hosting one of these towers (Aria's idefics3_vision) is served it as these
    wrappers are."""
    module, prefix = FAMILIES[part.model_type.removesuffix("_vision")]
    names = tuple(f"{prefix}{name}" for name in ("VisionTransformer", "EncoderLayer", "VisionAttention", "VisionMLP"))
    vision = Idefics2Vision if part.model_type == "idefics2_vision" else Vision
    return tower_envoys(module, names, vision=vision)(part)


#: IDEFICS's tower names: SigLIP's but its ``post_layernorm``, which on this CLIP-shaped tower
#: norms the pooled class token only (the perceiver reads the last block's stream).
IDEFICS_RENAME = {native: name for native, name in SIGLIP.rename.items() if native != "post_layernorm"}


class IdeficsVision(Vision):
    """IDEFICS's CLIP-shaped tower: a class token before the patches in every block. Its
    processor writes each image's placeholders itself, before the prompt's text, where a
    batch's images come as one flat list (a list per prompt puts them after the text)."""

    class_tokens = 1
    writes_placeholders = True
    flat_images = True


def idefics_envoys(part: Any) -> dict[type, type]:
    """IDEFICS's tower classes (in ``transformers.models.idefics.vision``) onto the standard envoys."""
    from transformers.models.idefics import vision as tower

    return {tower.IdeficsVisionTransformer: IdeficsVision, tower.IdeficsVisionEncoderLayer: VisionLayer,
            tower.IdeficsVisionAttention: VisionAttention, tower.IdeficsVisionMLP: VisionMlp}
