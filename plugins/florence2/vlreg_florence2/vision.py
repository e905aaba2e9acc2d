"""Florence-2's DaViT tower (``florence_vision``) under the standard envoy classes.

The DaViT tower (`DaViT`) runs stages of a strided convolution and blocks over a
``[images, channels, rows, columns]`` grid; each block is a windowed-attention half and a
channel-attention half, each with its own convolutional position encoding, neither of
the text block's shape. They are not served as ``vision.layers``: a read names the
stages to read natively instead.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import Unavailable, Vision, patches


def _grid(raw: Any) -> torch.Tensor:
    return raw.last_hidden_state.flatten(2).transpose(1, 2)


def _put_grid(raw: Any, new: torch.Tensor) -> Any:
    grid = raw.last_hidden_state
    raw["last_hidden_state"] = new.reshape(grid.shape[0], -1, grid.shape[1]).transpose(1, 2).reshape(grid.shape)
    return raw


NO_BLOCKS = (
    "DaViT's blocks (model.vision.blocks[stage][block], each a windowed-"
    "attention half and a channel-attention half over a grid of channels, with convolutional position "
    "encodings) have no standard block's shape; read them natively, or read vision.patch_embeddings and "
    "vision.tower_output"
)


class DaViT(Vision):
    """Florence-2's DaViT tower: convolutional stages, each a strided convolution and
    blocks of windowed and channel attention; ``tower_output`` is the last stage's grid,
    a token per cell, what the projector reads."""

    standard_children: dict = {}
    order = ("image_token_mask", "patch_embeddings", "tower_output", "image_features")
    refuses = {"layers": NO_BLOCKS}
    writes_placeholders = True

    tower_output = patches(
        "output", read=_grid, put=_put_grid,
        description="the last stage's grid as rows, [images, cells, vision_hidden_size], before the projector",
    )

    @property
    def num_layers(self) -> int:
        return 0

    @property
    def vision_hidden_size(self) -> int:
        """The last stage's width: what the projector reads."""
        return self._vision_config.embed_dim[-1]

    @property
    def patch_embedding_size(self) -> int:
        """The first stage's width: what its convolution embeds the pixels to."""
        return self._vision_config.embed_dim[0]

    @property
    def patch_size(self) -> int:
        """Pixels a side of the cell one token of the last grid stands for: the stages' strides multiplied."""
        size = 1
        for stride in self._vision_config.patch_stride:
            size *= stride
        return size

    @property
    def image_size(self) -> int:
        raise Unavailable(
            "vision.image_size is unavailable: the tower takes any size; the processor resizes every image to "
            "its own size (model.processor.image_processor.size)"
        )


def envoys(part: Any) -> dict[type, type]:
    """The tower onto `DaViT` (its stages keep their native names)."""
    from transformers.models.florence2 import modeling_florence2 as florence2

    return {florence2.Florence2VisionBackbone: DaViT}
