"""vlreg-mllama: Mllama (``MllamaForConditionalGeneration``, Llama 3.2 Vision).

Mllama's image never enters the token stream. The wrapper (``model``) runs the tower, maps
its output through ``multi_modal_projector`` and calls the text model with it as
``cross_attention_states``; the blocks listed in ``cross_attention_layers`` attend from the
text to those states, the other blocks never see them. The wrapper declares this with
`CrossAttention` (where a scattering family declares a `Scatter`), so
``vision.image_features`` is that argument and every cross-attention block reads it.

* ``layers[i]`` is a plain `Layer` (self-attention, ``self_attn``) or, for ``i`` in
  ``model.cross_attention_layers``, a `GatedCrossLayer` (``cross_attn``, tanh gates);
* ``vision.layers`` are the tower's first stack of blocks (``transformer.layers``) and
  ``vision.global_layers`` its second, gated one (``global_transformer.layers``, after the
  tiles' positions are added again); both run over all of an image's tiles at once, padded
  tiles masked. The envoys are in `text` and `vision`;
* `geometry` maps the states' positions to tiles and patches; `checkpoints` builds the
  tiny checkpoint the tests load.

A text-generation load is transformers' ``MllamaForCausalLM`` (the text model at
``model``): its cross-attention blocks never run, and their values say so.
"""

from vlreg.plugin import CrossAttention, Plugin, Text, Tower, Wrapper

from . import text, vision
from .geometry import mllama_image_grids

#: From the tower: its two stacks of blocks and its patch embedding.
TOWER_RENAME = {
    "transformer.layers": "layers",
    "global_transformer.layers": "global_layers",
    "patch_embedding": "patch_embed",
}

#: The image's states reach the text model as the argument its cross-attention blocks read.
ENTRY = CrossAttention(host="model.language_model", argument="cross_attention_states")


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    # a text-generation load is MllamaForCausalLM, the text model at `model`
    Wrapper("mllama", vision="model.vision_model", text_only="model", entry=ENTRY,
            image_grids=lambda part: mllama_image_grids(part.config)),
    Text("mllama_text_model", envoys=text.envoys),
    Tower("mllama_vision_model", rename=TOWER_RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
