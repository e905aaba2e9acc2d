"""DeepSeek-OCR 2's tower (``DeepseekOcr2VisionModel``, ``deepseek_ocr2_vision``) under the
standard classes.

The tower runs in two stages. SAM's ViT (``vision.sam_encoder``: windowed blocks with
relative positions, a neck, two stride-2 convolutions) turns a view into a grid of patches
as wide as the second stage; the query encoder (``vision_encoder``, Qwen2 decoder blocks
under a mask bidirectional over the patches and causal over the queries) then runs on the
patches' rows followed by a table of learned queries (``query_1024_resolution``'s 256 rows
where a view has more than 144 patches, ``query_768_resolution``'s 144 otherwise). Its
blocks are ``vision.layers``; the image's tokens are its query rows.

* ``patch_embeddings`` is SAM's output as ``[images, patches, vision_hidden_size]``, the rows
  the query encoder takes as its patches (SAM's own blocks are read natively, at
  ``vision.sam_encoder``);
* each block's values are over ``[patches; queries]`` (`Vision.trailing_tokens` is the query
  count of the global view);
* ``tower_output`` is the query encoder's final norm's output at the queries, what the
  projector reads: ``[images, queries, vision_hidden_size]``.

Each image runs through the tower twice where the processor cuts it into local tiles
(``crop_to_patches``, an image larger than a tile): the global view first, then the tiles
(``pixel_values_local``). The projector serves both calls (`Projector`); the tower's values
are refused in such a trace (`LOCAL_VIEWS`): they would be the global view's alone.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Gate, PerCall, Vision, patches, tower_envoys


class QueryVision(Vision):
    """SAM, then the query encoder, whose blocks are the tower's (see the module)."""

    @property
    def _vision_config(self) -> Any:
        """The query encoder's config: the blocks' sizes are its."""
        return self._module.config.encoder_config

    @property
    def patch_size(self) -> int:
        """SAM's patch side, in pixels."""
        return self._module.config.sam_config.patch_size

    @property
    def image_size(self) -> int:
        """SAM's pretraining side, in pixels (its position table's)."""
        return self._module.config.sam_config.image_size

    @property
    def trailing_tokens(self) -> int:
        """The learned queries after the patches in the global view's sequence: 256 where
        its grid holds more than 144 patches, else 144."""
        sam = self._module.config.sam_config
        side = -(-(-(-sam.image_size // sam.patch_size) // 2) // 2)
        return 256 if side * side > 144 else 144

    patch_embeddings = patches(
        lambda vision: f"{vision.sam_encoder.path}.output",
        read=lambda raw: raw.last_hidden_state.flatten(2).transpose(1, 2),
        put=lambda raw, new: raw.__setitem__("last_hidden_state", new.transpose(1, 2).reshape(
            raw.last_hidden_state.shape)) or raw,
        description="SAM's output, the rows the query encoder takes as its patches, [images, patches, hidden]",
    )
    tower_output = patches(
        "output",
        read=lambda raw: raw.last_hidden_state,
        put=lambda raw, new: raw.__setitem__("last_hidden_state", new) or raw,
        description="the query encoder's normed output at the queries, what the projector reads, "
                    "[images, queries, hidden]",
    )


class Projector(PerCall):
    """The projector (one linear layer): called on the global views, then again on the local
    tiles where the processor cut any, so ``input`` and ``output`` are lists, one a call."""

    def calls(self, inputs: dict) -> int:
        return 1 + (inputs.get("pixel_values_local") is not None)


LOCAL = ("the image was cut into local tiles (crop_to_patches: an image larger than a tile), so the tower ran twice, "
         "on the global views and then on the tiles, and vlreg serves one call's values only; pass images no larger "
         "than the image processor's tile_size a side to read the tower, or read the native modules under "
         "model.vision, whose output is per call")
#: The tower's values, refused in a trace whose images were cut into tiles.
LOCAL_VIEWS = {row: Gate(lambda asked: LOCAL if asked.run.inputs.get("pixel_values_local") is not None else None)
               for row in ("vision.patch_embeddings", "vision.tower_output", "vision.input", "vision.layer_output",
                           "vision.self_attn.*", "vision.mlp.*", "vision.layers.*")}

#: The query encoder's classes onto the standard envoys, the tower onto `QueryVision`.
envoys = tower_envoys("deepseek_ocr2", ("DeepseekOcr2VisionModel", "DeepseekOcr2VisionEncoderLayer",
                                        "DeepseekOcr2VisionAttention", "DeepseekOcr2VisionMLP"), vision=QueryVision)
#: From the tower: the query encoder's blocks (Qwen2's names are the standard ones).
RENAME = {"vision_encoder.layers": "layers"}


def wrapper_envoys(part: Any) -> dict:
    """The projector (an ``nn.Linear``, so named by its path) onto `Projector`."""
    return {"model.multi_modal_projector": Projector}


# -- Unlimited-OCR (``unlimited_ocr``): SAM, then a CLIP encoder ------------------------


class SamClipVision(QueryVision):
    """SAM, then a CLIP encoder with a class token before the patches (see the module)."""

    class_tokens = 1
    trailing_tokens = 0

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image so thin that scaling its longer side to the global view's leaves its
        shorter side no pixel, which the image processor cannot resize to."""
        settings = getattr(self.root.processor, "image_processor", None)
        if settings is None or not hasattr(settings, "maximum_pad_value"):
            return None
        side = max(settings.size["height"], settings.size["width"])
        if not settings.crop_to_patches and side <= settings.maximum_pad_value:
            return None  # squeezed onto the square, never scaled by its aspect
        if round(min(width, height) * side / max(width, height)) > 0:
            return None
        return (f"scaled to the {side}-pixel global view its shorter side is less than half a pixel; pass an image "
                f"whose sides differ by less than {2 * side} times")

    tower_output = patches(
        "output",
        read=lambda raw: raw.last_hidden_state,
        put=lambda raw, new: raw.__setitem__("last_hidden_state", new) or raw,
        description="each patch's CLIP row beside SAM's, what the projector reads, "
                    "[images, patches, vision_hidden_size + SAM's channels]",
    )


#: The CLIP encoder's classes onto the standard envoys, the tower onto `SamClipVision`.
unlimited_envoys = tower_envoys("unlimited_ocr", ("UnlimitedOcrVisionModel", "UnlimitedOcrEncoderLayer", "UnlimitedOcrAttention",
                                        "UnlimitedOcrMLP"), vision=SamClipVision)
#: From the tower: CLIP's blocks and norms.
UNLIMITED_RENAME = {"vision_encoder.encoder.layers": "layers", "layer_norm1": "input_layernorm",
          "layer_norm2": "post_attention_layernorm"}
