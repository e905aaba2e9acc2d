"""vlreg-idefics: IDEFICS, Idefics2, Idefics3 and SmolVLM, declared against `vlreg.plugin`.

The three families share one layout: the text model at ``model.text_model`` (a Llama, served
by vlreg-llava's ``llama`` text part), a SigLIP-shaped tower at ``model.vision_model``
(``embeddings.patch_embedding``, ``encoder.layers`` of ``layer_norm1``, ``self_attn``,
``layer_norm2``, ``mlp``, then ``post_layernorm`` over every patch) under classes of their
own, so its names and envoys come from the ``"siglip"`` adapter vlreg-llava publishes, and
the projector at ``model.connector``, the last module before the text model.

Idefics3 and SmolVLM's connector is a pixel shuffle that folds each ``scale_factor`` x
``scale_factor`` block of a frame's patches into one token, then a linear map; they differ
only in how the features reach the embeddings, in ``model``'s forward:

* ``idefics3``: ``self.inputs_merger(..., image_hidden_states=features)``, a helper that
  scatters them (the features are read at that call, by keyword);
* ``smolvlm``: ``inputs_embeds.masked_scatter(mask, features)``.

Idefics2's connector is an MLP over every patch, then a perceiver whose learned latents
each attend all of a frame's patches: the image tokens are those latents (`geometry`),
and the features reach the embeddings through ``self.inputs_merger`` as on Idefics3. Its
text model is a Mistral (vlreg-llava's ``mistral`` text part).

The connector's output, flattened, is exactly what the scatter writes, and the connector
reads the tower's ``last_hidden_state``, so every tower value takes a write. How tokens lie
over pixels is in `geometry` (tiles plus a global image, each frame's patches shuffled;
Idefics2's crops, each a frame's latents); the small checkpoints the tests load in
`checkpoints`.

IDEFICS (1), ``IdeficsForVisionText2Text``, reads the image by cross-attention: its text model
(``model``, configured by the wrapper's own config) runs the CLIP-shaped tower
(``model.vision_model``) and the perceiver (``model.perceiver_resampler``, the projector) in
its own forward, views the latents as ``[batch, images * latents, width]`` and hands them to
every gated cross-attention block (`CrossAttention` at that view's output). Those blocks sit
in a list of their own, each run before every ``cross_layer_interval``-th block, so
``layers`` is both lists in call order (`Interleaved`; `text`). Its processor writes the
placeholders itself (after the BOS, before the prompt) and holds their id; the forward needs
an image on every call.
"""

from vlreg.plugin import CrossAttention, Interleaved, Plugin, Scatter, Text, Tower, Wrapper

from . import text, vision
from .geometry import idefics1_image_grids, idefics2_image_grids, idefics_image_grids

#: From the model root: the mounts, the same on the three families.
MOUNTS = {"text": "model.text_model", "vision": "model.vision_model", "projector": "model.connector"}

#: Idefics2's and Idefics3's ``self.inputs_merger(..., image_hidden_states=features)``; SmolVLM's
#: is transformers' ``inputs_embeds.masked_scatter(mask, features)``.
MERGER = Scatter(host="model", operation="self_inputs_merger_0", argument="image_hidden_states")


#: IDEFICS's states, made in the text model's forward: nnsight names the view 5.23 makes of them
#: ``image_hidden_states_view_1`` (its ``_0`` is a branch's for given tower outputs) and 5.25's
#: rewritten forward ``image_hidden_states_view_0``. The embeddings come first there.
IDEFICS_STATES = CrossAttention(host="model", operation=("image_hidden_states_view_1", "image_hidden_states_view_0"),
                                order=("token_embeddings", "vision"), needs_images=True, token_on="processor")


def _without_perceiver(part) -> str | None:
    if part.config.use_resampler:
        return None
    return ("its config turns the perceiver off (use_resampler=False), which no published IDEFICS checkpoint does: "
            "vlreg serves IDEFICS with its perceiver, whose latents are what the cross-attention blocks read")


def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("idefics2", **MOUNTS, entry=MERGER, image_grids=lambda part: idefics2_image_grids(part.config)),
    Wrapper("idefics3", **MOUNTS, entry=MERGER, image_grids=lambda part: idefics_image_grids(part.config)),
    Wrapper("smolvlm", **MOUNTS, image_grids=lambda part: idefics_image_grids(part.config)),
    Wrapper("idefics", text="model", vision="model.vision_model", projector="model.perceiver_resampler",
            entry=IDEFICS_STATES, image_grids=lambda part: idefics1_image_grids(part.config), declines=_without_perceiver,
            layers=lambda part: Interleaved("model.layers", "model.gated_cross_attn_layers",
                                            every=part.config.cross_layer_interval)),
    Text("idefics", envoys=text.envoys),
    Tower("idefics_vision", rename=vision.IDEFICS_RENAME, envoys=vision.idefics_envoys),
    Tower(("idefics2_vision", "idefics3_vision", "smolvlm_vision"), rename=vision.SIGLIP.rename, envoys=vision.envoys),
    checkpoints=builders,
)
