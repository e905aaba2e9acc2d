"""Edits to call inside a trace or a generation: steering the stream, skipping blocks.

Both write the standard values, so they work on any family and land the way any edit
does (in place on the stream a block returns). Call them inside ``model.trace(...)`` or,
once per step, inside a generation's ``for step in tracer.iter[...]`` loop. Values are
served in forward order: call them before reading values the forward computes after
the blocks they edit.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..core.errors import Unavailable
from ..core.images.geometry import ImageGeometry
from .tokens import in_stream, stream_written

Positions = "str | ImageGeometry | torch.Tensor | Sequence[int]"


def steer(model: Any, layers: "int | Sequence[int]", vector: torch.Tensor, positions: Any = "all",
          scale: float = 1.0) -> None:
    """Add ``scale * vector`` (``[hidden_size]``) to ``layers[i].layer_output`` for each
    block ``i`` in ``layers``, at ``positions``:

    * ``"all"``, every position the forward computes; ``"text"`` or ``"image"``, the
      tokens `vision.image_token_mask` says are text or image (the mask is read first, so
      call this before reading any later value);
    * an `ImageGeometry` (from ``model.vision.geometry(prompt, images)``): that image's
      tokens, in its batch row (inside an invoke of a batch, where the batch's padding put
      them: `ImageGeometry.placed`);
    * a ``[batch, seq]`` boolean mask, or sequence positions (every row; negative ones
      count from the end of the sequence).

    Positions are sequence positions. At a generation step after the first, a block
    computes only the new token (the earlier ones are in the cache): the step acts on the
    positions it computes, and positions already in the cache are refused, naming it.

    Positions of the prompt's image (``"image"``, ``"text"``, an `ImageGeometry`) are the
    prompt's: on an encoder-decoder, ``layers`` then indexes the encoder's blocks
    (`prompt_layers`), where the image's tokens are; other positions are the decoder's."""
    prompt = isinstance(positions, ImageGeometry) or (isinstance(positions, str) and positions in ("text", "image"))
    blocks = model.prompt_layers if prompt else model.layers
    chosen = sorted({range(len(blocks))[i] for i in ([layers] if isinstance(layers, int) else layers)})
    stream_written(model, "steer", [blocks[layer] for layer in chosen])
    where = _where(model, positions)
    for layer in chosen:
        stream = blocks[layer].layer_output
        added = (scale * vector).to(stream.dtype)
        if where is None:
            stream[:] += added
        else:
            stream[where] += added


def _where(model: Any, positions: Any) -> Any:
    if isinstance(positions, str):
        if positions == "all":
            return None
        if positions not in ("text", "image"):
            raise ValueError(f"positions is 'all', 'text', 'image', an ImageGeometry, a mask or indices, not {positions!r}")
        mask = model.vision.image_token_mask.as_subclass(torch.Tensor)
        if positions == "image" and not mask.any() and computed_positions(model, prompt=True)[0] > 0:
            raise ValueError(
                "positions='image' at a generation step after the first: the image's tokens are in the cache "
                "(this step computes only the new tokens, none of them an image token); steer them at the "
                "first step, before the steps after it"
            )
        return mask if positions == "image" else ~mask
    if isinstance(positions, ImageGeometry):
        in_stream(model, "steer at an image's tokens")
        row, at = positions.placed(model)
        first, total = computed_positions(model, prompt=True)
        return row, _local(at, first, total, f"image {positions.index}'s tokens")
    positions = torch.as_tensor(positions)
    first, total = computed_positions(model)
    if positions.dtype == torch.bool:
        if positions.shape[-1] == total and first:
            if positions[..., :first].any():
                _in_cache(positions[..., :first].nonzero()[:, -1].unique(), first, total)
            return positions[..., first:]
        if positions.shape[-1] not in (total, total - first):
            raise ValueError(f"a mask of positions is [batch, {total}] (the sequence), not {list(positions.shape)}")
        return positions
    return slice(None), _local(positions, first, total, "positions")


def computed_positions(model: Any, prompt: bool = False) -> tuple[int, int]:
    """``(first, total)``: this forward computes sequence positions ``first`` to
    ``total - 1``. ``first`` is 0 on a plain trace and a generation's prefill; at a later
    step the earlier positions are in the cache (their keys and values were computed
    before). Read off the model's inputs, so call it before any later value. On an
    encoder-decoder ``layers`` are the decoder's: its own ids (one start token where the
    call passes none) and mask count; ``prompt``: the prompt's, which the encoder runs over."""
    steps = getattr(model.family.entry, "steps", None)  # a wrapper whose generate steps its text model
    args, kwargs = (model.get(steps) if steps is not None else model).inputs
    if model.__dict__.get("encoder") is not None and not prompt:
        ids, mask = kwargs.get("decoder_input_ids"), kwargs.get("decoder_attention_mask")
        computed = 1 if ids is None else ids.shape[1]
    else:
        ids = kwargs.get("input_ids", args[0] if args else None)
        tokens = ids if ids is not None else kwargs.get("inputs_embeds")
        computed = tokens.shape[1]
        mask = kwargs.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() == 2:
        return mask.shape[-1] - computed, mask.shape[-1]
    cache = kwargs.get("cache", kwargs.get("past_key_values"))  # transformers 5.25 renamed past_key_values
    past = int(cache.get_seq_length()) if hasattr(cache, "get_seq_length") else 0
    return past, past + computed


def _local(positions: Any, first: int, total: int, what: str) -> torch.Tensor:
    """Sequence ``positions`` (negative ones from the end) as indices into what this
    forward computes; refused where they are in the cache."""
    positions = torch.as_tensor(positions, dtype=torch.long)
    absolute = torch.where(positions < 0, positions + total, positions)
    if ((absolute < 0) | (absolute >= total)).any():
        raise IndexError(f"{what} {positions.tolist()} fall outside the sequence of {total} positions")
    cached = absolute < first
    if cached.any():
        _in_cache(absolute[cached].unique(), first, total)
    return absolute - first


def _in_cache(cached: torch.Tensor, first: int, total: int) -> None:
    raise ValueError(
        f"sequence positions {cached.tolist()} are in the cache at this generation step: it computes "
        f"position{'s' if total - first > 1 else ''} {first}{f'..{total - 1}' if total - first > 1 else ''} "
        f"(the new token{'s' if total - first > 1 else ''}), and the earlier ones' keys and values are read "
        f"from the cache, computed at the step that made them. Steer them at that step "
        f"(the prompt's at the first, before the steps after it), or steer positions from {first} on"
    )


def skip_layers(model: Any, start: int, end: int) -> None:
    """Blocks ``start`` to ``end`` (inclusive) pass their input through unchanged: each
    one's forward does not run, and what it returns is what it took (`Layer.skipped_output`:
    its ``input``, or every stream on a block that carries several). Values inside
    a skipped block are never computed, so reading one is out of order. A block a later
    one depends on beside the stream (`Layer.why_not_skipped`) is refused, before the
    model runs."""
    skipped = range(range(model.num_layers)[start], range(model.num_layers)[end] + 1)
    for layer in skipped:
        reason = model.layers[layer].why_not_skipped(skipped)
        if reason:
            raise Unavailable(f"skip_layers is unavailable for layers[{layer}], which cannot be skipped: {reason}")
    for layer in skipped:
        block = model.layers[layer]
        block.skip(block.skipped_output())
