"""Apertus 1.5's vision tokenizer's encoder as ``model.vision`` (`Apertus1p5Vision`).

The vision tokenizer (``model.vision_tokenizer``, Emu3.5's, kept in float32) is a VQGAN
encoder as Chameleon's, then a quantizer that picks, per cell, the codebook entry of the
largest inner product. Its ``encode`` is a method, not its forward, so the vision envoy is
the encoder it calls (``model.vision_tokenizer.encoder``); its output, after a 1 x 1
convolution (``quant_conv``), is what the quantizer (``projector``) reads: a grid of
latents, a cell of which stands for ``2 ** (len(channel_multiplier) - 1)`` pixels a side of
the processed image (16 on the published model) and becomes one code.

* ``tower_output`` is that grid as rows, ``[1, rows * columns, latent channels]``, a view;
  a write changes the latents the quantizer reads, and so the codes.
* ``patch_embeddings`` and ``layers`` are refused: the encoder embeds no patches (its first
  convolution runs at every pixel) and its resnet and attention blocks are not a
  transformer's; so are the sizes of tower blocks.
* ``image_codes`` and ``image_features`` are `CodesVision`'s.

The wrapper encodes image by image, each cropped to its own size (`Vision.per_image`): the
encoder's values are one image's, refused on a run of several (``image_features`` holds
them all).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Unavailable, VqEncoder, config_size, modeling_envoys, patches, resize_ratio_refusal


class Apertus1p5Vision(VqEncoder):
    """The encoder as a vision part with no blocks: its latents, then the codes."""

    encoder = "model.vision_tokenizer.encoder"
    encoder_name = "the vision tokenizer's encoder"
    per_image = True

    tower_output = patches(
        "output", read=lambda raw: raw.flatten(2).transpose(1, 2),
        put=lambda raw, new: new.transpose(1, 2).reshape(raw.shape),
        description="the encoder's latents, a row per cell of the codes' grid, [images, cells, latent channels]",
    )

    codebook_size = config_size("codebook_size", "How many codes the quantizer chooses among.")
    vision_hidden_size = config_size("latent_channels", "The latents' width: what tower_output holds a row of.")

    @property
    def _vision_config(self) -> Any:
        return self.root._module.config.vision_config

    @property
    def patch_size(self) -> int:
        """Pixels a side of the processed image one cell (one code) stands for."""
        return self._vision_config.spatial_scale_factor

    @property
    def image_size(self) -> int:
        raise Unavailable(
            "vision.image_size is unavailable: Apertus 1.5's processor resizes every image to its own size, multiples "
            "of vision.patch_size within its pixel bounds (model.processor.image_processor.size)"
        )

    def image_refusal(self, width: int, height: int) -> str | None:
        """The processor resizes as Qwen2-VL's does, and refuses what that refuses."""
        return resize_ratio_refusal(width, height)


envoys = modeling_envoys("apertus1p5", {"Apertus1p5VisionTokenizerEncoder": Apertus1p5Vision})
