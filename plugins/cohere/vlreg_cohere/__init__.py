"""vlreg-cohere: Aya Vision and Command A Vision, declared against `vlreg.plugin`.

The wrappers, ``aya_vision`` (AyaVisionForConditionalGeneration) and ``cohere2_vision``
(Cohere2VisionForConditionalGeneration, Command A Vision), are transformers' composite
layout: the text model at ``model.language_model``, the SigLIP tower at
``model.vision_tower`` (``siglip_vision_model``, served by vlreg-llava's claim with nothing
imported from it), the projector at ``model.multi_modal_projector``, the features written
in by ``model``'s ``inputs_embeds.masked_scatter``. The projector folds each 2 x 2 block of
a tile's patches into one row (its pixel shuffle), then a SwiGLU: its output is the
features, a tile's tokens after another's. What it reads differs:

* Aya Vision takes ``hidden_states[vision_feature_layer]`` of the tower (-1: the last
  block's stream *before* SigLIP's ``post_layernorm``), so a write to
  ``vision.tower_output``, or to a block after the one read, reaches nothing: both are
  read-only, naming the block to edit instead;
* Command A Vision takes the tower's output itself: every tower value takes a write. Its
  SigLIP tower keeps the attention-pooling ``head`` (``vision_use_head``), which runs on
  every forward and reaches nothing.

The text model (`text`) is ``cohere2``, the Command R7B / Command A text model both pair,
whose blocks are parallel (attention and MLP read the same normed input). `geometry`
declares each image's tiles and thumbnail; `checkpoints` builds tiny checkpoints for tests.
"""

from vlreg.plugin import FEATURE_LAYER_READ_ONLY, Plugin, Text, Wrapper

from . import text
from .geometry import image_grids


def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("aya_vision", refuses=FEATURE_LAYER_READ_ONLY, image_grids=lambda part: image_grids(part.config)),
    # Command A Vision's projector reads the tower's output: every tower value takes a write
    Wrapper("cohere2_vision", image_grids=lambda part: image_grids(part.config)),
    Text(text.MODEL_TYPES, envoys=text.envoys),
    checkpoints=builders,
)
