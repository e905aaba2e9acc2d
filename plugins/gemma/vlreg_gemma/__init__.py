"""vlreg-gemma: the Gemma vision-language families, declared against `vlreg.plugin`.

Six wrappers, each holding its text model at ``model.language_model`` and writing the
image features into the token embeddings with the first ``inputs_embeds.masked_scatter``
in its ``model``'s forward:

* ``gemma3`` (Gemma3ForConditionalGeneration): a SigLIP tower at ``model.vision_tower``
  (served by vlreg-llava's ``siglip_vision_model`` claim) and
  ``model.multi_modal_projector``, which average-pools SigLIP's patches 4 x 4 on the real
  checkpoints (`geometry`: the grid's ``fold``); image tokens attend to each other.
* ``shieldgemma2``: Gemma 3 under a ShieldGemma2Config (transformers loads it as
  Gemma3ForConditionalGeneration), its weights found through a key mapping and its prompts
  encoded by a processor that keeps the text it is given (`wrappers`).
* ``paligemma`` (PaliGemmaForConditionalGeneration; PaliGemma 2 is the same wrapper on a
  ``gemma2`` text model): a SigLIP tower, a linear projector, a token per patch. The
  prefix (image tokens and prompt) is attended bidirectionally; only the suffix (what
  the model generates, or a ``suffix=`` given to the processor) is causal.
* ``gemma4`` (Gemma4ForConditionalGeneration): the Gemma 4 tower (`vision`) and
  ``model.embed_vision``; image tokens of one image attend to each other on the
  sliding-window blocks of checkpoints with ``use_bidirectional_attention="vision"``.
* ``gemma4_unified`` (Gemma4UnifiedForConditionalGeneration): no tower; ``model.embed_vision``
  is the `Vision` (with no blocks) and its ``multimodal_embedder`` the projector.
* ``gemma3n`` (Gemma3nForConditionalGeneration): timm's MobileNetV5 at ``model.vision_tower``
  (a tower with no standard blocks) and ``model.embed_vision``, called on the prompt's ids,
  then on the tower's grid; text blocks that carry several streams (AltUp), whose
  ``layer_output`` is the active one. Images only: its claim refuses audio (the audio tower,
  ``audio_config``, is claimed by no plugin and keeps its native names).

Refused by name (`POLICY`, `DIFFUSION`): π0 and π0.5 (``pi0``, ``pi05``: robot action
policies over a PaliGemma prefix) and DiffusionGemma (``diffusion_gemma``: a block-diffusion
generator over the Gemma 4 tower).

Published to other plugins: ``"sandwich"`` (the envoys of a block that norms each sublayer's
output) and ``"gemma3_grids"`` (`geometry.square_grids`: Gemma 3's square, pooled, of a
config holding ``vision_config`` and ``mm_tokens_per_image``; T5Gemma 2's encoder's).

The text parts are in `text`, the Gemma 4 and Gemma 3n vision parts in `vision` (neither
tower is laid out as SigLIP is, so each has envoys of its own rather than vlreg-llava's
``"siglip"`` adapter); `checkpoints` builds tiny random-weight checkpoints.

``logits`` is ``lm_head``'s output everywhere. Where the text config sets
``final_logit_softcapping`` (Gemma 2, so PaliGemma 2; Gemma 4 checkpoints that set it),
the model then returns ``tanh(logits / cap) * cap``, which keeps every token's rank.
Gemma 4's routed experts (``enable_moe_block``) have no standard values: ``mlp.mlp_output``
is what the dense MLP and the experts add together.
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper

from . import text, vision
from .geometry import image_grids, square_grids

#: What Gemma 3n's claim refuses (`Claim.refuses`).
GEMMA3N_REFUSES = {
    "audio": (
        "audio is not served: vlreg claims no audio part, so Gemma 3n's audio tower (model.audio_tower) and its "
        "embedder (model.embed_audio) have no standard names, and a trace hands the processor only text, images "
        "and videos (audio= is refused before the model runs); images and text are served"
    ),
}


def grids(part):
    """The wrapper's image grids, laid out from its config."""
    return image_grids(part.config)


def shieldgemma2_load_options(part):
    from .wrappers import LOAD_OPTIONS

    return LOAD_OPTIONS


def shieldgemma2_processor(part):
    from .wrappers import prompted

    return prompted


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


#: Types built on Gemma parts that read an image but not into text generation: refused by
#: name, so that a load and `vlreg plugins --coverage` say why (π0.5 is transformers 5.25's).
POLICY = ("a robot action policy: its PaliGemma prefix feeds an action expert trained by flow matching, and its "
          "output is actions, not text logits; load the PaliGemma checkpoint to study the prefix")
DIFFUSION = ("a block-diffusion generator, not an autoregressive one: its decoder attends bidirectionally and "
             "denoises blocks of tokens, so there is no next-token readout for the logit lens, steering at later "
             "steps or generate to mean what they mean on the served types")

plugin = Plugin(
    Wrapper(("gemma3", "paligemma"), image_grids=grids),
    Wrapper(("pi0", "pi05"), declines=POLICY),
    Wrapper("diffusion_gemma", declines=DIFFUSION),
    Wrapper("shieldgemma2", image_grids=grids, load_options=shieldgemma2_load_options,
            processor=shieldgemma2_processor),
    Wrapper("gemma4", projector="model.embed_vision", image_grids=grids),
    Wrapper("gemma4_unified", vision="model.embed_vision", projector="model.embed_vision.multimodal_embedder",
            image_grids=grids),
    Wrapper("gemma3n", projector="model.embed_vision", envoys=vision.gemma3n_wrapper_envoys, image_grids=grids,
            refuses=GEMMA3N_REFUSES),
    Text(text.MODEL_TYPES, envoys=text.envoys),
    Text("gemma3n_text", envoys=text.gemma3n_envoys),
    Tower("gemma4_vision", rename=vision.TOWER_RENAME, envoys=vision.gemma4_tower_envoys),
    Tower("gemma4_unified_vision", envoys=vision.embedder_envoys),
    Tower("gemma3n_vision", rename=vision.GEMMA3N_RENAME, envoys=vision.gemma3n_tower_envoys,
          declines=vision.gemma3n_refusal),
    adapters={"sandwich": text.SANDWICH, "gemma3_grids": square_grids},
    checkpoints=builders,
)
