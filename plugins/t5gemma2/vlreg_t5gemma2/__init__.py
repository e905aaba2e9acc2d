"""vlreg-t5gemma2: T5Gemma 2 (``T5Gemma2ForConditionalGeneration``).

T5Gemma 2 is an encoder-decoder made of Gemma 3's parts: a SigLIP tower (served by
vlreg-llava's ``siglip_vision_model`` claim) and Gemma 3's projector (4 x 4 patches pooled
to a token on the published checkpoints) inside the encoder, ``model.encoder``, which embeds
the prompt, writes the projected image features in at the image tokens
(``inputs_embeds_masked_scatter_0`` in its forward: a `Scatter`) and runs its text model on
them; the decoder reads the encoder's output. So:

* ``vision.image_token_mask`` and ``vision.image_features`` are at the **encoder's**
  positions (the prompt's tokens), and ``encoder.input_embeddings[mask] ==
  image_features``: the image enters the encoder;
* ``layers[i]`` are the decoder's blocks (the logits are read from them), whose attention,
  ``self_attn``, is one softmax over the decoder's positions and then the encoder's
  (`MergedAttention`); ``encoder.layers[i]`` are the encoder's; both sandwich-normed
  (`text`); ``embed_tokens`` is the encoder's embedding, the prompt's (the decoder's holds
  the same weights), ``norm`` the decoder's final norm;
* ``logits`` are ``lm_head``'s output capped where the decoder's config sets
  ``final_logit_softcapping``.

transformers' model starts no decoder by itself: vlreg starts it where generate does
(`vlreg.core.envoys.seq2seq`). `checkpoints` builds the tiny checkpoint; the image grids
are vlreg-gemma's Gemma 3 square.
"""

from vlreg.plugin import Plugin, Scatter, Text, Wrapper, adapter

from . import text

#: The encoder-decoder's mounts: the decoder's blocks and norm, the prompt's embedding, the
#: encoder's text model.
RENAME = {
    "model.decoder.layers": "layers",
    "model.decoder.norm": "norm",
    "model.encoder.text_model.embed_tokens": "embed_tokens",
    "model.encoder.text_model": "encoder",
}
SCATTER = Scatter(host="model.encoder", operation="inputs_embeds_masked_scatter_0", argument=1)


def grids(part):
    """Gemma 3's square grids, laid out from the encoder's config (its tower and tokens)."""
    return adapter("gemma3_grids")(part.config.encoder)


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("t5gemma2", text=None, vision="model.encoder.vision_tower",
            projector="model.encoder.multi_modal_projector", rename=RENAME, entry=SCATTER, image_grids=grids),
    Text("t5gemma2_decoder", rename=text.RENAME, envoys=text.envoys),
    checkpoints=builders,
)
