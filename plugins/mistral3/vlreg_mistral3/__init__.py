"""vlreg-mistral3: Mistral 3 (``Mistral3ForConditionalGeneration``), declared against
`vlreg.plugin`.

The wrapper holds the text model at ``model.language_model`` (a Mistral, served by
vlreg-llava's ``mistral`` text part), the Pixtral tower at ``model.vision_tower``
(`vision`: this plugin claims ``pixtral``) and the projector at
``model.multi_modal_projector``: an RMS norm, the patch merger (each
``spatial_merge_size`` x ``spatial_merge_size`` block of an image's patches into one
token), then two linear maps. ``model``'s forward writes the features in with
``inputs_embeds.masked_scatter(mask, features)``.

The projector reads the stream of the block ``vision_feature_layer`` names out of the
tower's hidden states, not the tower's output: a write to ``vision.tower_output``, or to
a block after the one read, reaches nothing, and both are read-only, naming the block
to edit instead. How tokens lie over pixels (row breaks, the spatial merge) is in
`geometry`, published as the adapter ``"pixtral_image_grids"`` for other wrappers that
host the tower; the small checkpoints the tests load in `checkpoints`.

LightOnOCR (``lighton_ocr``, ``LightOnOcrForConditionalGeneration``) hosts the same tower
on a Qwen3 text model (served by vlreg-text's ``qwen3`` text part). Its ``model`` holds the
tower at ``vision_encoder``, the projector at ``vision_projection`` (an RMS norm, Mistral
3's patch merger: each 2 x 2 block of an image's patches into one token, then two linear
maps) and the text model at ``language_model``; its forward writes the features in with
``inputs_embeds.masked_scatter``. Unlike Mistral 3 the projector reads the tower's
``last_hidden_state``, so every tower value takes a write, and the prompt holds only
``<|image_pad|>`` tokens, ``rows x columns`` an image (no row breaks): the same grids,
`geometry.pixtral_image_grids` at the spatial merge.

Mistral Large 4 (``mistral_large4``, ``MistralLarge4ForConditionalGeneration``) is Mistral
3's wrapper, tower, projector and forward over its own text model (``mistral_large4_text``,
claimed here: latent attention with keys and values shared across blocks, a DSA indexer
whose values are refused by name, softmax group routing; `text`); its logits are
soft-capped in the wrapper's forward, which vlreg's readout finds.
"""

from vlreg.plugin import FEATURE_LAYER_READ_ONLY, Plugin, Text, Tower, Wrapper

from . import text, vision
from .geometry import mistral3_image_grids, pixtral_image_grids


def image_grids(part):
    return mistral3_image_grids(part.config)


def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("mistral3", refuses=FEATURE_LAYER_READ_ONLY, image_grids=image_grids),
    # LightOnOCR's tower and projector sit under its own names; the projector reads the
    # tower's output, so every tower value takes a write
    Wrapper("lighton_ocr", vision="model.vision_encoder", projector="model.vision_projection", image_grids=image_grids),
    # Mistral Large 4: Mistral 3's wrapper, tower and projector over its own text model
    Wrapper("mistral_large4", refuses=FEATURE_LAYER_READ_ONLY, image_grids=image_grids),
    Text("mistral_large4_text", envoys=text.envoys, refuses=text.INDEXER_REFUSED),
    Tower("pixtral", rename=vision.TOWER_RENAME, envoys=vision.envoys),
    # refused by name: transformers maps it to image-text-to-text, but it reads no image
    Wrapper("mistral4", declines="Mistral 4 is text-only in transformers (its config has no vision part and the "
                                 "type loads as Mistral4ForCausalLM): there is no image to read; Mistral Large 4 "
                                 "(mistral_large4) is its vision-language line"),
    # for a wrapper of another plugin hosting the Pixtral tower (vlreg-llava's llava over
    # pixtral, Pixtral-12B): (patch, merge=1) -> a grids function
    adapters={"pixtral_image_grids": pixtral_image_grids},
    checkpoints=builders,
)
