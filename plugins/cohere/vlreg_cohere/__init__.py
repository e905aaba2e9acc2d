"""vlreg-cohere: Aya Vision and Command A Vision, declared against `vlreg.plugin`.

Two kinds of part, each from its own module:

* the wrappers (`wrappers`): ``aya_vision`` (AyaVisionForConditionalGeneration) and
  ``cohere2_vision`` (Cohere2VisionForConditionalGeneration, Command A Vision);
* the text model (`text`): ``cohere2``, the Command R7B / Command A text model both pair,
  whose blocks are parallel (attention and MLP read the same normed input).

Both towers are SigLIP's (``siglip_vision_model``), served by vlreg-llava's claim with
nothing imported from it. `geometry` declares each image's tiles and thumbnail, the
tower's patches folded 2 x 2 into tokens by the projector's pixel shuffle;
`checkpoints` builds tiny checkpoints for tests.
"""

from vlreg.plugin import Plugin, Text, Wrapper

from . import text, wrappers
from .geometry import image_grids


def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("aya_vision", rename=wrappers.RENAME, entry=wrappers.SCATTER, refuses=wrappers.READ_ONLY,
            image_grids=lambda part: image_grids(part.config)),
    # Command A Vision's projector reads the tower's output: every tower value takes a write
    Wrapper("cohere2_vision", rename=wrappers.RENAME, entry=wrappers.SCATTER,
            image_grids=lambda part: image_grids(part.config)),
    Text(text.MODEL_TYPES, envoys=text.envoys),
    checkpoints=builders,
)
