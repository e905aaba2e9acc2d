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
  ``vision.image_codes`` is `Unavailable` and says so (`tower`).

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

from vlreg.plugin import Claim, Scatter, hookimpl

from . import tower

WRAPPER_RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_model": "vision",
    "model.aligner": "projector",
}

#: wrapper model_type -> its mounts: DeepSeek-VL's layout is Janus's.
WRAPPERS = {"janus": WRAPPER_RENAME, "deepseek_vl": WRAPPER_RENAME}

#: The one masked_scatter in the forward of the wrapper's ``model``: the images'.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim("wrapper", wrapper) for wrapper in WRAPPERS] + [Claim("vision", "janus_vision_model")]


@hookimpl
def vlreg_rename(part):
    if part.kind == "wrapper":
        return WRAPPERS[part.model_type]
    return tower.RENAME if part.kind == "vision" else None


@hookimpl
def vlreg_envoys(part):
    return tower.envoys() if part.kind == "vision" else None


@hookimpl
def vlreg_scatter(part):
    return SCATTER


@hookimpl
def vlreg_image_grids(part):
    from .geometry import janus_image_grids

    return janus_image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from . import checkpoints

    return checkpoints.BUILDERS
