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
  ``mlp``), all post-norm (`vlreg.core.seq2seq`); BART writes its MLP inline, so ``mlp``
  is served at its last projection (``fc2``); there is no final norm;
* the tower's convolutional stages are not served block by block: ``vision.layers`` is
  refused by name, and ``vision.patch_embeddings`` (the first stage's convolution) and
  ``vision.tower_output`` (the last stage's grid) are served (`envoys`).

`geometry` maps the image tokens to boxes, `checkpoints` builds the tiny checkpoint.
"""

from vlreg.plugin import Claim, Scatter, hookimpl

WRAPPER_RENAME = {
    "model.language_model.shared": "embed_tokens",
    "model.language_model.decoder.layers": "layers",
    "model.language_model.encoder": "encoder",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}
#: From the tower: its first convolution is where pixels become a grid of patches.
TOWER_RENAME = {"convs.0": "patch_embed"}


def text_rename(config) -> dict:
    """Inside the BART blocks: the decoder's ``encoder_attn`` is ``cross_attn``; the MLP,
    written inline, is served at ``fc2`` as ``mlp``. ``fc2`` is keyed from each stack
    (``layers.<i>.fc2``), never alone: DaViT's MLPs have an ``fc2`` too."""
    depth = max(config.encoder_layers, config.decoder_layers)
    return {"encoder_attn": "cross_attn", **{f"layers.{i}.fc2": f"layers.{i}.mlp" for i in range(depth)}}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim("wrapper", "florence2"), Claim("text", "bart"), Claim("vision", "florence_vision")]


@hookimpl
def vlreg_rename(part):
    if part.kind == "text":
        return text_rename(part.config)
    return {"wrapper": WRAPPER_RENAME, "vision": TOWER_RENAME}.get(part.kind)


@hookimpl
def vlreg_envoys(part):
    from .envoys import ENVOYS

    return ENVOYS[part.kind]


@hookimpl
def vlreg_scatter(part):
    return Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1,
                   generation="model.multi_modal_projector")


@hookimpl
def vlreg_image_grids(part):
    from .geometry import florence2_image_grids

    return florence2_image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import BUILDERS

    return BUILDERS
