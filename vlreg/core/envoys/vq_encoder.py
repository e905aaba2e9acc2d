"""`VqEncoder`: a VQ model's encoder as the vision part (Chameleon's, Emu3's, Apertus 1.5's).

Such an encoder is convolutional: a first convolution at every pixel, stages of resnet
blocks at falling resolutions and a middle block attending over the grid, none of them a
transformer block. So the vision part has no blocks and embeds no patches: ``layers``,
``patch_embeddings`` and the block sizes are refused, each naming the encoder where the
family keeps it (``encoder``); its output's grid (``tower_output``, whose layout is the
family's to declare) and the codes (`CodesVision`) are served.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..errors import Unavailable
from ..serving.values import value
from .codes import CodesVision


def _no_blocks(vision: Any) -> str:
    return (f"{vision.encoder_name} ({vision.encoder}) is convolutional, stages of resnet blocks at falling "
            f"resolutions and a middle block attending over the grid, none of them a transformer block; read them "
            f"natively, or read vision.tower_output and vision.image_codes")


def _no_patches(vision: Any) -> str:
    return (f"{vision.encoder_name} has no patch embedding: its first convolution ({vision.encoder}.conv_in) runs "
            f"at every pixel; its first value on the grid of the image's codes is vision.tower_output")


def _refused(name: str) -> property:
    def refuse(vision: Any) -> int:
        raise Unavailable(f"vision.{name} is unavailable: {_no_blocks(vision)}")

    return property(refuse)


class VqEncoder(CodesVision):
    """The encoder as a vision part with no blocks: its latents, then the codes. A family
    sets ``encoder`` (its native path, as messages name it), ``encoder_name``,
    ``_vision_config``, ``tower_output`` and the sizes its config states."""

    standard_children: ClassVar[dict] = {}
    #: The encoder's native path from the root, as a refusal names it (``"model.vqmodel.encoder"``).
    encoder: ClassVar[str] = ""
    #: How a refusal names the encoder.
    encoder_name: ClassVar[str] = "the VQ encoder"
    refuses = {"patch_embeddings": _no_patches, "layers": _no_blocks}

    patch_embeddings = value("output", description="refused: the encoder embeds no patches")(lambda vision, raw: raw)

    @property
    def num_layers(self) -> int:
        return 0

    @property
    def patch_embedding_size(self) -> int:
        raise Unavailable(f"vision.patch_embedding_size is unavailable: {_no_patches(self)}")

    num_heads = _refused("num_heads")
    head_dim = _refused("head_dim")
    qk_head_dim = _refused("qk_head_dim")
    intermediate_size = _refused("intermediate_size")


def resize_ratio_refusal(width: int, height: int, most: int = 200) -> str | None:
    """Why Qwen2-VL's resize (which several processors are built on) refuses an image more
    than ``most`` times as long one way as the other, said before it runs; else ``None``."""
    ratio = max(width, height) / max(1, min(width, height))
    if ratio <= most:
        return None
    return (f"one side is {ratio:.0f} times the other, and the processor's resize takes at most {most}: pad it "
            f"closer to square, or cut it into pieces")
