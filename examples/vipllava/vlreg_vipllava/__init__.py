"""vlreg-vipllava-example: VipLLaVA as a third-party vlreg plugin.

Written only against vlreg's public plugin API (`vlreg.plugin`, `vlreg.testing`), the
way a plugin from outside vlreg's repository would be: one declaration, ``plugin``, that
the ``vlreg`` entry point names (``vipllava = "vlreg_vipllava:plugin"``).

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
(`hidden_states_read_only`). `geometry` lays out each image's tokens over CLIP's centre
crop; `checkpoints` builds the tiny checkpoint its tests load.
"""

from vlreg.plugin import Plugin, Scatter, Wrapper, hidden_states_read_only

from .geometry import image_grids

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


#: The tower's output and the blocks after the last one the projector reads take no write.
READ_ONLY = hidden_states_read_only()


def builders():
    """The checkpoint builder, imported when a test asks for it."""
    from .checkpoints import build_vipllava

    return {"vipllava": build_vipllava}


plugin = Plugin(
    Wrapper("vipllava", rename=WRAPPER_RENAME, entry=SCATTER, refuses=READ_ONLY,
            image_grids=lambda part: image_grids(part.config)),
    checkpoints=builders,
)
