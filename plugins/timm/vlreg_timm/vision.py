"""timm towers inside transformers' ``TimmWrapperModel`` (``timm_wrapper``), and the adapter
``"timm_tower"``.

A ``timm_wrapper`` config names a timm architecture (``architecture``) and the keyword
arguments it is built with (``model_args``); the wrapper holds the timm model at
``timm_model`` and returns its ``forward_features`` as ``last_hidden_state``. What the
standard names reach depends on the timm model's own layout, read off its module tree
(names that bind only where they resolve), never off the architecture's name:

* a ViT layout (timm's ``Eva``: EVA, the Perception Encoder; ``VisionTransformer``):
  ``patch_embed.proj`` is the patch convolution, ``blocks`` the blocks, ``norm`` the final
  norm (an identity where the config turns it off). A block is pre-norm,
  ``x + drop_path1(ls(attn(norm1(x))))`` then ``+ drop_path2(ls(mlp(norm2(x))))``, where
  ``ls`` is a layer scale (a parameter on EVA, a module on ViT, or none). What each
  sublayer adds to the stream is its ``drop_path``'s output (an identity at inference), so
  `TimmAttention.attention_output` and `TimmMlp.mlp_output` are read there: the block
  identity ``input + attention_output + mlp_output == layer_output`` holds with or without
  a layer scale, and a write there is what the stream adds. The class tokens before the
  patches are the model's ``num_prefix_tokens``.
* a convolutional layout (FastViT: ``stem``, then ``stages`` of blocks over a 2-D grid
  whose width grows stage by stage, then ``final_conv``): no block is a standard block, so
  ``vision.layers`` is unbound (the wrapper's claim says why); ``patch_embeddings`` is the
  stem's grid and ``tower_output`` the final grid, each cell a row.

Either way `TimmVision` serves a 4-D grid ``[images, channels, rows, columns]`` as
``[images, rows * columns, channels]``, a view, so edits land.

timm's attention runs in its own forward, not through transformers' attention interface, so
its interior is read at the operations of that forward (`TimmAttention`): a fused call
(``F.scaled_dot_product_attention``, timm's default) is handed the queries, keys and values
and forms no pattern; timm's explicit path (``fused_attn`` off) forms the scores and the
pattern. Each value is served where its path forms it and refused by name on the other.

Every key is a native path that binds only where it resolves, and none names a timm class:
a remote request carries the envoys map, and resolving a family needs no timm beyond the
model's own.
"""

from __future__ import annotations

from typing import Any

import torch
from attrs import frozen

from vlreg.plugin import Unavailable, Vision, VisionAttention, VisionLayer, VisionMlp, argument, patches, returned

RENAME = {
    "timm_model.patch_embed.proj": "patch_embed",
    "timm_model.stem": "patch_embed",
    "timm_model.blocks": "layers",
    "timm_model.norm": "norm",
    "norm1": "input_layernorm",
    "norm2": "post_attention_layernorm",
    "attn": "self_attn",
}


#: nnsight's names for the operations of timm's attention forward (``AttentionRope``,
#: ``Attention``) the interior is read at: the fused call, the explicit path's masked scores,
#: and the heads' outputs laid out ``[batch, seq, heads, head_dim]`` (both paths).
FUSED, SCORES, HEADS = "F_scaled_dot_product_attention_0", "maybe_add_mask_0", "x_transpose_0"


def _unread(attention: Any, operation: str) -> str | None:
    if hasattr(attention.source, operation):
        return None
    return (
        f"timm's {type(attention._module).__name__} is not an attention whose forward vlreg reads (no "
        f"{operation} in it); attention_output (what it adds to the stream) is served"
    )


def _fused(attention: Any) -> str | None:
    """Queries, keys and values: what the fused call is handed (timm's default path)."""
    reason = _unread(attention, FUSED)
    if reason or attention._module.fused_attn:
        return reason
    return (
        "timm's explicit path (fused_attn off) scales the queries and reads the values in operations of no name "
        "of their own; attention_scores, attention_probabilities and attention_head_outputs are served there, and "
        "the queries, keys and values on the fused path (fused_attn on, timm's default)"
    )


def _explicit(attention: Any) -> str | None:
    """Scores and the pattern: formed only on timm's explicit path."""
    reason = _unread(attention, SCORES)
    if reason or not attention._module.fused_attn:
        return reason
    return (
        f"timm's {type(attention._module).__name__} runs the fused F.scaled_dot_product_attention, which forms no "
        "pattern: compute it from attention_queries and attention_keys (softmax(q @ k^T / sqrt(head_dim))), or "
        "build the tower on timm's explicit path (TIMM_FUSED_ATTN=0 before timm is imported), which serves it"
    )


def _at(operation: str, end: str):
    return lambda attention: f"{attention.path}.source.{operation}.{end}"


def _added_at(name: str):
    """The block's ``drop_path`` module after a sublayer: what the stream adds."""
    return lambda envoy: f"{envoy.parent.path}.{name}.output"


class TimmAttention(VisionAttention):
    """A timm ViT block's attention, read in its own forward: on timm's fused path (its
    default) the queries, keys and values the fused call is handed (after the rotary
    embedding; keys and values repeated to every query head), on its explicit path the
    scores (scaled, masked) and the pattern; the heads' outputs on both, ``[images,
    patches, heads, head_dim]`` before ``proj``. ``attention_output`` is what the stream
    adds (after the block's layer scale, at its ``drop_path1``)."""

    sourced = True
    refuses = {
        **dict.fromkeys(("attention_queries", "attention_keys", "attention_values"), _fused),
        **dict.fromkeys(("attention_scores", "attention_probabilities"), _explicit),
        "attention_head_outputs": lambda attention: _unread(attention, HEADS),
    }
    # views of one unbind (where no rotary embedding remakes them): torch refuses in-place
    # edits of them, so they are served as copies written back
    attention_queries = argument(0, _at(FUSED, "input"), copy=True,
                                 description="the queries, after the rotary embedding (timm's fused path)")
    attention_keys = argument(1, _at(FUSED, "input"), copy=True,
                              description="the keys, after the rotary embedding (timm's fused path)")
    attention_values = argument(2, _at(FUSED, "input"), copy=True, description="the values (timm's fused path)")
    attention_scores = returned(_at(SCORES, "output"),
                                description="query-key scores before the softmax, scaled (timm's explicit path)")
    attention_probabilities = returned(lambda attention: f"{attention.path}.attn_drop.output",
                                       description="the pattern that weights the values (timm's explicit path)")
    attention_head_outputs = returned(_at(HEADS, "output"), description="each head's output, before proj")
    attention_output = patches(
        _added_at("drop_path1"),
        description="what the attention adds to the stream (after the block's layer scale), [images, patches, hidden]",
    )


class TimmMlp(VisionMlp):
    """A timm ViT block's MLP: ``mlp_output`` is what the stream adds (after the block's layer
    scale, at its ``drop_path2``)."""

    mlp_output = patches(
        _added_at("drop_path2"),
        description="what the MLP adds to the stream (after the block's layer scale), [images, patches, hidden]",
    )


def _rows(grid: torch.Tensor) -> torch.Tensor:
    """A ``[images, channels, rows, columns]`` grid as ``[images, cells, channels]`` (a view);
    a sequence ``[images, tokens, channels]`` as it is."""
    return grid.flatten(2).transpose(1, 2) if grid.dim() == 4 else grid


def _grid(rows: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``rows`` in the layout of ``like`` (the inverse of `_rows`)."""
    if like.dim() != 4:
        return rows.reshape(like.shape)
    images, channels = like.shape[:2]
    return rows.reshape(images, -1, channels).transpose(1, 2).reshape(like.shape)


def _put_last_hidden_state(raw: Any, new: torch.Tensor) -> Any:
    raw["last_hidden_state"] = _grid(new, raw.last_hidden_state)
    return raw


class TimmVision(Vision):
    """A timm tower: its sizes read off the timm model (``timm_model``), its class tokens the
    model's ``num_prefix_tokens``. Where the model has no ViT-layout ``blocks`` (FastViT's
    stages), ``vision.layers`` is unbound, `num_layers` is 0 and the block sizes are refused;
    ``patch_embeddings``, ``tower_output`` and ``image_features`` stay served."""

    #: timm's models read their drop-path rates off a tensor while they are built.
    built_for_real = tuple(f"timm.models.{module}.calculate_drop_path_rates"
                           for module in ("eva", "fastvit", "vision_transformer"))

    tower_output = patches(
        "output", read=lambda raw: _rows(raw.last_hidden_state), put=_put_last_hidden_state,
        description="the tower's last stream, [images, patches (or grid cells), vision_hidden_size], before the projector",
    )

    @property
    def _timm(self) -> Any:
        return self._module.timm_model

    def images_refusal(self, sizes: list[tuple[int, int]]) -> str | None:
        """Perception LM's processor stacks each image's tiles (a thumbnail, then the tiles
        its aspect takes) into one tensor: images of different tile counts cannot share a
        call."""
        tiles = [self._tiles(width, height) for width, height in sizes]
        if None in tiles or len(set(tiles)) == 1:
            return None
        counts = ", ".join(f"{width} x {height}: {count}" for (width, height), count in zip(sizes, tiles))
        return (f"this processor stacks each image's tiles (a thumbnail and the tiles of its aspect) into one tensor, "
                f"so images of one call must make as many tiles, and these make different numbers ({counts}): trace "
                f"them one at a time (collect groups them itself), or give them one aspect")

    def _tiles(self, width: int, height: int) -> int | None:
        """The tiles Perception LM's image processor cuts an image into, thumbnail included;
        ``None`` for another processor."""
        ip = getattr(self.root.processor, "image_processor", None)
        if not hasattr(ip, "_fit_image_to_canvas") or getattr(ip, "vision_input_type", "") != "thumb+tile":
            return None
        if ip.max_num_tiles <= 1:
            return 2
        aspect = (ip._fit_image_to_canvas(img_width=width, img_height=height, tile_size=ip.tile_size)
                  or ip._find_closest_aspect_ratio(img_width=width, img_height=height, tile_size=ip.tile_size))
        return aspect[0] * aspect[1] + 1

    def _blocks(self, name: str) -> Any:
        blocks = self.__dict__.get("layers")
        if blocks is None:
            raise Unavailable(
                f"vision.{name} is unavailable: the timm model {type(self._timm).__name__} "
                f"({self._module.config.architecture}) has no ViT-layout blocks (timm_model.blocks), so no size is "
                "shared by every block; read its modules natively"
            )
        return blocks

    @property
    def class_tokens(self) -> int:
        return int(getattr(self._timm, "num_prefix_tokens", 0))

    @property
    def num_layers(self) -> int:
        blocks = self.__dict__.get("layers")
        return 0 if blocks is None else len(blocks)

    @property
    def vision_hidden_size(self) -> int:
        """The width of ``tower_output``: the timm model's ``num_features``."""
        return int(self._timm.num_features)

    @property
    def patch_embedding_size(self) -> int:
        """The width of ``patch_embeddings``: the last convolution of the patch embedding (or stem)."""
        convolutions = [module for module in self.patch_embed._module.modules() if isinstance(module, torch.nn.Conv2d)]
        return int(convolutions[-1].out_channels)

    @property
    def num_heads(self) -> int:
        self._blocks("num_heads")
        return super().num_heads

    @property
    def head_dim(self) -> int:
        self._blocks("head_dim")
        return super().head_dim

    @property
    def intermediate_size(self) -> int:
        self._blocks("intermediate_size")
        return super().intermediate_size

    @property
    def patch_size(self) -> int:
        """Pixels a side of the cell one row of ``tower_output`` stands for: the timm model's
        last reduction (a ViT's patch; FastViT's stem and downsamplings multiplied)."""
        return int(self._timm.feature_info[-1]["reduction"])

    @property
    def image_size(self) -> int:
        embed = getattr(self._timm, "patch_embed", None)
        size = getattr(embed, "img_size", None)
        if size is None or getattr(self._timm, "dynamic_img_size", False):
            raise Unavailable(
                f"vision.image_size is unavailable: the timm model {type(self._timm).__name__} takes any size; the "
                "processor says what it hands it (model.processor.image_processor)"
            )
        height, width = size
        if height != width:
            raise Unavailable(f"vision.image_size is unavailable: the tower's is {height} x {width}, not square")
        return int(height)


#: The ViT layout's envoys, keyed by native path (nnsight's path-suffix keys), not by timm's
#: classes: a key travels with a remote request, and a path needs no timm to read.
VIT_ENVOYS = {
    "timm_model.blocks.*": VisionLayer,
    "timm_model.blocks.*.attn": TimmAttention,
    "timm_model.blocks.*.mlp": TimmMlp,
}


@frozen
class TimmTower:
    """The adapter ``"timm_tower"`` vlreg-timm publishes: how a timm model held at
    ``timm_model`` by a tower module is served, for a family whose tower wraps a timm model
    under a config of its own. A public promise of vlreg-timm.

    ``rename`` is the tower's names relative to the tower module; ``envoys(tower)`` maps the
    tower module's class onto `TimmVision` and its blocks' native paths (``timm_model.blocks.*``,
    ``.attn``, ``.mlp``) onto the standard block classes. Both bind only where the timm model
    has those paths, so a ViT-layout model gets its blocks and any other leaves
    ``vision.layers`` unbound.
    """

    rename: dict
    vision: type

    def envoys(self, tower: type) -> dict:
        return {tower: self.vision, **VIT_ENVOYS}


TIMM_TOWER = TimmTower(rename=RENAME, vision=TimmVision)


def envoys(part: Any) -> dict:
    """The ``timm_wrapper`` tower onto `TimmVision`, its ViT blocks (where it has them) by path."""
    from transformers import TimmWrapperModel

    return TIMM_TOWER.envoys(TimmWrapperModel)
