"""vlreg-minicpmv: the MiniCPM-V line (MiniCPM-V 4.6, MiniCPM-V 4.7, MiniCPM-OCR), declared
against `vlreg.plugin`.

The three wrappers are one layout: the tower at ``model.vision_tower`` (`vision`: SigLIP's
names over every slice packed in one row, attending per slice, its grid halved after block
``insert_layer_id``), the projector at ``model.merger`` (a 2 x 2 merge and an MLP per slice,
returning a list, one tensor per slice, which ``model``'s forward joins and writes into the
embeddings by its first ``masked_scatter``, a video's by its second), and the Qwen3.5 text
model (``qwen3_5_text``, served by vlreg-qwen3-vl). MiniCPM-V 4.7 differs in its position ids
alone (Canvas M-RoPE), nothing vlreg names; MiniCPM-OCR in its default ``downsample_mode``
(``"4x"``: no merge mid-tower, 2 x 2 patches a token) and its image processor. An image is its
source image and its slices, a video's every frame the same (`geometry`).
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Tower, Wrapper

from . import vision
from .geometry import image_grids, video_grids


def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(("minicpmv4_6", "minicpmv4_7", "minicpm_ocr"), projector="model.merger", entry=VIDEO_SCATTER,
            image_grids=lambda part: image_grids, video_grids=lambda part: video_grids),
    Tower(tuple(vision.TOWERS), rename=vision.rename, envoys=vision.envoys),
    checkpoints=builders,
)
