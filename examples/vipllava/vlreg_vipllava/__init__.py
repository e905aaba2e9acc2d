"""vlreg-vipllava-example: VipLLaVA as a third-party vlreg plugin.

Written only against vlreg's public plugin API (`vlreg.plugin`, `vlreg.testing`), the
way a plugin from outside vlreg's repository would be.

VipLlavaForConditionalGeneration has three parts, and this plugin claims one:

* the ``vipllava`` wrapper: the text model at ``model.language_model``, the CLIP tower at
  ``model.vision_tower`` and ``model.multi_modal_projector``, which takes the streams of
  several tower blocks (``vision_feature_layer``: -2, -5, -8, -11 and 6 on the real
  checkpoints), drops each one's class token, concatenates them and projects them; the
  result is written into the token embeddings by ``inputs_embeds.masked_scatter`` in
  ``VipLlavaModel.forward``;
* the ``clip_vision_model`` tower and the ``llama`` text model are not claimed:
  vlreg-llava serves both, for any wrapper whose parts have those model types.

What the projector does not read cannot be edited to any effect, so the tower's output
and every block after the last one it reads are declared read-only
(`hidden_states_read_only`).
"""

from vlreg.plugin import Claim, Scatter, hidden_states_read_only, hookimpl

#: Standard mounts, from the model root.
WRAPPER_RENAME = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}

#: The one masked_scatter in VipLlavaModel.forward; the projected features are its
#: second argument.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim("wrapper", "vipllava")]


@hookimpl
def vlreg_rename(part):
    return WRAPPER_RENAME


@hookimpl
def vlreg_scatter(part):
    return SCATTER


@hookimpl
def vlreg_read_only(part):
    config = part.config
    return hidden_states_read_only(config.vision_feature_layer, config.vision_config.num_hidden_layers)


@hookimpl
def vlreg_image_grids(part):
    from .geometry import image_grids

    return image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import build_vipllava

    return {"vipllava": build_vipllava}
