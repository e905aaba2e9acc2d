"""Attention over image tokens: a text token's, and the tower's own."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import frozen

from ..core.errors import Unavailable
from ..core.images.geometry import ImageGeometry
from ..core.images.options import given, takes_processor_options
from ..core.images.processing import encode
from ..core.remote import remotely
from .tokens import _count, _images, _layers, in_stream, warn_if_turn_ended


@frozen
class ImageAttention:
    """How much the text token at ``position`` of batch row ``row`` attends to each image
    token, block by block: per image, ``weights`` ``[layers, heads, tokens]`` (rows of
    the eager pattern, so each block's weights over the whole sequence sum to 1)."""

    layers: tuple[int, ...]
    row: int
    position: int
    weights: list[torch.Tensor]
    geometry: list[ImageGeometry]

    def mass(self) -> torch.Tensor:
        """``[images, layers]``: the attention each image gets, averaged over heads."""
        return torch.stack([w.sum(-1).mean(-1) for w in self.weights])


@remotely()
@takes_processor_options
def attention_to_images(
    model: Any,
    prompt: Any,
    images: Any,
    *,
    position: int = -1,
    layers: Sequence[int] | None = None,
    row: int | None = None,
) -> ImageAttention:
    """Read the text blocks' attention patterns at one query token (loads with
    ``attn_implementation="eager"`` only: the pattern is formed there), by default in every
    block that attends (a hybrid model's others mix tokens otherwise). ``row`` defaults
    to the first image's batch row."""
    in_stream(model, "attention_to_images")
    warn_if_turn_ended(model, prompt, position, "attention_to_images")
    images = _images(images)
    geometry = model.vision.geometry(prompt, images)
    blocks = model.prompt_layers  # where the image's tokens are: the encoder's, on an encoder-decoder
    attending = [block.block_index for block in blocks if "self_attn" in block.__dict__]
    layers = _layers(model, attending if layers is None else layers, blocks)
    if set(layers) - set(attending):
        others = sorted(set(layers) - set(attending))
        kinds = sorted({mixer.place.label.rpartition(".")[2] for index in others for mixer in blocks[index].present_mixers()})
        how = f"they mix tokens by {' or '.join(kinds)}, or hold only an MLP" if kinds else "they hold only an MLP"
        raise Unavailable(
            f"attention_to_images is unavailable at layers {others}: those blocks have no self_attn ({how}); "
            f"the blocks that attend are {attending}"
        )
    heads = {layer: blocks[layer].self_attn.num_heads for layer in layers}
    if len(set(heads.values())) > 1:  # the weights are one [layers, heads, tokens] tensor an image
        counts = "; ".join(f"{count} at layers {[i for i in layers if heads[i] == count]}"
                           for count in sorted(set(heads.values())))
        raise Unavailable(f"attention_to_images is unavailable over blocks that differ in heads ({counts}): "
                          f"pass layers= of one head count, and call it again for the others")
    row = geometry[0].row if row is None else row
    rows: list = []
    with torch.no_grad(), model.trace(prompt, images=images):
        for layer in layers:
            rows.append(blocks[layer].self_attn.attention_probabilities[row, :, position].save())
    pattern = torch.stack([saved.detach().float() for saved in rows])
    weights = [pattern[..., image.positions] if image.row == row else pattern[..., :0] for image in geometry]
    return ImageAttention(layers, row, position, weights, geometry)


@frozen
class TowerPatterns:
    """The tower's attention in block ``layer`` at image-token granularity: per image,
    ``patterns`` ``[heads, tokens, tokens]`` over the tokens of its grid ``grids[i]``
    (query, key). Where a token is several patches (the Qwen ViT's merge blocks, a grid's
    ``fold``), its queries' rows are averaged and its keys' columns summed, so each row
    still sums to 1. On a tower with class tokens (`Vision.class_tokens`) their columns
    are left out, so a row sums to less than 1."""

    layer: int
    patterns: list[torch.Tensor]
    grids: list[int]
    geometry: list[ImageGeometry]

    def from_token(self, image: int, token: int, head: int | None = None) -> torch.Tensor:
        """Where one token of image ``image``'s grid looks: ``[tokens]`` (mean over heads
        unless ``head``)."""
        rows = self.patterns[image][:, token]
        return rows.mean(0) if head is None else rows[head]


@remotely()
@takes_processor_options
def tower_patterns(model: Any, prompt: Any, images: Any, *, layer: int = -1) -> TowerPatterns:
    """The attention pattern of tower block ``layer``, per image.

    A tower whose attention calls once per image or window (the Qwen ViT) is read as its
    queries, keys and ``cu_seqlens`` and the patterns are computed with
    ``self_attn.patterns``; any other tower serves ``attention_probabilities`` (eager), per
    image where it packs its images in one row (`PackedVisionAttention`: Pixtral).
    Where the tower runs on several crops per image (LLaVA-NeXT), one image at a time
    is supported, and its pattern is the base image's. On a tower that pads each image's
    patches to a fixed length (`Vision.padded_patches`: Gemma 4) the pattern is over the
    image's own patches, which come first; a vision part with no blocks has none. A tower
    that runs each of an image's grids as a row of its own (tiles and a global image) is
    read at the row of the first grid wholly over the image. Tokens resampled from the
    patches (`ImageGrid.resampled`: Idefics2's latents) have no pattern among them to
    fold into, and are refused, and so are
    learned queries that each read every patch (`QueryTokens`). On a tower whose grid changes
    mid-tower (`Vision.layer_fold`: MiniCPM-V's), block ``layer``'s pattern is folded by that
    block's rows, each several patches after the merge."""
    in_stream(model, "tower_patterns")
    images = _images(images)
    if model.vision.num_layers == 0:
        raise Unavailable(f"tower_patterns is unavailable: {model.vision.without_blocks()}")
    reason = model.family.entry.not_patches() or model.vision.patterns_unfoldable  # no patches to fold onto
    if reason:
        raise Unavailable(f"tower_patterns is unavailable: {reason}")
    geometry = model.vision.geometry(prompt, images)
    if any(grid.resampled for image in geometry for grid in image.grids):
        raise Unavailable(
            "tower_patterns is unavailable: this family's image tokens are a resampler's learned queries, each "
            "attending every patch of its frame (ImageGrid.resampled), so no token owns patches to fold the "
            "tower's pattern into; read model.vision.layers[i].self_attn.attention_probabilities for the "
            "pattern over the patches"
        )
    layer = range(model.vision.num_layers)[layer]
    attention = model.vision.layers[layer].self_attn
    if hasattr(attention, "patterns"):
        if any(grid.boxes.isnan().any() for image in geometry for grid in image.grids):
            raise Unavailable(
                "tower_patterns is unavailable: this family's image tokens include tokens over no patches (row ends, "
                "marks around the image: NaN boxes), so the patches' pattern does not fold onto its tokens; "
                "self_attn.patterns(queries, keys, cu_seqlens) gives each image's pattern over its patches"
            )
        patterns, grids = _merged_patterns(model, attention, prompt, images, geometry, layer)
        return TowerPatterns(layer, patterns, grids, geometry)
    for index, image in enumerate(geometry):  # refused before the model runs, not after
        _whole_grid(image, index)
    with torch.no_grad(), model.trace(prompt, images=images):
        pattern = attention.attention_probabilities.save()
    # a tower that packs its images in one row serves a pattern per image (PackedVisionAttention)
    per_image = isinstance(pattern, list)
    pattern = [one.detach().float() for one in pattern] if per_image else pattern.detach().float()
    if len(pattern) != _count(images) and _count(images) != 1:
        raise ValueError(f"the tower ran on {len(pattern)} crops for {_count(images)} images: pass one image at a time")
    patterns, grids = [], []
    prefix = model.vision.class_tokens
    # A tower that runs each grid as a row of its own (tiles and a global image: Idefics3,
    # InternVL, Llama 4) holds grid g of an image at its images' grids before it, plus g.
    per_grid = not per_image and len(pattern) == sum(len(image.grids) for image in geometry)
    offset = 0
    for index, image in enumerate(geometry):
        grid = _whole_grid(image, index)
        chosen = image.grids[grid]
        side = _side(chosen, model.vision, layer)
        row = offset + grid if per_grid else index
        offset += len(image.grids)
        patches = chosen.tokens * side**2
        one = pattern[row]
        padded = model.vision.padded_patches and one.shape[-1] > prefix + patches
        if one.shape[-1] != prefix + patches + model.vision.trailing_tokens and not padded:
            raise Unavailable(
                f"tower_patterns is unavailable: the tower's pattern spans {one.shape[-1]} positions, "
                f"but image {index}'s grid is {chosen.rows} x {chosen.columns} tokens of {side} x "
                f"{side} rows after {prefix} class tokens ({prefix + patches}): the family does "
                f"not declare how its patches fold into tokens (ImageGrid.fold, Vision.class_tokens, "
                f"Vision.trailing_tokens)"
            )
        end = prefix + patches  # the image's own patches; a padded tower's padding follows them
        patterns.append(fold(one[:, prefix:end, prefix:end], chosen.rows, chosen.columns, side))
        grids.append(grid)
    return TowerPatterns(layer, patterns, grids, geometry)


def _whole_grid(image: ImageGeometry, index: int) -> int:
    """The first of the image's grids wholly over the image (none over the processor's padding)."""
    whole = [i for i, g in enumerate(image.grids) if bool(g.covered.all())]
    if not whole:
        raise Unavailable(
            f"tower_patterns is unavailable: every grid of image {index} holds tokens over no pixels (the "
            f"processor's padding, or row-end tokens), and the pattern is drawn over a grid wholly on the image"
        )
    return whole[0]


def _side(grid: Any, vision: Any, layer: int) -> int:
    """How many of block ``layer``'s rows a token of ``grid`` is on a side: the grid's fold over
    the patches a row holds there (`Vision.layer_fold`: a tower that merges patches mid-tower)."""
    merged = vision.layer_fold(layer)
    if grid.fold % merged:
        raise Unavailable(
            f"tower_patterns is unavailable: block {layer}'s rows are {merged} x {merged} patches each, "
            f"which do not tile a token of {grid.fold} x {grid.fold} patches"
        )
    return grid.fold // merged


def fold(pattern: torch.Tensor, rows: int, columns: int, side: int) -> torch.Tensor:
    """A ``[heads, patches, patches]`` pattern over a ``rows * side`` x ``columns * side``
    raster of patches, as one over its ``rows`` x ``columns`` tokens of ``side`` x ``side``
    patches: a token's queries averaged, its keys summed (rows keep their sums)."""
    if side == 1:
        return pattern
    r, c = torch.meshgrid(torch.arange(rows * side), torch.arange(columns * side), indexing="ij")
    token = ((r // side) * columns + c // side).reshape(-1)
    members = torch.nn.functional.one_hot(token, rows * columns).to(pattern.dtype)  # [patches, tokens]
    return members.T @ pattern @ members / side**2


def _merged_patterns(model, attention, prompt, images, geometry, layer) -> tuple[list[torch.Tensor], list[int]]:
    """Each image's pattern from the per-call patterns, folded to tokens, and its grid: on the
    Qwen ViT (``spatial_merge_size``) in merge-block order over the image's last grid; on any
    other tower packing its images in one row, each grid's rows in raster order, one after
    another (MiniCPM-V's source image and slices), over the image's first grid wholly on it."""
    with torch.no_grad(), model.trace(prompt, images=images):
        bounds = attention.inputs[1]["cu_seqlens"].save()
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
    calls = attention.patterns(queries.detach().float(), keys.detach().float(), bounds)
    heads, patches = queries.shape[1], queries.shape[2]
    whole = torch.zeros(heads, patches, patches)
    for start, end, call in zip(bounds[:-1].tolist(), bounds[1:].tolist(), calls):
        whole[:, start:end, start:end] = call
    vision = model.vision
    if not hasattr(vision, "spatial_merge_size"):
        return _packed_patterns(whole, geometry, vision, layer)
    if hasattr(vision, "to_scatter_order"):
        grid_thw = encode(model.processor, prompt, images, **given(model))["image_grid_thw"]
        whole = vision.to_scatter_order(vision.to_scatter_order(whole, grid_thw, dim=-2), grid_thw, dim=-1)
    unit = vision.spatial_merge_size**2
    found, start = [], 0
    for image in geometry:
        n = image.tokens
        block = whole[:, start : start + n * unit, start : start + n * unit]
        found.append(block.reshape(heads, n, unit, n, unit).sum(-1).mean(2))
        start += n * unit
    return found, [len(image.grids) - 1 for image in geometry]


def _packed_patterns(whole: torch.Tensor, geometry, vision, layer) -> tuple[list[torch.Tensor], list[int]]:
    """`_merged_patterns` on a tower packing each grid's rows in raster order, one grid after another."""
    found, grids, start = [], [], 0
    for index, image in enumerate(geometry):
        chosen = _whole_grid(image, index)
        for number, grid in enumerate(image.grids):
            side = _side(grid, vision, layer)
            end = start + grid.tokens * side**2
            if number == chosen:
                found.append(fold(whole[:, start:end, start:end], grid.rows, grid.columns, side))
                grids.append(chosen)
            start = end
    if start != whole.shape[-1]:
        raise Unavailable(
            f"tower_patterns is unavailable: block {layer}'s rows are {whole.shape[-1]}, but the images' grids "
            f"fold {start} of them: the family does not declare how its patches fold into tokens (ImageGrid.fold, "
            f"Vision.layer_fold)"
        )
    return found, grids
