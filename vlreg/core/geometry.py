"""Where each image token sits in the sequence and which pixels of its image it covers.

A family declares its images' token grids through `vlreg_image_grids`: for each image, one
or more `ImageGrid` in sequence order (one on Qwen and LLaVA; LLaVA-NeXT's base image, then
its tiles), each a rows x columns raster of tokens with the pixel box every token covers in
the *original* image. `image_geometry` runs the processor on a prompt and its images, finds
the image tokens in the encoding and hands each image its run of them, so a per-token score
can be drawn back onto the picture the user passed in. Where the image reaches the text
model by cross-attention (`vlreg.core.cross`), the grids map the positions of the states
the cross-attention blocks read instead of tokens of the sequence.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
from attrs import field, frozen

from .errors import Unavailable


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
    """

    rows: int
    columns: int
    boxes: torch.Tensor = field(converter=_as_boxes, validator=_boxes, eq=False)
    label: str = "image"
    fold: int = 1

    @property
    def tokens(self) -> int:
        return self.rows * self.columns

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

    def span(self, grid: int = -1) -> slice:
        """The tokens of ``grids[grid]`` among this image's tokens."""
        grid = range(len(self.grids))[grid]
        start = sum(g.tokens for g in self.grids[:grid])
        return slice(start, start + self.grids[grid].tokens)


Grids = Callable[[Any, Sequence[Any], Any], Sequence[Any]]


def leaves(images: Any) -> list:
    """The images of ``images`` in order, however nested: a single image, a list of them,
    or a list per prompt (``[[a, b], [c]]``, the form SmolVLM's processor needs for
    several prompts)."""
    if not isinstance(images, (list, tuple)):
        return [images]
    return [leaf for item in images for leaf in leaves(item)]


def encode(processor: Any, prompt: "str | Sequence[str]", images: Sequence[Any]) -> Any:
    """The processor's encoding of ``prompt`` and ``images`` as a trace makes it (several
    prompts padded, as `StandardizedTransformer` pads them). ``images`` is handed over as
    the trace hands it, flat or a list per prompt."""
    if isinstance(prompt, (list, tuple)):
        if len(prompt) > 1:
            return processor(text=list(prompt), images=list(images), padding=True, return_tensors="pt")
        prompt = prompt[0]
    return processor(text=prompt, images=list(images), return_tensors="pt")


def image_geometry(model: Any, prompt: "str | Sequence[str]", images: Any) -> list[ImageGeometry]:
    """Each image of ``prompt``, in the order given: its row, its token positions, its
    grids and boxes. Runs the processor only; no trace. ``images`` is what the trace
    takes: one image, a list, or a list per prompt (`leaves` gives their order)."""
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
    given = list(images) if isinstance(images, (list, tuple)) else [images]
    encoding = encode(model.processor, prompt, given)
    images = leaves(given)  # the family's grids, and the sizes, are per image in order
    declared = [_grids(one) for one in declare(encoding, images, model.processor)]
    if len(declared) != len(images):
        raise ValueError(f"the family declared grids for {len(declared)} images, but {len(images)} were given")
    if type(model.family.scatter).__name__ == "CrossAttention":
        from .cross import placed

        return placed(model, encoding, declared, images)
    rows, positions = (encoding["input_ids"] == model._module.config.image_token_id).nonzero(as_tuple=True)
    counts = [sum(grid.tokens for grid in grids) for grids in declared]
    if sum(counts) != rows.numel():
        raise ValueError(
            f"the family's grids give {counts} tokens per image ({sum(counts)} in all), but the "
            f"processor put {rows.numel()} image tokens in the prompt"
        )
    found, offset = [], 0
    for index, (grids, count, image) in enumerate(zip(declared, counts, images)):
        row = rows[offset : offset + count]
        if count and not (row == row[0]).all():
            raise ValueError(f"image {index}'s tokens span several batch rows")
        found.append(
            ImageGeometry(
                index=index,
                row=int(row[0]) if count else -1,
                positions=positions[offset : offset + count],
                grids=grids,
                size=tuple(image.size),
                offset=offset,
            )
        )
        offset += count
    return found


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
