"""vlreg-florence2: Florence-2 (``Florence2ForConditionalGeneration``).

Florence-2 is an encoder-decoder: a DaViT tower, a projector, and BART. The wrapper
(``model``) embeds the prompt, writes the projected image features into those
embeddings at the ``<image>`` tokens (``inputs_embeds_masked_scatter_0`` in its
forward: a `Scatter`), and calls BART's encoder with them; the decoder reads the
encoder's output through each block's cross-attention. So:

* ``vision.image_token_mask`` and ``vision.image_features`` are at the **encoder's**
  positions (the prompt's tokens), and ``encoder.input_embeddings[mask] ==
  image_features``: the image enters the encoder, not the decoder;
* ``layers[i]`` are the decoder blocks (``self_attn``, ``cross_attn``, ``mlp``; the
  logits are read from them), ``encoder.layers[i]`` the encoder's (``self_attn``,
  ``mlp``), all post-norm (`vlreg.core.envoys.seq2seq`); BART writes its MLP inline, so ``mlp``
  is served at its last projection (``fc2``); there is no final norm;
* the tower's convolutional stages are not served block by block: ``vision.layers`` is
  refused by name, and ``vision.patch_embeddings`` (the first stage's convolution) and
  ``vision.tower_output`` (the last stage's grid) are served (`vision`; BART's envoys are
  in `text`).

`geometry` maps the image tokens to boxes, `checkpoints` builds the tiny checkpoint.
"""

from vlreg.plugin import Plugin, Scatter, Text, Tower, Wrapper

from . import text, vision
from .geometry import florence2_image_grids

#: The BART text model's mounts (no final norm: its blocks are post-norm); the tower and
#: the projector sit where transformers' layout has them.
TEXT_RENAME = {
    "model.language_model.shared": "embed_tokens",
    "model.language_model.decoder.layers": "layers",
    "model.language_model.encoder": "encoder",
}
#: From the tower: its first convolution is where pixels become a grid of patches.
TOWER_RENAME = {"convs.0": "patch_embed"}

#: The projected features are written into the encoder's input embeddings in ``model``'s
#: forward; under ``generate`` they are the projector's output.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1,
                  generation="model.multi_modal_projector")


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("florence2", text=None, rename=TEXT_RENAME, envoys=text.wrapper_envoys, entry=SCATTER,
            image_grids=lambda part: florence2_image_grids(part.config)),
    Text("bart", rename=text.rename, envoys=text.envoys),
    Tower("florence_vision", rename=TOWER_RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
