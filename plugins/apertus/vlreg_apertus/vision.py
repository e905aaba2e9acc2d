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

from vlreg.plugin import CodesVision, Unavailable, config_size, modeling_envoys, patches, value

NO_BLOCKS = (
    "the vision tokenizer's encoder (model.vision_tokenizer.encoder) is convolutional, stages of resnet blocks at "
    "falling resolutions and a middle block attending over the grid, none of them a transformer block; read them "
    "natively, or read vision.tower_output and vision.image_codes"
)
NO_PATCHES = (
    "the vision tokenizer's encoder has no patch embedding: its first convolution "
    "(model.vision_tokenizer.encoder.conv_in) runs at every pixel; its first value on the grid of the image's codes "
    "is vision.tower_output"
)


def _refused(name: str) -> property:
    def refuse(vision: Any) -> int:
        raise Unavailable(f"vision.{name} is unavailable: {NO_BLOCKS}")

    return property(refuse)


class Apertus1p5Vision(CodesVision):
    """The encoder as a vision part with no blocks: its latents, then the codes."""

    standard_children: dict = {}
    per_image = True
    refuses = {"patch_embeddings": NO_PATCHES, "layers": NO_BLOCKS}

    patch_embeddings = value("output", description="refused: the encoder embeds no patches")(lambda vision, raw: raw)

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
    def num_layers(self) -> int:
        return 0

    @property
    def patch_size(self) -> int:
        """Pixels a side of the processed image one cell (one code) stands for."""
        return self._vision_config.spatial_scale_factor

    @property
    def patch_embedding_size(self) -> int:
        raise Unavailable(f"vision.patch_embedding_size is unavailable: {NO_PATCHES}")

    @property
    def image_size(self) -> int:
        raise Unavailable(
            "vision.image_size is unavailable: Apertus 1.5's processor resizes every image to its own size, multiples "
            "of vision.patch_size within its pixel bounds (model.processor.image_processor.size)"
        )

    num_heads = _refused("num_heads")
    head_dim = _refused("head_dim")
    qk_head_dim = _refused("qk_head_dim")
    intermediate_size = _refused("intermediate_size")

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image more than 200 times as long one way as the other, which the processor
        (Qwen2-VL's resize) refuses in its own words."""
        ratio = max(width, height) / max(1, min(width, height))
        if ratio <= 200:
            return None
        return (f"one side is {ratio:.0f} times the other, and the processor's resize takes at most 200: pad it "
                f"closer to square, or cut it into pieces")


envoys = modeling_envoys("apertus1p5", {"Apertus1p5VisionTokenizerEncoder": Apertus1p5Vision})
