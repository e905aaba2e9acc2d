"""vlreg-janus: Janus and Janus-Pro (JanusForConditionalGeneration), and DeepSeek-VL
(DeepseekVLForConditionalGeneration), declared against `vlreg.plugin`.

Janus understands images and generates them, by two separate paths:

* **understanding** (served): a SigLIP-layout tower (``model.vision_model``) over the
  padded-square image, an MLP aligner (``model.aligner``, the projector), and the features
  scattered into the Llama text model's embeddings in ``model``'s forward, one token per
  patch (576 on Janus-Pro: 24 x 24 patches of 16 pixels at 384);
* **generation** (not served): a VQ model (``model.vqmodel``, ``vq_config``) that turns
  images into discrete codes and back, with ``generation_embeddings``,
  ``generation_aligner`` and ``generation_head``. None of it runs when Janus reads an
  image; ``generate(..., generation_mode="image")`` runs the text model step by step
  outside the wrapper's forward and decodes the codes. vlreg names none of it:
  ``vision.image_codes`` is `Unavailable` and says so (`vision`).

Parts: the wrapper (``janus``) and the tower (``janus_vision_model``) are claimed here; the
text model (``llama``) is served by vlreg-llava's claim, with nothing imported from it,
and the tower's names and envoys come from the ``"siglip"`` adapter vlreg-llava
publishes. `geometry` declares the padded square's grid; `checkpoints` builds tiny
checkpoints for tests.

DeepSeek-VL (``deepseek_vl``) is Janus's understanding path alone, under the same layout
(``model.vision_model``, ``model.aligner``, ``model.language_model``, the one
``masked_scatter`` in ``model``'s forward): transformers' own SigLIP tower
(``siglip_vision_model``) and Llama text model, both served by vlreg-llava's claims, so
only the wrapper is claimed here. Its aligner (``linear1``, GELU, ``linear2``) reads every
patch of the tower's output, a token each; its image processor resizes and pads as
Janus's does, so the geometry is Janus's. Where the tower's ``vision_use_head`` is set,
SigLIP's attention-pooling head runs and reaches nothing (only the aligner feeds the text
model).
"""

from vlreg.plugin import Plugin, Tower, Wrapper

from . import vision
from .geometry import janus_image_grids

def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    # DeepSeek-VL's layout is Janus's: the tower and the aligner under their own names
    Wrapper(("janus", "deepseek_vl"), vision="model.vision_model", projector="model.aligner",
            image_grids=lambda part: janus_image_grids(part.config)),
    Tower("janus_vision_model", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
