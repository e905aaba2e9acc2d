"""Towers that pack every image into one row and attend within each image by calling the
attention function once per image: `PerImageAttention`, `PackedVision` and
`PACKED_SIGLIP_RENAME`.

Such a tower (the Qwen ViT; the SigLIP-named towers of Cosmos3 Edge, VideoLLaMA 3,
PaddleOCR-VL, HunYuan-VL) runs on ``[patches, hidden]`` (or ``[1, patches, hidden]``) with
every image of the invoke in one row. Its attention projects the whole row, splits the
queries, keys and values at ``cu_seqlens`` (each image, or each window), calls the attention
function once per piece and joins the outputs. So the queries, keys, values and head outputs
are served whole, read where their preparation ends and where the calls' outputs are joined,
and there is no one pattern to serve: `PerImageAttention.patterns` computes each call's from
saved queries and keys.

Where those operations sit differs by family only in nnsight's names for them, which are
class attributes (``queries_at``, ``keys_at``, ``values_at``, ``head_outputs_at``): a family
whose attention prepares them with other calls subclasses and names its own.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import torch

from ..serving.values import copied, returned, value
from .patches import VisionAttention, as_patches
from .vision import Vision, config_size, variable_resolution

PER_CALL = (
    "the attention runs once per image (once per window on a windowed block), so no one "
    "tensor is the block's pattern; split attention_queries and attention_keys at "
    "self_attn.inputs[1]['cu_seqlens'], which self_attn.patterns(queries, keys, cu_seqlens) does"
)


def _per_call(attention: Any) -> str:
    return PER_CALL


def _not_flash(attention: Any) -> str | None:
    if "flash" in (attention.root.attn_implementation or ""):
        return (
            "flash attention runs one call over cu_seqlens, with no per-image outputs to "
            "join; load with attn_implementation='eager' or 'sdpa'"
        )
    return None


def _operation(name: str) -> Callable[[Any], str]:
    """The output of the operation the attention class names in its attribute ``name``."""
    return lambda attention: f"{attention.path}.source.{getattr(attention, name)}.output"


class PerImageAttention(VisionAttention):
    """Queries, keys and values whole, ``[1, heads, patches, head_dim]`` (queries and keys
    after any rotary embedding; keys and values with the key heads, fewer on a grouped-query
    tower), read at the calls that end their preparation; head outputs ``[1, patches, heads,
    head_dim]`` where the per-image calls' outputs are joined."""

    #: nnsight's names of the calls that end the queries', keys' and values' preparation and
    #: of the join of the per-image outputs, in the attention's forward.
    queries_at: ClassVar[str] = "unsqueeze_0"
    keys_at: ClassVar[str] = "unsqueeze_1"
    values_at: ClassVar[str] = "unsqueeze_2"
    head_outputs_at: ClassVar[str] = "torch_cat_0"

    refuses = {"attention_head_outputs": _not_flash, "attention_scores": _per_call,
               "attention_probabilities": _per_call}
    # Often views of one unbind, which torch refuses to edit in place: served as copies
    # written back.
    attention_queries = copied(_operation("queries_at"), description="the queries, after the rotary embedding")
    attention_keys = copied(_operation("keys_at"), description="the keys, after the rotary embedding")
    attention_values = copied(_operation("values_at"), description="the values")
    attention_head_outputs = returned(_operation("head_outputs_at"), description="each head's output, the calls' joined")
    attention_scores = value("output", description="none: one call per image")(lambda envoy, raw: None)
    attention_probabilities = value("output", description="none: one call per image")(lambda envoy, raw: None)

    def patterns(self, queries: torch.Tensor, keys: torch.Tensor, cu_seqlens: torch.Tensor) -> list[torch.Tensor]:
        """The pattern of each attention call, ``[heads, n, n]`` for a call over ``n``
        patches, from values saved in a trace: ``softmax(q k^T / sqrt(head_dim))`` over
        each slice ``cu_seqlens[j]:cu_seqlens[j + 1]``, computed as the eager attention
        computes it, so each pattern times that slice's values is its head outputs. Where
        the keys have fewer heads than the queries (grouped-query), each key head serves
        its group of query heads, as the attention repeats it."""
        scale = queries.shape[-1] ** -0.5
        keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], dim=1)
        found = []
        for start, end in zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist()):
            q, k = queries[:, :, start:end], keys[:, :, start:end]
            scores = torch.matmul(q, k.transpose(2, 3)) * scale
            found.append(scores.softmax(-1, dtype=torch.float32).to(q.dtype)[0])
        return found


#: A SigLIP-named packed tower's names, from the tower (``embeddings.patch_embedding``,
#: ``encoder.layers`` of ``layer_norm1``, ``self_attn``, ``layer_norm2``, ``mlp``,
#: ``post_layernorm``); none is a name a text block has.
PACKED_SIGLIP_RENAME = {
    "embeddings.patch_embedding": "patch_embed",
    "encoder.layers": "layers",
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
    "post_layernorm": "norm",
}


class PackedVision(Vision):
    """A tower over every image's patches packed in one row, each image a grid of its own
    (no fixed resolution): its values are ``[1, patches, vision_hidden_size]``, the images'
    patches in the processor's order. Set ``batch_axis = 1`` where the tower's output keeps
    a leading axis of 1 (``[1, patches, hidden]``)."""

    #: The longest side's most times the shortest the processor's resize takes (Qwen2-VL's
    #: ``smart_resize`` and every one built on it: 200); ``None``: any.
    max_aspect_ratio: ClassVar[float | None] = None

    image_size = property(variable_resolution)
    spatial_merge_size = config_size("spatial_merge_size",
                                     "The side of the block of patches the projector folds into one image token.")

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image longer one way than `max_aspect_ratio` times the other, which the
        processor's resize refuses in its own words."""
        ratio = max(width, height) / max(1, min(width, height))
        if self.max_aspect_ratio is None or ratio <= self.max_aspect_ratio:
            return None
        return (f"one side is {ratio:.0f} times the other, and the processor's resize takes at most "
                f"{self.max_aspect_ratio:g}: pad it closer to square, or cut it into pieces")

    @value(lambda vision: f"{vision.patch_embed.path}.output")
    def patch_embeddings(self, raw: torch.Tensor) -> torch.Tensor:
        """The patch embedding's output, one row per patch, every image's in one row (a
        convolution over single patches gives ``[patches, hidden, 1, 1]``, a linear map
        ``[patches, hidden]``: both served as ``[1, patches, hidden]``, a view)."""
        return as_patches(raw.flatten(1) if raw.dim() == 4 else raw)

    @patch_embeddings.writes
    def patch_embeddings(self, raw: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        return new.reshape(raw.shape)


class RasterPackedVision(PackedVision):
    """A `PackedVision` whose images' patches run in raster order, each image's rows one
    after another, while an image token is a ``spatial_merge_size`` square block of them
    (the projector merges them itself: PaddleOCR-VL's). The helpers that fold patches onto
    tokens ask for merge-block order (`to_scatter_order`)."""

    def to_scatter_order(self, tensor: torch.Tensor, grid_thw: Any, dim: int = -2) -> torch.Tensor:
        """``tensor``, rows in raster order along ``dim`` (a block value, ``tower_output``),
        in merge-block order: each token's square of patches consecutive, tokens in raster
        order, image after image (``grid_thw``: each image's ``[t, h, w]`` in patches)."""
        merge, order, start = self.spatial_merge_size, [], 0
        for frames, height, width in torch.as_tensor(grid_thw).tolist():
            grid = torch.arange(frames * height * width).reshape(frames, height // merge, merge, width // merge, merge)
            order.append(start + grid.permute(0, 1, 3, 2, 4).reshape(-1))
            start += frames * height * width
        if tensor.shape[dim] != start:
            raise ValueError(f"the tensor has {tensor.shape[dim]} rows along dim {dim}, but grid_thw gives {start} patches")
        return tensor.index_select(dim, torch.cat(order).to(tensor.device))
