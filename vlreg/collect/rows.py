"""One batch of images through one trace, cut into each image's rows and index.

A batch is one invoke with a prompt per image and a list of images per prompt, the
form the processor pads together (on the left, for these decoders); the run stops once
the last value is read (a store of block 3 never runs the blocks after it). Every value is then
one tensor over the batch, and each image's rows are found from the batch's own masks,
read in the same trace: ``attention_mask`` says where each row's prompt lies past its
padding, ``vision.image_token_mask`` where its image tokens are. So no position is
computed from a prompt encoded alone, whose positions the padding would shift: a
prompt's ``k``-th real token is where the row's attention mask has its ``k``-th one.

With ``remote=``, each batch's trace is sent as any remote trace is (nnsight's
serialization, vlreg's names rebuilt by the server's plugins) and the rows come back as
the trace's saved list; the geometry and everything after the trace run here.

Boxes come from ``model.vision.geometry`` of the prompt with the image alone, kept per
(prompt, image size): an image's tokens and their boxes depend on its size, not its
pixels, so a folder of same-size images asks the processor for its geometry once.

A processor that pads a batch's pixels to its largest image (Emu3's, LLaVA-NeXT's crops,
Perception LM's tiles, which it cannot stack at all) would show the tower the padding, so
an image's values would depend on its batch neighbours. Each image's pixel tensors alone
(their shapes, kept per prompt and size, like the geometry) say whether a batch needs
padding: where they agree past the leading axis the batch is their concatenation, as a
trace of each alone gives; where they do not, the batch runs as groups of one shape.

Where the image reaches the text model by cross-attention (Mllama), its rows are the
positions of the states the cross-attention blocks read (`ImageGeometry.positions`), not
tokens of the text.

A video runs alone, one trace a video (`Batches.video`): its rows are read at
``vision.video_token_mask``, its features are ``vision.video_features``, and each row's
frames are the geometry's (`VideoGeometry.frames`), as the file numbers its frames.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import nnsight
import torch
from attrs import frozen

from ..core.images.processing import for_processor
from ..core.images.processing import encode
from .sites import Site, _not_in_stream, picked, read


@frozen(eq=False)
class Rows:
    """One image's rows: ``values[name]`` is ``[rows, width]``; ``token`` ``[rows]``,
    ``box`` ``[rows, 4]`` (float32, NaN where a row covers no pixels); ``frame``
    ``[rows, 2]``: a video's rows' first and last frame, -1 where a row covers none (an
    image's rows: ``None``)."""

    values: dict
    token: torch.Tensor
    box: torch.Tensor
    frame: torch.Tensor | None = None


class Batches:
    """Runs batches for ``sites`` at ``at``, keeping rows in ``dtype`` (``None``: as computed)."""

    def __init__(self, model: Any, sites: Sequence[Site], at: str, dtype: Any, remote: Any = False) -> None:
        self.model, self.sites, self.at, self.dtype = model, list(sites), at, dtype
        self.remote = remote
        self.kind = sites[0].kind if all(site.kind == "tower" for site in sites) else "tokens"
        self.alone = False  # tower values whose batch layout is not one entry per image
        self.grouped = False  # a batch split by its images' pixel shapes (a processor that pads pixels)
        self.videos = 0  # videos run, each alone
        self.cross = _not_in_stream(model) is not None
        self._geometry: dict = {}
        self._shapes: dict = {}

    def run(self, images: Sequence[Any], prompts: Sequence[str]) -> list[Rows]:
        if len(images) > 1 and self.alone:
            return [rows for image, prompt in zip(images, prompts) for rows in self.run([image], [prompt])]
        groups = self._groups(images, prompts) if len(images) > 1 else [list(range(len(images)))]
        if len(groups) > 1:
            self.grouped = True
            found: list = [None] * len(images)
            for group in groups:
                for index, rows in zip(group, self.run([images[i] for i in group], [prompts[i] for i in group])):
                    found[index] = rows
            return found
        one = len(images) == 1
        text, pictures = (prompts[0], [images[0]]) if one else (list(prompts), [[image] for image in images])
        model, sites, at, dtype = self.model, self.sites, self.at, self.dtype  # what a remote trace carries
        with torch.no_grad(), model.trace(text, images=pictures, **_remote(self.remote)) as tracer:
            saved = nnsight.save(read(model, sites, at, dtype))
            tracer.stop()  # nothing after the last value is needed: the blocks past it and the logits do not run
        mask, image_mask, *saved = [tensor.cpu() for tensor in saved]
        if dtype is not None:
            saved = self._in_range(saved)
        if self.kind == "tower":
            return self._tower(images, prompts, saved)
        if self.cross and self.at == "image":  # the states at the image's positions; the text's are the stream's
            return self._cross(images, prompts, saved)
        return self._tokens(images, prompts, mask.bool(), image_mask, saved)

    def video(self, clip: Any, prompt: str) -> Rows:
        """One video's rows, from a trace of its prompt with it alone; its tokens' boxes and
        frames from its geometry (kept per prompt, frame size and frame count)."""
        from .videos import keep_every_frame

        options = keep_every_frame(self.model)
        self.videos += 1
        model, sites, at, dtype = self.model, self.sites, self.at, self.dtype
        with torch.no_grad(), model.trace(prompt, videos=[clip.frames], **options, **_remote(self.remote)) as tracer:
            saved = nnsight.save(read(model, sites, at, dtype, video=True))
            tracer.stop()
        mask, video_mask, *saved = [tensor.cpu() for tensor in saved]
        if dtype is not None:
            saved = self._in_range(saved)
        real = mask.bool()
        where = picked(real, video_mask, at)
        count = int(where.sum())
        values = {site.name: tensor for site, tensor in zip(sites, saved)}
        token = torch.arange(count) if at == "image" else (real.long().cumsum(-1) - 1)[where]
        box = torch.full((count, 4), math.nan, dtype=torch.float32)
        frame = torch.full((count, 2), -1, dtype=torch.int64)
        if at in ("image", "all") and model.family.video_grids is not None:  # else: no grids declared, no frames
            key = (prompt, clip.size, len(clip.frames))
            if key not in self._geometry:
                (self._geometry[key],) = model.vision.geometry(prompt, videos=[clip.frames], **options)
            geometry = self._geometry[key]
            lit = video_mask[where]
            if int(lit.sum()) != geometry.tokens:
                raise RuntimeError(f"the trace holds {int(lit.sum())} video tokens for this video, but its geometry "
                                   f"gives {geometry.tokens}")
            box[lit] = geometry.boxes.float()
            frame[lit] = torch.tensor(clip.numbers)[geometry.frames]
        return Rows(values, token, box, frame)

    def _in_range(self, saved: list) -> list:
        """The values as stored, after refusing one the store's dtype cannot hold: a finite
        value that rounds past its largest (float16's 65504; real checkpoints' massive
        activations reach 1e5) would be stored as inf. One that rounds to the largest
        (float16's 65504 to 65519) is stored."""
        values, peaks = saved[: len(self.sites)], saved[len(self.sites):]
        largest = torch.finfo(self.dtype).max
        wider = "'float32'" if self.dtype == torch.bfloat16 else "'bfloat16' (float32's range, in as little disk) or 'float32'"
        for site, peak in zip(self.sites, peaks):
            if not torch.isfinite(peak.to(self.dtype)):
                raise ValueError(
                    f"{site.name} reaches {float(peak):.4g} in this batch, past {str(self.dtype).removeprefix('torch.')}'s "
                    f"largest value ({largest:.6g}), so the store would hold inf where the model computed a finite "
                    f"value: collect with dtype={wider}, into another folder (the shards written so far are kept)")
        return values

    def _groups(self, images: Sequence[Any], prompts: Sequence[str]) -> list[list[int]]:
        """The batch's images as groups whose pixels one batch holds as each alone gives
        them: one group where every image's pixel tensors agree past their leading axis
        (stacked or packed, no padding), else one group per shape, in order."""
        shapes = [self.pixel_shapes(prompt, image) for image, prompt in zip(images, prompts)]
        if all(len({shape[key][1:] for shape in shapes}) == 1 for key in shapes[0]):
            return [list(range(len(images)))]
        groups: dict = {}
        for index, shape in enumerate(shapes):
            groups.setdefault(tuple(sorted(shape.items())), []).append(index)
        return list(groups.values())

    def pixel_shapes(self, prompt: str, image: Any) -> dict:
        """The shapes of the floating-point tensors (pixels) the processor makes of the
        prompt with the image alone, kept per (prompt, image size)."""
        key = (prompt, tuple(image.size))
        if key not in self._shapes:
            processor = self.model.processor
            encoding = encode(processor, prompt, for_processor([image], processor))
            self._shapes[key] = {name: tuple(value.shape) for name, value in encoding.items()
                                 if isinstance(value, torch.Tensor) and value.is_floating_point()}
        return self._shapes[key]

    def geometry(self, prompt: str, image: Any) -> Any:
        """The image's geometry, kept per (prompt, size); ``None`` where the family declares
        no image grids (a new plugin's skeleton): its rows' boxes are then NaN."""
        if self.model.family.image_grids is None:
            return None
        key = (prompt, tuple(image.size))
        if key not in self._geometry:
            (self._geometry[key],) = self.model.vision.geometry(prompt, [image])
        return self._geometry[key]

    def _tokens(self, images, prompts, real, image_mask, saved) -> list[Rows]:
        at = self.at
        where = picked(real, image_mask, at)
        counts = where.sum(-1).tolist()
        per_site = []
        for site, tensor in zip(self.sites, saved):
            if site.kind == "features":
                per_site.append(self._features(tensor, images, prompts, image_mask))
            else:
                per_site.append(list(tensor.split(counts)))
        positions = real.long().cumsum(-1) - 1
        found = []
        for row, (image, prompt, count) in enumerate(zip(images, prompts, counts)):
            if at == "image":
                token = torch.arange(count)
            else:
                token = positions[row][where[row]]
            box = torch.full((count, 4), math.nan, dtype=torch.float32)
            geometry = self.geometry(prompt, image) if at in ("image", "all") else None
            if geometry is not None:
                boxes = geometry.boxes.float()
                lit = image_mask[row][where[row]]
                if int(lit.sum()) != len(boxes):
                    raise RuntimeError(
                        f"the batch holds {int(lit.sum())} image tokens for this image, but its geometry alone "
                        f"gives {len(boxes)}: the processor encodes it differently in a batch; collect with batch=1")
                box[lit] = boxes
            found.append(Rows({site.name: parts[row] for site, parts in zip(self.sites, per_site)}, token, box))
        return found

    def _cross(self, images, prompts, saved) -> list[Rows]:
        """Each image's rows on a cross-attention family at ``at="image"``: the states at its
        positions (``vision.image_features``, the one value collected at the image there).
        Stream values at the text's positions are rows of tokens, as on any family."""
        found = []
        for row, (image, prompt) in enumerate(zip(images, prompts)):
            geometry = self.geometry(prompt, image)
            values = {site.name: tensor[row, geometry.positions] for site, tensor in zip(self.sites, saved)}
            found.append(Rows(values, torch.arange(geometry.tokens), geometry.boxes.float()))
        return found

    def _features(self, tensor, images, prompts, image_mask) -> list[torch.Tensor]:
        if tensor.dim() == 3:  # cross-attention states, [batch, positions, hidden]: the geometry's positions
            return [tensor[row, self.geometry(prompt, image).positions]
                    for row, (image, prompt) in enumerate(zip(images, prompts))]
        return list(tensor.split(image_mask.sum(-1).tolist()))

    def _tower(self, images, prompts, saved) -> list[Rows]:
        count = len(images)
        split = []
        for tensor in saved:
            if count == 1:
                split.append([tensor.reshape(-1, tensor.shape[-1])])
            elif tensor.shape[0] == count:
                split.append(list(tensor))
            else:  # packed rows or crops: which are whose is the family's layout; run each image alone
                self.alone = True
                return self.run(images, prompts)
        found = []
        for index, (image, prompt) in enumerate(zip(images, prompts)):
            parts = {site.name: part[index] for site, part in zip(self.sites, split)}
            lengths = {len(part) for part in parts.values()}
            if len(lengths) != 1:
                raise ValueError("these tower values hold different numbers of rows per image ("
                                 + ", ".join(f"{name}: {len(part)}" for name, part in parts.items())
                                 + "), so they cannot share one index: collect them into separate stores")
            (length,) = lengths
            found.append(Rows(parts, torch.arange(length), self._patch_boxes(prompt, image, length)))
        return found

    def _patch_boxes(self, prompt: str, image: Any, length: int) -> torch.Tensor:
        """Each tower row's pixels where the rows are exactly a raster of the image's one
        token grid, each token ``fold`` x ``fold`` patches (SigLIP, Gemma 3's pooling); else
        NaN (class tokens, crops, a family's own patch order, as the Qwen ViT's merge
        blocks, or tokens resampled from the patches)."""
        unknown = torch.full((length, 4), math.nan, dtype=torch.float32)
        geometry = self.geometry(prompt, image)
        if geometry is None or len(geometry.grids) != 1 or geometry.grids[0].resampled:
            return unknown
        grid = geometry.grids[0]
        side = grid.fold
        if length != grid.tokens * side * side:
            return unknown
        boxes = grid.boxes.reshape(grid.rows, 1, grid.columns, 1, 4).expand(grid.rows, side, grid.columns, side, 4)
        x0, y0, x1, y1 = boxes.unbind(-1)
        width, height = (x1 - x0) / side, (y1 - y0) / side
        across = torch.arange(side, dtype=boxes.dtype).reshape(1, 1, 1, side)
        down = torch.arange(side, dtype=boxes.dtype).reshape(1, side, 1, 1)
        left, top = x0 + across * width, y0 + down * height
        return torch.stack([left, top, left + width, top + height], -1).reshape(length, 4).float()


def _remote(remote: Any) -> dict:
    """A trace's keywords for ``remote``: none; ``remote=`` (``True``, a host, ``"local"``);
    or ``backend=``, for an nnsight backend (as the tests pass one)."""
    from nnsight.tracing.backend import Backend

    if isinstance(remote, Backend):
        return {"backend": remote}
    return {"remote": remote} if remote else {}
