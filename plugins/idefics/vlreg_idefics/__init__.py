"""vlreg-idefics: Idefics2, Idefics3 and SmolVLM, declared against `vlreg.plugin`.

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
each attend all of a frame's patches: the image tokens are those latents (`latents`), and
the features reach the embeddings through ``self.inputs_merger`` as on Idefics3. Its text
model is a Mistral (vlreg-llava's ``mistral`` text part).

The connector's output, flattened, is exactly what the scatter writes, and the connector
reads the tower's ``last_hidden_state``, so every tower value takes a write. How tokens lie
over pixels is in `geometry` (tiles plus a global image, each frame's patches shuffled) and
`latents` (Idefics2's crops, each a frame's latents); the small checkpoints the tests load
in `checkpoints`.
"""

from importlib import import_module

from vlreg.plugin import Claim, Scatter, adapter, hookimpl

SIGLIP = adapter("siglip")

#: family -> (its transformers module, the class-name prefix of its tower's classes)
FAMILIES = {"idefics2": ("idefics2", "Idefics2"), "idefics3": ("idefics3", "Idefics3"), "smolvlm": ("smolvlm", "SmolVLM")}

#: From the model root: the standard mounts, the same on both families.
WRAPPER_RENAME = {
    "model.text_model.embed_tokens": "embed_tokens",
    "model.text_model.layers": "layers",
    "model.text_model.norm": "norm",
    "model.vision_model": "vision",
    "model.connector": "projector",
}

#: Where each family writes the features into the embeddings (in ``model``'s forward).
SCATTERS = {
    "idefics2": Scatter(host="model", operation="self_inputs_merger_0", argument="image_hidden_states"),
    "idefics3": Scatter(host="model", operation="self_inputs_merger_0", argument="image_hidden_states"),
    "smolvlm": Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1),
}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim(kind, f"{family}{suffix}") for family in FAMILIES for kind, suffix in (("wrapper", ""), ("vision", "_vision"))]


@hookimpl
def vlreg_rename(part):
    return {"wrapper": WRAPPER_RENAME, "vision": SIGLIP.rename}.get(part.kind)


@hookimpl
def vlreg_envoys(part):
    if part.kind != "vision":
        return None
    # keyed by the tower's own model type, so a wrapper of another plugin hosting one of
    # these towers (Aria's idefics3_vision) is served it as these wrappers are
    module, prefix = FAMILIES[part.model_type.removesuffix("_vision")]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    tower = getattr(modeling, f"{prefix}VisionTransformer")
    found = SIGLIP.envoys(
        tower,
        getattr(modeling, f"{prefix}EncoderLayer"),
        getattr(modeling, f"{prefix}VisionAttention"),
        getattr(modeling, f"{prefix}VisionMLP"),
    )
    if part.model_type == "idefics2_vision":
        from .latents import Idefics2Vision

        found[tower] = Idefics2Vision
    return found


@hookimpl
def vlreg_scatter(part):
    return SCATTERS[part.model_type]


@hookimpl
def vlreg_image_grids(part):
    if part.model_type == "idefics2":
        from .latents import idefics2_image_grids

        return idefics2_image_grids(part.config)
    from .geometry import idefics_image_grids

    return idefics_image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import BUILDERS

    return BUILDERS
