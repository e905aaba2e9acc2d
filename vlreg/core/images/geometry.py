"""Where each image token sits in the sequence and which pixels of its image it covers.

A family declares its images' token grids through `vlreg_image_grids`: for each image, one
or more `ImageGrid` in sequence order (one on Qwen and LLaVA; LLaVA-NeXT's base image, then
its tiles), each a rows x columns raster of tokens with the pixel box every token covers in
the *original* image. `image_geometry` runs the processor on a prompt and its images, finds
the image tokens in the encoding and hands each image its run of them, so a per-token score
can be drawn back onto the picture the user passed in. Where the image reaches the text
model by cross-attention (`vlreg.core.envoys.cross`), the grids map the positions of the states
the cross-attention blocks read instead of tokens of the sequence.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
from attrs import field, frozen

from ..errors import Unavailable
from .inputs import check_images, takes_arrays, takes_flat
from .placeholders import check_placeholders
from .options import check_options, check_settings, given
from .processing import as_pil, configured, encode, for_processor, leaves


def _boxes(instance: Any, attribute: Any, boxes: torch.Tensor) -> None:
    expected = (instance.rows * instance.columns, 4)
    if tuple(boxes.shape) != expected:
        raise ValueError(
            f"an ImageGrid of {instance.rows} x {instance.columns} needs boxes of shape {expected}, "
            f"not {tuple(boxes.shape)}"
        )


def _as_boxes(boxes: Any) -> torch.Tensor:
    return torch.as_tensor(boxes, dtype=torch.float64).reshape(-1, 4)


@frozen
class ImageGrid:
    """``rows`` x ``columns`` image tokens, consecutive in the sequence in raster order.

    ``boxes[i]`` is ``(x0, y0, x1, y1)``, the part of the original image token ``i``
    covers, in that image's pixels (floats: a resize makes a token's edges fall between
    pixels); a row of NaN marks a token that covers no pixels (a newline token, a token
    over the processor's padding). ``label`` names the grid where an image has several.

    ``fold`` is how the tower's patches become these tokens: each token is a ``fold`` x
    ``fold`` block of the tower's raster of patches (1: a patch is a token; Gemma 3's
    pooling, 4; a pixel shuffle by ``s``, ``s``). The tower's own values and patterns are
    over ``rows * fold`` x ``columns * fold`` patches, after any class tokens.

    ``fold=None`` (`resampled`): the tokens are no block of patches but learned queries
    that each attend every patch of their frame (Idefics2's perceiver latents), so no
    token owns patches: each token's box is the whole region its frame's patches cover,
    the grid is one row of them in the order the features fill them, and a helper that
    maps patches onto tokens refuses such a grid.
    """

    rows: int
    columns: int
    boxes: torch.Tensor = field(converter=_as_boxes, validator=_boxes, eq=False)
    label: str = "image"
    fold: int | None = 1

    @property
    def tokens(self) -> int:
        return self.rows * self.columns

    @property
    def resampled(self) -> bool:
        """Whether the tokens are resampled from the frame's patches (``fold=None``), not
        a fold of them."""
        return self.fold is None

    @property
    def covered(self) -> torch.Tensor:
        """``[tokens]``, True where the token covers pixels."""
        return ~self.boxes.isnan().any(-1)


def box_grid(rows: int, columns: int, width: float, height: float, left: float = 0.0, top: float = 0.0) -> torch.Tensor:
    """The boxes of a ``rows`` x ``columns`` raster of ``width`` x ``height`` cells whose
    first cell's corner is at (``left``, ``top``), ``[rows * columns, 4]``."""
    steps = torch.arange(rows, dtype=torch.float64), torch.arange(columns, dtype=torch.float64)
    r, c = torch.meshgrid(*steps, indexing="ij")
    x0, y0 = left + c.reshape(-1) * width, top + r.reshape(-1) * height
    return torch.stack([x0, y0, x0 + width, y0 + height], -1)


def tile_grids(width: float, height: float, columns: int, rows: int, side: int, fold: int | None = None) -> list[ImageGrid]:
    """The grids of an image cut into ``columns`` x ``rows`` equal tiles, in raster order,
    each ``side`` x ``side`` tokens over its tile and labelled ``"tile r,c"``: how tiling
    processors (InternVL's, Cohere's, LFM2-VL's, timm's) hand an image's crops over."""
    tile_w, tile_h = width / columns, height / rows
    found = []
    for index in range(rows * columns):
        r, c = divmod(index, columns)
        boxes = box_grid(side, side, tile_w / side, tile_h / side, c * tile_w, r * tile_h)
        found.append(ImageGrid(side, side, boxes, label=f"tile {r},{c}", fold=fold))
    return found


@frozen
class ImageGeometry:
    """One image of a prompt, as the text model sees it.

    ``row`` is the batch row its tokens are in and ``positions`` (``[tokens]``) their
    sequence positions there, in the order the features fill them; ``grids`` are the
    family's grids, whose tokens, concatenated, are those positions; ``size`` is the
    original image's ``(width, height)``. ``offset`` is where this image's rows start in
    ``vision.image_features``, which holds every image's tokens in mask order.

    Where the image reaches the text model by cross-attention (Mllama), it has no tokens in
    the sequence: ``positions`` are then its positions in ``vision.image_features[row]`` (the
    axis the cross-attention keys run over), and ``offset`` where they start there.
    """

    index: int
    row: int
    positions: torch.Tensor = field(eq=False)
    grids: tuple[ImageGrid, ...]
    size: tuple[int, int]
    offset: int
    #: The row's token ids without padding and where they start in it: what `placed`
    #: finds this image's prompt by in a batch (``None``: not checked).
    source: Any = field(default=None, eq=False, repr=False)

    @property
    def tokens(self) -> int:
        return int(self.positions.numel())

    @property
    def boxes(self) -> torch.Tensor:
        """``[tokens, 4]``, every grid's boxes in sequence order."""
        return torch.cat([grid.boxes for grid in self.grids])

    @property
    def features(self) -> slice:
        """This image's rows of ``vision.image_features``."""
        return slice(self.offset, self.offset + self.tokens)

    def token_at(self, x: float, y: float, grid: int = -1) -> int:
        """The token of ``grids[grid]`` whose box holds pixel (``x``, ``y``) of the original
        image, as an index among that grid's tokens."""
        boxes = self.grids[grid].boxes
        inside = (boxes[:, 0] <= x) & (x < boxes[:, 2]) & (boxes[:, 1] <= y) & (y < boxes[:, 3])
        if not inside.any():
            raise ValueError(f"no token of grid {grid} covers pixel ({x}, {y})")
        return int(inside.nonzero()[0])

    def placed(self, model: Any) -> tuple[int, torch.Tensor]:
        """Inside a trace (in an invoke of it), ``(row, positions)`` of this image's tokens
        as this invoke's values index them: its row among the invoke's rows, its positions
        moved by the padding the batch gave that row. Refused unless that row holds the
        prompt this geometry was made from (a geometry of another prompt or batch)."""
        return placed(model, self)

    def span(self, grid: int = -1) -> slice:
        """The tokens of ``grids[grid]`` among this image's tokens."""
        grid = range(len(self.grids))[grid]
        start = sum(g.tokens for g in self.grids[:grid])
        return slice(start, start + self.grids[grid].tokens)


Grids = Callable[[Any, Sequence[Any], Any], Sequence[Any]]


def image_geometry(model: Any, prompt: "str | Sequence[str]", images: Any, **options: Any) -> list[ImageGeometry]:
    """Each image of ``prompt``, in the order given: its row, its token positions, its
    grids and boxes. Runs the processor only, with the trace's processor ``options``; no
    trace. ``images`` is what the trace takes: one image, a list, or a list per prompt
    (`leaves` gives their order); PIL images, numpy arrays or torch tensors. The family's
    entry places each image's tokens (`Entry.place`)."""
    vision = model.vision
    reason = vision.no_images()
    if reason:
        raise Unavailable(f"vision.geometry is unavailable: {reason}")
    declare = model.family.image_grids
    if declare is None:
        raise Unavailable(
            f"vision.geometry is unavailable: the {model.family.name!r} family declares no image grids "
            "(its plugin implements no vlreg_image_grids)"
        )
    check_options(model.processor, options, "vision.geometry")
    options = {**given(model), **options}
    given_images = list(images) if isinstance(images, (list, tuple)) else [images]
    check_images(given_images, model.processor, takes_arrays(model), vision)
    check_placeholders(model, prompt, given_images)
    processor = configured(model.processor, options)
    check_settings(model, processor)
    handed = leaves(given_images) if takes_flat(model) else given_images
    encoding = encode(processor, prompt, for_processor(handed, processor), **options)  # as the trace calls it: a processor's own defaults would override the copy's
    images = [as_pil(image) for image in leaves(given_images)]  # the family's grids, and the sizes, are per image in order
    declared = [_grids(one) for one in declare(encoding, images, processor)]
    if len(declared) != len(images):
        raise ValueError(f"the family declared grids for {len(declared)} images, but {len(images)} were given")
    return model.family.entry.place(model, encoding, declared, images)


def source_of(encoding: Any, row: int) -> tuple[torch.Tensor, int]:
    """The row's token ids without padding and where they start in it (`ImageGeometry.source`)."""
    ids = encoding["input_ids"][row]
    mask = encoding.get("attention_mask")
    if mask is None:
        return ids.clone(), 0
    kept = mask[row].bool()
    return ids[kept].clone(), int(kept.nonzero()[0]) if kept.any() else 0


def placed(model: Any, geometry: ImageGeometry) -> tuple[int, torch.Tensor]:
    """`ImageGeometry.placed`."""
    from nnsight.intervention.interleaver import Mediator

    mediator = Mediator.current("an ImageGeometry's positions")
    batcher = getattr(mediator.interleaver, "batcher", None)
    group = mediator.batch_group if batcher is not None and batcher.batching else None
    run = model.run
    start, size = group if group is not None else (0, run.rows)
    if not 0 <= geometry.row < size:
        raise ValueError(
            f"this ImageGeometry is of batch row {geometry.row}, but this invoke holds {size} row(s): it was "
            f"made for another batch; make it with model.vision.geometry(this invoke's prompt, its images)"
        )
    ids, mask = run.inputs.get("input_ids"), run.inputs.get("attention_mask")
    if geometry.source is None or ids is None:
        return geometry.row, geometry.positions
    row = ids[start + geometry.row]
    kept = mask[start + geometry.row].bool() if mask is not None else torch.ones_like(row, dtype=torch.bool)
    own, lead = geometry.source
    if not torch.equal(row[kept].cpu(), own):
        raise ValueError(
            f"this ImageGeometry was made from another prompt than the one in this invoke's row {geometry.row} "
            f"(its tokens differ), so its positions would land on other tokens: make it with "
            f"model.vision.geometry(this invoke's prompt, its images), with the trace's processor options"
        )
    shift = (int(kept.nonzero()[0]) if kept.any() else 0) - lead
    return geometry.row, model.family.entry.shifted(geometry.positions, shift)


def _grids(declared: Any) -> tuple[ImageGrid, ...]:
    return (declared,) if isinstance(declared, ImageGrid) else tuple(declared)


def clip_boxes(boxes: torch.Tensor, width: float, height: float) -> torch.Tensor:
    """``boxes`` cut to the ``width`` x ``height`` image; a box left with no area becomes NaN."""
    low = torch.tensor([0.0, 0.0, 0.0, 0.0], dtype=boxes.dtype)
    high = torch.tensor([width, height, width, height], dtype=boxes.dtype)
    clipped = torch.maximum(torch.minimum(boxes, high), low)
    empty = (clipped[:, 2] <= clipped[:, 0]) | (clipped[:, 3] <= clipped[:, 1])
    clipped[empty] = math.nan
    return clipped
