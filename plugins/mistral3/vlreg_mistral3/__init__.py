"""vlreg-mistral3: Mistral 3 (``Mistral3ForConditionalGeneration``), declared against
`vlreg.plugin`.

The wrapper holds the text model at ``model.language_model`` (a Mistral, served by
vlreg-llava's ``mistral`` text part), the Pixtral tower at ``model.vision_tower``
(`tower`: this plugin claims ``pixtral``) and the projector at
``model.multi_modal_projector``: an RMS norm, the patch merger (each
``spatial_merge_size`` x ``spatial_merge_size`` block of an image's patches into one
token), then two linear maps. ``model``'s forward writes the features in with
``inputs_embeds.masked_scatter(mask, features)``.

The projector reads the stream of the block ``vision_feature_layer`` names out of the
tower's hidden states, not the tower's output: a write to ``vision.tower_output``, or to
a block after the one read, reaches nothing, and both are read-only, naming the block
to edit instead. How tokens lie over pixels (row breaks, the spatial merge) is in
`geometry`, published as the adapter ``"pixtral_image_grids"`` for other wrappers that
host the tower; the small checkpoint the tests load in `checkpoints`.

LightOnOCR (``lighton_ocr``) hosts the same tower under other names and on a Qwen3 text
model; what differs is in `lighton`.
"""

from vlreg.plugin import Claim, Scatter, VisionLayer, VisionMlp, hidden_states_read_only, hookimpl

from . import lighton, tower

WRAPPER_RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}

SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim("wrapper", "mistral3"), Claim("wrapper", "lighton_ocr"), Claim("vision", "pixtral")]


#: Each wrapper's mounts, from the model root.
WRAPPER_RENAMES = {"mistral3": WRAPPER_RENAME, "lighton_ocr": lighton.RENAME}


@hookimpl
def vlreg_rename(part):
    if part.kind == "wrapper":
        return WRAPPER_RENAMES[part.model_type]
    return tower.TOWER_RENAME if part.kind == "vision" else None


@hookimpl
def vlreg_envoys(part):
    if part.kind != "vision":
        return None
    from transformers.models.pixtral import modeling_pixtral as pixtral

    return {
        pixtral.PixtralVisionModel: tower.PixtralVision,
        pixtral.PixtralAttentionLayer: VisionLayer,
        pixtral.PixtralAttention: tower.PixtralAttention,
        pixtral.PixtralMLP: VisionMlp,
    }


@hookimpl
def vlreg_scatter(part):
    return SCATTER


@hookimpl
def vlreg_read_only(part):
    config = part.config
    if part.kind != "wrapper" or getattr(config, "vision_feature_layer", None) is None:
        return None  # LightOnOCR's projector reads the tower's output: every tower value takes a write
    return hidden_states_read_only(config.vision_feature_layer, config.vision_config.num_hidden_layers)


@hookimpl
def vlreg_image_grids(part):
    from .geometry import mistral3_image_grids

    return mistral3_image_grids(part.config)


@hookimpl
def vlreg_adapters():
    """``"pixtral_image_grids"``: `geometry.pixtral_image_grids`, ``(patch, merge=1)`` to a
    grids function, for a wrapper from another plugin that hosts this plugin's Pixtral
    tower (vlreg-llava's ``llava`` over ``pixtral``, Pixtral-12B)."""
    from .geometry import pixtral_image_grids

    return {"pixtral_image_grids": pixtral_image_grids}


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import BUILDERS

    return {**BUILDERS, "lighton_ocr": lighton.build}
