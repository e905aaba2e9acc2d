"""vlreg-got-ocr2: GOT-OCR 2.0 and PP-Chart2Table, declared against `vlreg.plugin`.

Both configs (``got_ocr2``, ``pp_chart2table``) load as ``GotOcr2ForConditionalGeneration``,
transformers' composite layout (`wrappers`): the Qwen2 text model, served by vlreg-llava's
``qwen2`` claim; the tower (``got_ocr2_vision``, ``pp_chart2table_vision``: one set of
classes, SAM's ViT, `vision`); a convolutional projector whose output is the features, each
crop's tokens in raster order (`geometry`). The projector reads the tower's output itself,
so every tower value takes a write. `checkpoints` builds tiny checkpoints for tests.

It publishes SAM's ViT to other families as the adapter ``"sam_vit"`` (`vision.SamViT`):
vlreg-janus's DeepSeek-VL-Hybrid serves its high-resolution tower with it.
"""

from vlreg.plugin import Plugin, Tower, Wrapper

from . import vision, wrappers
from .geometry import image_grids


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(("got_ocr2", "pp_chart2table"), image_grids=lambda part: image_grids(part.config),
            processor=wrappers.tower_tokens),
    Tower(("got_ocr2_vision", "pp_chart2table_vision"), rename=vision.rename, envoys=vision.envoys),
    adapters={"sam_vit": vision.SAM_VIT},
    checkpoints=builders,
)
