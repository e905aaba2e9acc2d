"""What the conformance mixins share: pictures to trace, and the walks over a model's
served values and blocks that several mixins take."""

from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator

import pytest
import torch

from ...core.envoys.seq2seq import MergedAttention
from ...core.envoys.standard import Standard
from ...core.errors import Unavailable
from ...core.envoys.text import Layer, Mlp
from ...core.envoys.vision import VIDEO_VALUES
from ...core.model import StandardizedTransformer


@contextlib.contextmanager
def refused_before_running(model: StandardizedTransformer, reason: str, error: type = Unavailable) -> Iterator[None]:
    """Around code that must raise vlreg's `Unavailable` (or ``error``) with ``reason`` (a
    pattern) in its message, before the model's forward runs: a crash, or a refusal that
    comes after the model ran, is no refusal."""
    ran: list[bool] = []
    handle = model._module.register_forward_pre_hook(lambda *args: ran.append(True))
    try:
        with pytest.raises(error, match=reason):
            yield
    finally:
        handle.remove()
    assert not ran, f"the model ran before the refusal ({reason!r})"


def image(width: int, height: int, seed: int = 0) -> Any:
    """A random RGB image of this size."""
    from PIL import Image

    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (height, width, 3), generator=generator, dtype=torch.uint8)
    return Image.fromarray(pixels.numpy())


def lit(width: int, height: int, x: float, y: float) -> Any:
    """A black image of this size with one white pixel at ``(x, y)``: where a token's box
    says its pixels are, the pixel must land in that token's patches."""
    from PIL import Image

    pixels = torch.zeros(height, width, 3, dtype=torch.uint8)
    pixels[int(y), int(x)] = 255
    return Image.fromarray(pixels.numpy())


def at_each_step(model: StandardizedTransformer, prompt: Any, read: Any, saved: list | None = None,
                 **options: Any) -> list:
    """``read(model)``'s value at each step of a two-token generation, appended to ``saved``
    (given, it keeps what was saved before a refusal raised); ``options`` go to `generate`
    (``use_cache=False``)."""
    saved = [] if saved is None else saved
    with model.generate(prompt, max_new_tokens=2, min_new_tokens=2, **options) as tracer:
        for _ in tracer.iter[0:2]:
            saved.append(read(model).save())
    return saved


def taken_sizes(model: StandardizedTransformer, prompt: Any, sizes: Any) -> Iterator[tuple[int, int]]:
    """The ``(width, height)`` of ``sizes`` whose images ``model`` takes; an image of each
    other size is checked refused by `vision.geometry` with the family's reason
    (`Vision.image_refusal`: a side scaled to nothing, too few tokens)."""
    for size in sizes:
        why = model.vision.image_refusal(*size)
        if why is None:
            yield size
            continue
        with pytest.raises(ValueError, match=re.escape(why)):
            model.vision.geometry(prompt, [image(*size)])


def no_patterns(reason: str) -> dict[str, str]:
    """``unavailable`` rows of a tower whose attention forms no pattern a value can serve (it
    runs once per image or window, or fused): its scores and probabilities, with ``reason``."""
    return {f"vision.self_attn.attention_{name}": reason for name in ("scores", "probabilities")}


def centres(geometry: Any, smallest: float = 0) -> Iterator[tuple[int, Any, int, float, float]]:
    """``(frame, grid, token, x, y)`` for each token of ``geometry`` (frame: its grid's index)
    whose box is at least ``smallest`` pixels a side, ``(x, y)`` the box's centre: where a
    pixel lit there (`lit`) must land in that token's patches."""
    for frame, grid in enumerate(geometry.grids):
        for token in range(grid.tokens):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            if min(x1 - x0, y1 - y0) >= smallest:
                yield frame, grid, token, (x0 + x1) / 2, (y0 + y1) / 2


def patch_block(grid: Any, token: int, first: int = 0, fold: int | None = None) -> list[int]:
    """The patches ``token`` of ``grid`` folds (``grid.fold`` x ``grid.fold``), as indices
    into the tower's row of the grid's patches in raster order, where the grid's first patch
    is at ``first`` (after a class token, or an image packed before it in the same row).
    ``fold``: the token's side in rows of a block whose rows are blocks of patches
    (``grid.fold // vision.layer_fold(block)``: a tower that merges patches mid-tower)."""
    fold = grid.fold if fold is None else fold
    side = grid.columns * fold
    r, c = divmod(token, grid.columns)
    return [first + (r * fold + i) * side + c * fold + j for i in range(fold) for j in range(fold)]


def moved_features(model: StandardizedTransformer, prompt: Any, pictures: list, frame: int, patches: Any,
                   clean: Any = None) -> list[int]:
    """The rows of ``vision.image_features`` that change when the last tower block's output
    is raised at ``patches`` of its ``frame`` (first index); ``clean``, the features before,
    is traced here where not given. A token's features must move alone when its patches do."""
    if clean is None:
        with model.trace(prompt, images=pictures):
            clean = model.vision.image_features.save()
    with model.trace(prompt, images=pictures):
        model.vision.layers[-1].layer_output[frame, patches] += 1
        features = model.vision.image_features.save()
    return (features != clean).any(-1).nonzero().flatten().tolist()


def written(model: StandardizedTransformer) -> list[tuple[Standard, str]]:
    """The served values of the root, the tower and the first and last block of each
    stack, in forward order: where the conformance suite writes on its image prompts (a
    video's values, which need a video, are `VideoConformance`'s)."""
    ends: set[int] = set()
    for stack in (model.layers, getattr(model.__dict__.get("vision"), "layers", None)):
        if stack is not None and len(stack):
            ends.update(id(block) for block in (stack[0], stack[-1]))
    chosen = []
    for envoy, name in model.walk():
        if envoy.block_index is not None and id(_block_of(envoy)) not in ends:
            continue
        if envoy.why_unavailable(name) is None and not a_video_value(envoy, name):
            chosen.append((envoy, name))
    return chosen


def served_on_images(model: StandardizedTransformer) -> list[tuple[Standard, str]]:
    """Every value this load serves on the suite's image prompts, in forward order (a
    video's values need a video: `VideoConformance`'s)."""
    return [(envoy, name) for envoy, name in model.walk()
            if envoy.why_unavailable(name) is None and not a_video_value(envoy, name)]


def a_video_row(row: str) -> bool:
    """Whether a `support` row is a video's (``vision.video_features``, or ``videos``: how the
    tower's values are told apart on a video): `VideoConformance`'s."""
    return row == "videos" or row.removeprefix("vision.") in VIDEO_VALUES or row.startswith("vision.video_tower.")


def a_video_value(envoy: Standard, name: str) -> bool:
    """Whether ``name`` is a video's value (``vision.video_features``, or any of a tower only
    a video's frames run through): it needs a video in the run, and `VideoConformance` checks
    it, served or refused, on every family."""
    tower = envoy.place.tower
    return tower is not None and (name in VIDEO_VALUES or tower.videos_only)


def _block_of(envoy: Standard) -> Standard:
    while not isinstance(envoy, Layer):
        envoy = envoy.parent
    return envoy


def write_value(envoy: Standard, name: str, served: Any, way: str) -> None:
    """A change written to a served value (a tensor, or a list of them) by ``way``: zeros,
    or for integer values (token ids, a mask) the last position changed (ids + 1, a mask
    flipped), which keeps them valid inputs; a tuple's empty slot (``None``) stays empty."""
    tensors = served if isinstance(served, (list, tuple)) else [served]
    changed = [None if tensor is None else _changed(tensor, envoy) for tensor in tensors]
    if way == "assign":
        setattr(envoy, name, changed if isinstance(served, (list, tuple)) else changed[0])
    else:
        for tensor, new in zip(tensors, changed):
            if tensor is not None:
                tensor[...] = new


def _changed(tensor: torch.Tensor, envoy: Standard) -> torch.Tensor:
    if tensor.is_floating_point():
        return torch.zeros_like(tensor)
    new = tensor.clone().as_subclass(torch.Tensor)
    last = new[..., -1]
    if tensor.dtype == torch.bool:
        new[..., -1] = ~last
    else:
        new[..., -1] = 1 - last if int(tensor.max()) <= 1 else (last + 1) % envoy.root.vocab_size
    return new


def attention_blocks(model: Any) -> list[Layer]:
    """The blocks whose mixer is full attention (every block, but a hybrid model's or
    tower's), of the text model or, given ``model.vision``, of the tower."""
    return [block for block in model.layers if "self_attn" in block.__dict__]


def joined_keys(model: Any, block: Layer, into: list) -> None:
    """Inside a trace, before ``block``'s values are read: append to ``into`` (a list made
    outside the trace) what its attention weighs beside the block's own positions, after
    them, saved: the encoder's output where the attention is a `MergedAttention`; nothing
    where it weighs its own positions alone."""
    if isinstance(block.self_attn, MergedAttention):
        into.append(model.encoder.encoder_output.save())


def joined_positions(joined: list) -> int:
    """The key positions `joined_keys` saved: 0 where there were none."""
    return int(joined[0].shape[1]) if joined else 0


def mixer(block: Layer) -> Standard:
    """The block's sequence mixer: ``self_attn``, or on a hybrid model's other blocks
    another kind its class declares (``linear_attn``, ``mamba``, a family's own)."""
    return block.present_mixers()[0]


def sublayers(block: Layer) -> list[Standard]:
    """The block's sublayers in forward order: its mixer and its MLP, or the one it has
    (a NemotronH block holds one)."""
    mlp = block.__dict__.get("mlp")
    return [*block.present_mixers(), *([mlp] if mlp is not None else [])]


def sublayer_output(part: Standard) -> Any:
    """What a sublayer adds to the stream: a mixer's ``attention_output``, an MLP's ``mlp_output``."""
    return part.mlp_output if isinstance(part, Mlp) else part.attention_output


def text_rows(rows: dict, name: str) -> list[str]:
    """The rows of `support` that serve text value ``name`` (``"self_attn.attention_output"``):
    the row itself, or its rows for some blocks (``"layers.1,3.self_attn.attention_output"``)."""
    return [row for row in rows if row == name or (row.startswith("layers.") and row.split(".", 2)[2] == name)]


def writable_stream(model: Any, blocks: Any = None) -> tuple[str, str]:
    """The value a write to a block's stream is made at, and the one the next block reads
    it back from: ``layer_output`` and ``input``, or every stream (``layer_streams``,
    ``input_streams``) where the one stream a block of several serves takes no write (the
    collapse of streams that mix, with no inverse)."""
    block = (blocks if blocks is not None else model.layers)[0]
    if block.why_read_only("layer_output") is None:
        return "layer_output", "input"
    return "layer_streams", "input_streams"


def geometry_beside_grid_thw(model: StandardizedTransformer, pictures: Any) -> list[tuple[Any, list[int]]]:
    """Each picture's geometry on a prompt holding them all, beside its row of the
    processor's ``image_grid_thw`` (``[frames, rows, columns]`` of patches), once the
    geometry's positions are checked to be the trace's image-token mask: a family's test
    then states how its grid folds those patches into tokens."""
    from ..kit import chat

    pictures = list(pictures)
    prompt = chat(model, images=len(pictures))
    geometries = model.vision.geometry(prompt, pictures)
    encoding = model.processor(text=prompt, images=pictures, return_tensors="pt")
    with model.trace(prompt, images=pictures):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
    return list(zip(geometries, encoding["image_grid_thw"].tolist()))


def lit_pixels_land_in_raster_blocks(model: StandardizedTransformer, sizes: Any, merge: int = 2) -> None:
    """For a processor reporting ``image_grid_thw`` whose patches run row by row over the image
    it resized (Kimi's tower and the families on it): at each size, the geometry's grid is the
    grid of ``merge`` x ``merge`` blocks, as many tokens as the prompt holds, each box within
    the image, and a white pixel at a token's box's centre lands in one of that token's patches."""
    from ..kit import chat

    for size in sizes:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        encoding = model.processor(text=chat(model), images=[image(*size)], return_tensors="pt")
        _, height, width = encoding["image_grid_thw"][0].tolist()
        assert (grid.rows, grid.columns) == (height // merge, width // merge)
        assert int((encoding["input_ids"] == model.image_token_id).sum()) == grid.tokens, size
        for token in range(0, grid.tokens, 3):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            assert x1 <= size[0] and y1 <= size[1], size  # cut to the image, never over any padding
            pixels = model.processor(text=chat(model), images=[lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)],
                                     return_tensors="pt")["pixel_values"]
            row, column = divmod(int(pixels.flatten(1).amax(-1).argmax()), width)
            assert (row // merge) * grid.columns + column // merge == token, (size, token)


def envoy_at(envoy: Any, path: str) -> Any:
    """The envoy at the dotted ``path`` under ``envoy``, each step an envoy's name (a
    rename's alias, as Fuyu's ``o_proj`` for ``dense``, or a native child, as Inkling 2's
    ``o_proj.linear`` on transformers 5.25)."""
    for name in path.split("."):
        envoy = getattr(envoy, name)
    return envoy


def module_at(envoy: Any, path: str) -> torch.nn.Module:
    """The module at the dotted ``path`` under ``envoy`` (`envoy_at`)."""
    return envoy_at(envoy, path)._module


def sampled_frames_land_in_merge_blocks(model: StandardizedTransformer, frames: int, **sampled: Any) -> Any:
    """For a Qwen-like video processor (``video_grid_thw`` ``[t, h, w]``, ``temporal_patch_size``
    kept frames folded into each patch, patches in merge-block order) told to sample
    (``sampled``: ``do_sample_frames=True`` and the clip's ``video_metadata``): a black clip of
    ``frames`` frames, as an array, as a user's decoded clip is. Each grid covers the kept
    frames its temporal patch folds (the processor's own ``frames_indices``), a trace's video
    mask counts the geometry's tokens, and a white pixel at a token's box's centre in a kept
    frame lands in that frame's part of one of the token's patches, in that grid's temporal
    patch. Returns the geometry."""
    import numpy

    from ..kit import chat

    width, height, merge = 100, 60, model.processor.video_processor.merge_size
    fold = model.processor.video_processor.temporal_patch_size
    assert fold == 2  # a grid's (first, last) frames are then the patch's two
    prompt, clip = chat(model, "video", text=None), numpy.zeros((frames, height, width, 3), dtype=numpy.uint8)
    (geometry,) = model.vision.geometry(prompt, videos=[clip], **sampled)
    encoding = model.processor(text=prompt, videos=[clip], return_tensors="pt", return_metadata=True, **sampled)
    kept = [int(k) for k in encoding["video_metadata"][0].frames_indices]
    assert [grid.frames for grid in geometry.grids] == [(kept[k], kept[min(k + fold, len(kept)) - 1])
                                                        for k in range(0, len(kept), fold)]
    with model.trace(prompt, videos=[clip], **sampled):
        mask = model.vision.video_token_mask.save()
    assert int(mask.sum()) == geometry.tokens
    for index, grid in enumerate(geometry.grids):
        for frame in sorted(set(grid.frames)):
            for token in range(0, grid.tokens, 2):
                x0, y0, x1, y1 = grid.boxes[token].tolist()
                shot = clip.copy()
                shot[frame, int((y0 + y1) / 2), int((x0 + x1) / 2)] = 255
                encoding = model.processor(text=prompt, videos=[shot], return_tensors="pt", **sampled)
                pixels = encoding["pixel_values_videos"]
                at, feature = divmod(int(pixels.argmax()), pixels.shape[1])
                per_patch = pixels.shape[0] // len(geometry.grids)
                assert at // per_patch == index and (at % per_patch) // merge ** 2 == token
                plane = pixels.shape[1] // (3 * fold)  # a row: channel, then the patch's frames, then pixels
                assert grid.frames[(feature % (fold * plane)) // plane] == frame
    return geometry
