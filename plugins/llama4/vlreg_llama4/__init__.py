"""vlreg-llama4: Llama 4 (``Llama4ForConditionalGeneration``), declared against
`vlreg.plugin`.

The wrapper holds the tower at ``vision_model`` (`vision`), the projector at
``multi_modal_projector`` (one linear map) and a whole causal LM at ``language_model``
(its text model at ``language_model.model``, its readout ``language_model.lm_head``). It
writes the image features into the embeddings in **its own** top-level forward
(``inputs_embeds.masked_scatter(mask, features)``), not in a child's: a root scatter,
``Scatter(host="")``, whose forward is source-instrumented at build like any host's.

The text model's blocks hold their MLP at ``feed_forward`` (named ``mlp``): a dense MLP,
or on every ``interleave_moe_layer_step``-th block (``moe_layers``) a mixture of experts
(`text`). A text-generation load of the same checkpoint is transformers' text-only
``Llama4ForCausalLM`` with its weights read out of the wrapper's (the text model at
``model``): the same names, and no tower. Tiles and the global image are in `geometry`.

Llama 4's image processor hands the tower bfloat16 pixels whatever the weights' dtype,
and its tower does not cast them; a trace passes every floating-point input in the load's
dtype, as transformers' pipelines do, so a float32 load serves images too.
"""

from vlreg.plugin import Plugin, Scatter, Text, Tower, Wrapper

from .geometry import llama4_image_grids
from .text import TEXT_RENAME, text_envoys
from .vision import TOWER_RENAME, llama4_envoys

#: No ``model`` between the root and its parts: the text model is a causal LM of its own
#: (``language_model``, its ``lm_head`` the readout); a text-only load is ``Llama4ForCausalLM``.
MOUNTS = {"text": "language_model.model", "text_only": "model", "vision": "vision_model",
          "projector": "multi_modal_projector"}
#: The features are written in the wrapper's own forward: the root is the host.
SCATTER = Scatter(host="", operation="inputs_embeds_masked_scatter_0", argument=1)


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("llama4", **MOUNTS, rename={"language_model.lm_head": "lm_head"}, entry=SCATTER,
            image_grids=lambda part: llama4_image_grids(part.config)),
    Text("llama4_text", rename=TEXT_RENAME, envoys=text_envoys),
    Tower("llama4_vision_model", rename=TOWER_RENAME, envoys=llama4_envoys),
    checkpoints=builders,
)
