"""vlreg-aria: Aria, declared against `vlreg.plugin`.

Aria (``AriaForConditionalGeneration``) holds its text model at
``model.language_model`` (``aria_text``, served here: `text`), its tower at
``model.vision_tower`` (an ``idefics3_vision``, served by vlreg-idefics through its claim,
nothing imported) and its projector at ``model.multi_modal_projector``: learned queries
that cross-attend each frame's patches, then an MLP into the text width (`geometry`). The
features are written in by ``model``'s forward, ``inputs_embeds.masked_scatter(mask,
features)``, and the projector's output, flattened, is exactly what it writes.

The projector reads ``hidden_states[vision_feature_layer]`` of the tower (-1: the last
block's stream, before the tower's ``post_layernorm``), so a write to
``vision.tower_output``, or to a block after the one read, reaches nothing: both are
read-only, naming the block to edit instead.
"""

from vlreg.plugin import FEATURE_LAYER_READ_ONLY, Plugin, Text, Wrapper

from . import text
from .geometry import aria_image_grids


def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("aria", refuses=FEATURE_LAYER_READ_ONLY, image_grids=lambda part: aria_image_grids(part.config)),
    Text(text.MODEL_TYPES, envoys=text.envoys),
    checkpoints=builders,
)
