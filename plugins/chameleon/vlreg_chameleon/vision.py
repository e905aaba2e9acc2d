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

from vlreg.plugin import Unavailable, VqEncoder, config_size, patches, resize_ratio_refusal


class ChameleonVqEncoder(VqEncoder):
    """Chameleon's and Emu3's VQ encoder (``model.vqmodel.encoder``)."""

    encoder = "model.vqmodel.encoder"

    @property
    def _vision_config(self) -> Any:
        return self.root._module.config.vq_config

    @property
    def vision_hidden_size(self) -> int:
        """The latents' width: what ``tower_output`` holds a row of."""
        config = self._vision_config
        return config.latent_channels * (2 if config.double_latent else 1)

    @property
    def patch_size(self) -> int:
        """Pixels a side of the processed image one cell (one code) stands for."""
        return 2 ** (len(self._vision_config.channel_multiplier) - 1)


class ChameleonVision(ChameleonVqEncoder):
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


class Emu3Vision(ChameleonVqEncoder):
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
        """Emu3's processor resizes as Qwen2-VL's does, and refuses what that refuses."""
        return resize_ratio_refusal(width, height)


def envoys(part: Any) -> dict[type, type]:
    """The VQ encoder's class onto its envoy (the rest of the VQ model is read natively)."""
    if part.model_type == "emu3_vqgan":
        from transformers.models.emu3 import modeling_emu3 as emu3

        return {emu3.Emu3VQVAEEncoder: Emu3Vision}
    from transformers.models.chameleon import modeling_chameleon as chameleon

    return {chameleon.ChameleonVQVAEEncoder: ChameleonVision}
