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

DeepSeek-VL-Hybrid (``deepseek_vl_hybrid``) is DeepSeek-VL with a second tower: SAM's ViT
(``model.high_res_vision_model``, the config's ``high_res_vision_config``, ``sam_vision_model``)
runs on a larger copy of each image after SigLIP; its output, and through a neck its global
block's stream (scaled by ``high_res_vision_alpha``, zero as initialized), are resized to
SigLIP's grid, and the aligner joins both per token. The SAM tower is a part claimed here
(`Other`), served with the ``"sam_vit"`` adapter vlreg-got-ocr2 publishes, and mounted at
``model.vision.second_tower`` by the wrapper's entry (`Scatter.second_tower`): every value of
it is a tower value. Its image tokens are SigLIP's patches, so the geometry is DeepSeek-VL's.
"""

from vlreg.plugin import Other, Plugin, Scatter, Tower, Wrapper, adapter

from . import vision
from .geometry import janus_image_grids

#: DeepSeek-VL-Hybrid's second tower, SAM's ViT under its wrapper (``SamVisionModel``), mounted
#: at ``model.vision.second_tower``.
HIGH_RES = "model.high_res_vision_model.vision_encoder"

def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    # DeepSeek-VL's layout is Janus's: the tower and the aligner under their own names
    Wrapper(("janus", "deepseek_vl"), vision="model.vision_model", projector="model.aligner",
            image_grids=lambda part: janus_image_grids(part.config)),
    # DeepSeek-VL's, with a second, high-resolution tower the aligner reads beside SigLIP's
    Wrapper("deepseek_vl_hybrid", vision="model.vision_model", projector="model.aligner",
            entry=Scatter("model", "inputs_embeds_masked_scatter_0", 1, second_tower=HIGH_RES),
            image_grids=lambda part: janus_image_grids(part.config)),
    Tower("janus_vision_model", rename=vision.RENAME, envoys=vision.envoys),
    Other("sam_vision_model", field="high_res_vision_config", rename=lambda part: adapter("sam_vit").rename(part),
          envoys=vision.sam_envoys),
    checkpoints=builders,
)
