"""The VQ encoders of Chameleon and Emu3 as ``model.vision`` (`VqEncoder`).

``encode`` is a method of the VQ model, not its forward, so the vision envoy is the encoder
it calls (``model.vqmodel.encoder``), whose output is what the quantizer reads after a
convolution (``quant_conv``): a grid of latents, a cell of which stands for
``2 ** (len(channel_multiplier) - 1)`` pixels a side of the processed image (16 on
Chameleon's published model, 8 on Emu3's) and becomes one code.

* ``tower_output`` is that grid as rows, ``[images, rows * columns, latent channels]``, a
  view (in-place edits land); a write changes the latents the quantizer reads, and so the
  codes (each cell's nearest codebook entry).
* ``patch_embeddings`` is refused: the encoder embeds no patches (its first convolution
  runs at every pixel); ``layers`` too: its resnet and attention blocks are not a
  transformer's. The sizes of tower blocks are refused for the same reason.
* ``image_codes`` and ``image_features`` are `CodesVision`'s: the ids the text model's
  embedding reads, and their embeddings where the scatter writes them.

Emu3's encoder runs an image as ``temporal_downsample_factor`` identical frames and folds
them in time to one (`Emu3Vision`); Chameleon's runs the image alone (`ChameleonVision`).
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import CodesVision, Unavailable, config_size, patches, value

NO_BLOCKS = (
    "the VQ encoder (model.vqmodel.encoder) is convolutional, stages of resnet blocks at falling resolutions "
    "and a middle block attending over the grid, none of them a transformer block; read them natively, or read "
    "vision.tower_output and vision.image_codes"
)
NO_PATCHES = (
    "the VQ encoder has no patch embedding: its first convolution (model.vqmodel.encoder.conv_in) runs at every "
    "pixel; its first value on the grid of the image's codes is vision.tower_output"
)


def _refused(name: str) -> property:
    def refuse(vision: Any) -> int:
        raise Unavailable(f"vision.{name} is unavailable: {NO_BLOCKS}")

    return property(refuse)


class VqEncoder(CodesVision):
    """A VQ encoder as a vision part with no blocks: its latents, then the codes."""

    standard_children: dict = {}
    refuses = {"patch_embeddings": NO_PATCHES, "layers": NO_BLOCKS}

    patch_embeddings = value("output", description="refused: the VQ encoder embeds no patches")(
        lambda vision, raw: raw
    )

    @property
    def _vision_config(self) -> Any:
        return self.root._module.config.vq_config

    @property
    def num_layers(self) -> int:
        return 0

    @property
    def vision_hidden_size(self) -> int:
        """The latents' width: what ``tower_output`` holds a row of."""
        config = self._vision_config
        return config.latent_channels * (2 if config.double_latent else 1)

    @property
    def patch_size(self) -> int:
        """Pixels a side of the processed image one cell (one code) stands for."""
        return 2 ** (len(self._vision_config.channel_multiplier) - 1)

    @property
    def patch_embedding_size(self) -> int:
        raise Unavailable(f"vision.patch_embedding_size is unavailable: {NO_PATCHES}")

    num_heads = _refused("num_heads")
    head_dim = _refused("head_dim")
    qk_head_dim = _refused("qk_head_dim")
    intermediate_size = _refused("intermediate_size")


class ChameleonVision(VqEncoder):
    """Chameleon's encoder: ``[images, latent channels, rows, columns]``."""

    tower_output = patches(
        "output", read=lambda raw: raw.flatten(2).transpose(1, 2),
        put=lambda raw, new: new.transpose(1, 2).reshape(raw.shape),
        description="the encoder's latents, a row per cell of the codes' grid, [images, cells, latent channels]",
    )

    codebook_size = config_size("num_embeddings", "How many codes the quantizer chooses among.")
    image_size = config_size("resolution", "The side of the square the processor crops every image to.")


def _frame(raw: torch.Tensor) -> torch.Tensor:
    """An image's one frame of Emu3's encoder output: ``[images, latent channels, rows, columns]``."""
    if raw.shape[1] != 1:
        raise Unavailable(f"vision.tower_output is unavailable: the encoder's output holds {raw.shape[1]} frames, "
                          f"and it is served for images (one frame each)")
    return raw[:, 0]


class Emu3Vision(VqEncoder):
    """Emu3's encoder: ``[images, frames, latent channels, rows, columns]``, one frame an image."""

    tower_output = patches(
        "output", read=lambda raw: _frame(raw).flatten(2).transpose(1, 2),
        put=lambda raw, new: new.transpose(1, 2).reshape(_frame(raw).shape).unsqueeze(1),
        description="the encoder's latents, a row per cell of the codes' grid, [images, cells, latent channels]",
    )

    codebook_size = config_size("codebook_size", "How many codes the quantizer chooses among.")

    @property
    def image_size(self) -> int:
        raise Unavailable(
            "vision.image_size is unavailable: Emu3's processor resizes every image to its own size, a multiple "
            "of vision.patch_size within its pixel bounds (model.processor.image_processor.min_pixels, max_pixels)"
        )

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image more than 200 times as long one way as the other, which Emu3's processor
        (Qwen2-VL's resize) refuses in its own words."""
        ratio = max(width, height) / max(1, min(width, height))
        if ratio <= 200:
            return None
        return (f"one side is {ratio:.0f} times the other, and the processor's resize takes at most 200: pad it "
                f"closer to square, or cut it into pieces")


def envoys(part: Any) -> dict[type, type]:
    """The VQ encoder's class onto its envoy (the rest of the VQ model is read natively)."""
    if part.model_type == "emu3_vqgan":
        from transformers.models.emu3 import modeling_emu3 as emu3

        return {emu3.Emu3VQVAEEncoder: Emu3Vision}
    from transformers.models.chameleon import modeling_chameleon as chameleon

    return {chameleon.ChameleonVQVAEEncoder: ChameleonVision}
