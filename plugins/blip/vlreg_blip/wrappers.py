"""The BLIP-2 and InstructBLIP wrappers: where the tower, the Q-Former, the projector and the
text model sit, and how the image enters.

Both wrappers (``Blip2ForConditionalGeneration``, ``InstructBlipForConditionalGeneration``)
hold their parts at the root, with no inner ``model``: ``vision_model`` (the tower),
``query_tokens`` (the learned queries, a parameter), ``qformer``, ``language_projection``
(the projector) and ``language_model`` (a causal LM: OPT on BLIP-2's published
checkpoints, Llama on InstructBLIP-Vicuna's). The root's forward runs the tower, the
Q-Former and the projector first, then embeds the prompt and writes the projected queries
in at the ``<image>`` tokens with ``masked_scatter(mask, features)`` (`OPERATION`), then
calls the text model with the result as ``inputs_embeds``: a `QueryTokens` entry.

Under ``generate`` the wrappers run their own ``generate``, which does the same steps
outside the root's forward and hands the text model's ``generate`` the embeddings, so the
features are the projector's output there (``generation``), each step calls the text model,
not the root (``steps``), and the root's inputs (the image-token mask) are never reached.
Every forward takes ``pixel_values``: a prompt without an image cannot run (``needs_images``).

Not served, and declined by name before loading (`declines`): a T5 text model (the
``flan-t5`` checkpoints: ``use_decoder_only_language_model`` false, an encoder-decoder),
and OPT's variants no BLIP checkpoint uses (post-norm blocks, or a narrower embedding
projected in and out: OPT-350m's).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import QueryTokens

#: Where the text model's standard mounts sit, per text model_type.
TEXT_RENAME = {
    "opt": {
        "language_model.model.decoder.embed_tokens": "embed_tokens",
        "language_model.model.decoder.layers": "layers",
        "language_model.model.decoder.final_layer_norm": "norm",
    },
    "llama": {
        "language_model.model.embed_tokens": "embed_tokens",
        "language_model.model.layers": "layers",
        "language_model.model.norm": "norm",
    },
}
RENAME = {"language_model.lm_head": "lm_head", "qformer.encoder.layer": "qformer.layers"}

#: nnsight's name for the scatter in each root's forward: BLIP-2 chains it on a ``.to(...)``.
OPERATION = {"blip-2": "masked_scatter_0", "instructblip": "inputs_embeds_masked_scatter_0"}


def entry(part: Any) -> QueryTokens:
    """The projected queries, scattered in the root's forward at the operation its
    ``model_type`` names there."""
    return QueryTokens(host="", operation=OPERATION[part.model_type], generation="language_projection",
                       embeddings_to="language_model", steps="language_model", needs_images=True)


def rename(part: Any) -> dict[str, str]:
    """The wrapper's mounts beside the tower and projector, with the text model's (by its
    ``model_type``: OPT or Llama)."""
    return {**RENAME, **TEXT_RENAME.get(part.config.text_config.model_type, {})}


def declines(part: Any) -> str | None:
    """Why vlreg-blip declines this BLIP checkpoint (``None``: it serves it)."""
    config = part.config
    text = config.text_config
    if not config.use_decoder_only_language_model:
        return (
            f"its language model is {text.model_type!r}, an encoder-decoder (use_decoder_only_language_model is "
            f"false: the flan-t5 checkpoints), and vlreg-blip serves BLIP over a decoder-only language model only "
            f"(OPT, as in Salesforce/blip2-opt-*, or Llama, as in InstructBLIP-Vicuna)"
        )
    if text.model_type == "opt" and not text.do_layer_norm_before:
        return ("its OPT text model norms after each sublayer (do_layer_norm_before is false, OPT-350m's), "
                "which vlreg-blip does not serve")
    if text.model_type == "opt" and text.word_embed_proj_dim != text.hidden_size:
        return (
            f"its OPT text model embeds tokens {text.word_embed_proj_dim} wide and projects them in and out of the "
            f"{text.hidden_size}-wide stream (OPT-350m's), which vlreg-blip does not serve"
        )
    return None


def image_grids(part: Any) -> Any:
    """Each image is ``num_query_tokens`` tokens, each one's box the whole image."""
    return QueryTokens.query_grids(part.config.num_query_tokens)
