"""Where an Aya Vision or Command A Vision image token sits in its image (`vlreg_image_grids`).

Both image processors pick a grid of ``columns`` x ``rows`` tiles whose aspect suits the
image (each with its own rule: GOT-OCR2's for Aya Vision, Command A Vision's own), squeeze
the whole image onto that canvas (no padding, aspect not kept) and cut it into tiles the
tower's size; with more than one tile they add the whole image squeezed into one tile,
the thumbnail, after them. Each crop runs through the tower alone, and the projector's
pixel shuffle folds each ``fold`` x ``fold`` block of its patches into one token
(``fold = downsample_factor``), in raster order. So an image is, in sequence order, one
`ImageGrid` per tile (``"tile r,c"``), then the thumbnail's (``"thumbnail"``), or one grid
(``"image"``) where it is a single crop; every token's box is its cell of its crop scaled
back, and covers pixels.

The tokens between the grids are not image tokens and are in no grid: Aya Vision's
``TILE_<i>`` / ``TILE_GLOBAL`` text before each crop, Command A Vision's
``<|IMG_LINE_BREAK|>`` after each.

How many crops an image has is read off the encoding (its image tokens over a crop's), so
the grids describe what the processor did with whatever options it ran with; the tiles'
arrangement is the image processor's rule for that many.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, tile_grids


def _canvas(model_type: str):
    """The image processor's rule for the tiles' (columns, rows)."""
    if model_type == "aya_vision":
        from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas
    else:
        from transformers.models.cohere2_vision.image_processing_cohere2_vision import get_optimal_tiled_canvas
    return get_optimal_tiled_canvas


def image_grids(config: Any):
    """``vlreg_image_grids`` for Aya Vision and Command A Vision."""
    tower = config.vision_config
    fold = config.downsample_factor
    side = tower.image_size // tower.patch_size // fold
    canvas = _canvas(config.model_type)

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        per_image = _tokens_per_image(encoding, processor, config.image_token_id)
        if len(per_image) != len(images):
            raise ValueError(f"the prompt holds {len(per_image)} images' tokens, but {len(images)} images were given")
        vision = processor.image_processor
        found = []
        for image, tokens in zip(images, per_image):
            width, height = image.size
            count, left = divmod(tokens, side * side)
            if left:
                raise ValueError(f"an image's {tokens} tokens are not whole crops of {side * side}")
            if count == 1:
                found.append([ImageGrid(side, side, box_grid(side, side, width / side, height / side), label="image", fold=fold)])
                continue
            columns, rows = canvas((height, width), (vision.size.height, vision.size.width), vision.min_patches, vision.max_patches)
            if rows * columns != count - 1:
                raise ValueError(
                    f"the processor cut a {width} x {height} image into {count - 1} tiles, but its tiling rule gives "
                    f"{columns} x {rows}: the image processor's settings are not the ones it ran with"
                )
            one = tile_grids(width, height, columns, rows, side, fold)
            one.append(ImageGrid(side, side, box_grid(side, side, width / side, height / side), label="thumbnail", fold=fold))
            found.append(one)
        return found

    return grids


def _tokens_per_image(encoding: Any, processor: Any, image_token_id: int) -> list[int]:
    """Each image's image tokens, in order: those between its start and end markers."""
    tokenizer = processor.tokenizer
    start = tokenizer.convert_tokens_to_ids(getattr(processor, "start_of_img_token", None) or processor.boi_token)
    end = tokenizer.convert_tokens_to_ids(getattr(processor, "end_of_img_token", None) or processor.eoi_token)
    counts = []
    for row in encoding["input_ids"].tolist():
        inside = None
        for token in row:
            if token == start:
                inside = 0
            elif token == end and inside is not None:
                counts.append(inside)
                inside = None
            elif token == image_token_id and inside is not None:
                inside += 1
    return counts
