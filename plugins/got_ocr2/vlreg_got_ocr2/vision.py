"""GOT-OCR 2.0's tower (``GotOcr2VisionEncoder``, SAM's ViT) under the standard classes; the
same classes serve PP-Chart2Table's (``pp_chart2table_vision``).

The tower keeps its patches as a grid, ``[images, rows, columns, hidden]``, from the patch
embedding to the last block: every tower value (the patch embedding's output, each block's
``input`` and ``layer_output``, each sublayer's output) is served as `Patches`, the grid's
rows in raster order (``patch = row * columns + column``), as a view, so in-place edits
land. ``layers[0].input`` is ``patch_embeddings`` plus the learned absolute positions
(``pos_embed``, the pretraining grid's).

A block (``GotOcr2VisionLayer``) is pre-norm: ``layer_norm1``, the attention, the residual
add, ``layer_norm2``, the MLP (``lin1``, GELU, ``lin2``), the add; so ``input +
self_attn.attention_output + mlp.mlp_output == layer_output``. The attention is written out
in its forward (no attention function is called): decomposed relative positions (a row and
a column table) are added to the scaled scores before the softmax. Blocks are of two kinds
(``global_attn_indexes``):

* a **global** block attends over the whole grid: its queries, keys and values
  (``[images, heads, patches, head_dim]``, served as copies written back: they are views
  ``unbind`` returns), scores (relative positions added) and pattern (``[images, heads,
  patches, patches]``) and head outputs (``[images, patches, heads, head_dim]``) are served,
  read in its forward;
* a **windowed** block pads the grid to a multiple of ``window_size`` and runs its attention
  on each window alone (``[images * windows, window, window, hidden]``, padding included);
  the block cuts the result back to the grid (``window_unpartition``), and
  ``attention_output`` is read there, over the image's patches. The interior is per window,
  not over the image's patches: refused by name (`WINDOWED`).

After the blocks the ``neck`` (a 1 x 1 convolution to ``output_channels``, a norm, a 3 x 3
convolution, a norm) keeps the grid, channels first: ``tower_output`` is its output as
``[images, patches, output_channels]`` (not ``vision_hidden_size`` wide), what the projector
reads, so every tower value takes a write.

The processor reads a nested list of images as one prompt's pages (``multi_page``): a
batch's images go to it as one flat list, each prompt's in order (`Vision.flat_images`).
An image's placeholder in a prompt is a run of ``<imgpad>`` (`Vision.placeholder_runs`):
GOT's processor expands one into the image's tokens, PP-Chart2Table's template writes them.
"""

from __future__ import annotations

from typing import Any

import torch
from attrs import frozen
from nnsight.intervention.util import first_input, replace_first_input

from vlreg.plugin import Vision, VisionAttention, VisionLayer, VisionMlp, config_size, patches, tower_envoys, value


def _rows(grid: torch.Tensor) -> torch.Tensor:
    """A channels-last grid ``[images, rows, columns, hidden]`` as ``[images, patches, hidden]`` (a view)."""
    return grid.flatten(1, 2)


def _grid(raw: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    return new.reshape(raw.shape)


class GotVision(Vision):
    """The tower: a fixed grid of patches, no class token, the neck last."""

    flat_images = True
    placeholder_runs = True

    @value(lambda vision: f"{vision.patch_embed.path}.output")
    def patch_embeddings(self, raw: torch.Tensor) -> torch.Tensor:
        """The patch embedding's output, a row per patch in raster order, before the absolute positions."""
        return _rows(raw)

    patch_embeddings.writes(lambda vision, raw, new: _grid(raw, new))

    tower_output = patches(
        "output",
        read=lambda raw: raw.last_hidden_state.flatten(2).transpose(1, 2),
        put=lambda raw, new: raw.__setitem__("last_hidden_state", new.transpose(1, 2).reshape(raw.last_hidden_state.shape))
        or raw,
        description="the neck's output, what the projector reads, [images, patches, output_channels]",
    )

    intermediate_size = config_size("mlp_dim")
    output_channels = config_size("output_channels", "The width of ``tower_output``: the neck's channels.")
    window_size = config_size("window_size", "The side of a windowed block's window, in patches.")

    @property
    def global_layers(self) -> list[int]:
        """The blocks that attend over the whole grid; the others attend within windows."""
        return list(self._vision_config.global_attn_indexes)


class GotLayer(VisionLayer):
    """A tower block over the grid; its forward is read (`sourced`), since a windowed block's
    attention output is read where the block puts the windows back together."""

    sourced = True

    @value("input")
    def input(self, raw: Any) -> torch.Tensor:
        """The stream entering the block, [images, patches, hidden]."""
        return _rows(first_input(*raw))

    input.writes(lambda layer, raw, new: replace_first_input(*raw, _grid(first_input(*raw), new)))

    layer_output = patches(read=_rows, put=_grid, description="the stream leaving the block, [images, patches, hidden]")


def _tower(envoy: Any) -> Any:
    """The SAM tower ``envoy`` is part of: the tower, or a second tower mounted under another
    (DeepSeek-VL-Hybrid's, at ``vision.second_tower``)."""
    while not isinstance(envoy, GotVision):
        envoy = envoy.parent
    return envoy


def windowed(envoy: Any) -> bool:
    """Whether the block ``envoy`` is in (or is) attends within windows."""
    return _tower(envoy)._module.layers[envoy.block_index].window_size > 0


WINDOWED = (
    "block {index} attends within {size} x {size}-patch windows of the grid padded to a multiple of {size}, so its "
    "attention's queries, keys, values, scores, pattern and head outputs are per window ([images * windows, ...], "
    "padding included), not over the image's patches; read them natively at {block}.self_attn.source, "
    "or read a global block's ({tower}.global_layers: {globals})"
)


def _global_only(attention: Any) -> str | None:
    if not windowed(attention):
        return None
    tower = _tower(attention)
    config = tower._vision_config
    return WINDOWED.format(index=attention.block_index, size=config.window_size, globals=list(config.global_attn_indexes),
                           block=attention.place.label.rsplit(".", 1)[0], tower=tower.place.label)


def _heads(attention: Any, flat: torch.Tensor) -> torch.Tensor:
    """``[images * heads, n, d]`` as ``[images, heads, n, d]`` (a view)."""
    return flat.view(-1, attention.num_heads, *flat.shape[1:])


def _unbound(index: int, description: str) -> value:
    """Element ``index`` of the ``unbind`` that splits the queries, keys and values: torch
    forbids editing those views in place, so it is served as a copy, ``[images, heads,
    patches, head_dim]``, written back when the trace moves on."""

    def put(attention: Any, raw: tuple, new: torch.Tensor) -> tuple:
        return (*raw[:index], new.reshape(raw[index].shape), *raw[index + 1 :])

    served = value("source.unbind_0.output", description=description)(
        lambda attention, raw: _heads(attention, raw[index].clone())
    ).writes(put)
    return served.transform(lambda attention, view, raw: put(attention, raw, view))


def _first_argument(raw: Any) -> torch.Tensor:
    return raw[0][0]


def _with_first_argument(raw: Any, new: torch.Tensor) -> Any:
    args, kwargs = raw
    return (new.reshape(args[0].shape), *args[1:]), kwargs


def _attention_output(attention: Any) -> str:
    if windowed(attention):
        return f"{attention.parent.path}.source.self_window_unpartition_0.output"
    return f"{attention.path}.output"


def _added(raw: Any) -> torch.Tensor:
    return raw[0] if isinstance(raw, tuple) else raw


def _put_added(raw: Any, new: torch.Tensor) -> Any:
    new = new.reshape(_added(raw).shape)
    return (new, *raw[1:]) if isinstance(raw, tuple) else new


class GotAttention(VisionAttention):
    """A tower block's attention, written out in its forward; its interior served on global
    blocks only (see the module): a windowed block's refuses them (`_global_only`)."""

    refuses = dict.fromkeys(("attention_queries", "attention_keys", "attention_values", "attention_scores",
                             "attention_probabilities", "attention_head_outputs"), _global_only)

    attention_queries = _unbound(0, "the queries (no rotation: positions enter the scores)")
    attention_keys = _unbound(1, "the keys")
    attention_values = _unbound(2, "the values")
    attention_scores = value(
        "source.torch_nn_functional_softmax_0.input",
        description="scaled query-key scores with the relative positions added, before the softmax",
    )(lambda attention, raw: _heads(attention, _first_argument(raw))).writes(
        lambda attention, raw, new: _with_first_argument(raw, new))
    attention_probabilities = value(
        "source.nn_functional_dropout_0.output",
        description="the pattern that weights the values, [images, heads, patches, patches]",
    )(lambda attention, raw: _heads(attention, raw)).writes(lambda attention, raw, new: new.reshape(raw.shape))
    attention_head_outputs = value(
        lambda attention: f"{attention.proj.path}.input",
        description="each head's output as proj receives it, [images, patches, heads, head_dim]",
    )(lambda attention, raw: _rows(_first_argument(raw)).unflatten(-1, (attention.num_heads, -1))).writes(
        lambda attention, raw, new: _with_first_argument(raw, new))
    attention_output = patches(
        _attention_output, read=lambda raw: _rows(_added(raw)), put=_put_added,
        description="what the attention adds to the stream, over the image's patches, [images, patches, hidden]",
    )

    @property
    def num_heads(self) -> int:
        return self._module.num_attention_heads

    @property
    def num_kv_heads(self) -> int:
        return self.num_heads

    @property
    def head_dim(self) -> int:
        return self._module.qkv.out_features // 3 // self.num_heads


class GotMlp(VisionMlp):
    """A tower block's MLP (``lin1``, GELU, ``lin2``) over the grid."""

    _widening = ("lin1",)
    mlp_output = patches(read=_rows, put=_grid, description="what the MLP adds to the stream, [images, patches, hidden]")


def rename(part: Any) -> dict[str, str]:
    """From the tower. The block norms are keyed per block: the neck spells its norms
    ``layer_norm1`` and ``layer_norm2`` too, and is no block."""
    names = {"attn": "self_attn"}
    for index in range(part.config.num_hidden_layers):
        names[f"layers.{index}.layer_norm1"] = f"layers.{index}.input_layernorm"
        names[f"layers.{index}.layer_norm2"] = f"layers.{index}.post_attention_layernorm"
    return names


#: The tower's classes onto the envoys above (PP-Chart2Table's tower is GOT's classes).
envoys = tower_envoys("got_ocr2", ("GotOcr2VisionEncoder", "GotOcr2VisionLayer", "GotOcr2VisionAttention",
                                   "GotOcr2MLPBlock"), vision=GotVision, layer=GotLayer, attention=GotAttention,
                      mlp=GotMlp)


@frozen
class SamViT:
    """The adapter ``"sam_vit"``: SAM's ViT as GOT-OCR 2.0 serves it, for another family whose
    tower is SAM's (transformers' ``SamVisionEncoder``, whose classes GOT's copy): the envoy
    classes of the tower, its blocks, their attention and MLP, and the tower's names
    (``rename``, a function of the part). A public promise of vlreg-got-ocr2."""

    Vision: type
    Layer: type
    Attention: type
    Mlp: type
    rename: Any


SAM_VIT = SamViT(Vision=GotVision, Layer=GotLayer, Attention=GotAttention, Mlp=GotMlp, rename=rename)
