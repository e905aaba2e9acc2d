"""vlreg-qwen3-vl: the Qwen3 line, declared against `vlreg.plugin`.

Four families share one layout, Qwen2-VL's (the text model at ``model.language_model``,
the Qwen ViT at ``model.visual`` with its merger, the ``masked_scatter`` in ``model``'s
forward), so the mounts, the tower's names, the scatter and the tower's attention come
from the ``"qwen_vit"`` adapter vlreg-qwen2-vl publishes:

* ``qwen3_vl``: learned tower positions and DeepStack (`vision`, `text`);
* ``qwen3_vl_moe``: the same, its MLPs routing each token to experts (`MoeMlp`);
* ``qwen3_5``: learned tower positions; text blocks that mix tokens either by gated
  full attention or by a gated delta net (`linear`), as ``layer_types`` says;
* ``qwen3_5_moe``: Qwen3.5 with routed MLPs and a shared expert;
* ``cosmos3_omni`` (Cosmos3OmniForConditionalGeneration): a wrapper whose model classes are
  Qwen3-VL's line for line, over a ``qwen3_vl_text`` text model and a ``qwen3_vl_vision``
  tower (its config forces that model type), so only the wrapper is new;
* ``cohere_compass`` (CohereCompassForConditionalGeneration, Cohere's North): Qwen3-VL's model
  classes under other names, the tower and DeepStack as Qwen3-VL's, the text blocks Cohere2's
  (parallel: one norm, the attention and the MLP both read it; rotated on sliding-window blocks
  only), the logits scaled by the text config's ``logit_scale`` (which the readout applies);
* ``qwen4_exp`` (Qwen4ExpForConditionalGeneration): Qwen3.5-MoE's tower and blocks under
  hyper-connection streams that mix (`text.Qwen4ExpLayer`, a `MixingStreamsLayer`), n-gram
  embeddings on some blocks, a sparse-attention indexer on the indexed ones, and a readout
  with no final norm (``readout=UNNORMED``).

The text and vision parts are looked up by their own ``model_type`` (``qwen3_5_text``,
``qwen3_vl_vision``; `text.TEXTS`, `vision.TOWERS`), never the checkpoint's: another
wrapper, here or in another plugin, that hosts one of these parts gets the same envoys.
"""

import attrs

from vlreg.plugin import SCATTER, UNNORMED, VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from .text import TEXTS, DeepStackLayer, GatedAttention, text_envoys
from .vision import TOWERS, tower_envoys

QWEN_VIT = adapter("qwen_vit")

#: The time Qwen3-VL's processor writes before each temporal patch of a video (``<1.0 seconds>``).
SECONDS = r"<(\d+(?:\.\d+)?) seconds>"

#: The line's wrappers, each over the text model and tower of its own name.
FAMILIES = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")

#: Wrappers with Qwen3-VL's layout whose parts are one of `FAMILIES`' (claimed as wrappers only).
HOSTS = ("cosmos3_omni",)


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    # a text-generation load of a Qwen3.5 checkpoint is transformers' text-only
    # Qwen3_5ForCausalLM, the text model at `model`
    Wrapper((*FAMILIES, *HOSTS), **QWEN_VIT.mounts, entry=VIDEO_SCATTER, text_only="model", refuses=QWEN_VIT.refuses,
            image_grids=lambda part: QWEN_VIT.image_grids, video_grids=lambda part: QWEN_VIT.video_grids(SECONDS)),
    # transformers has no text-only class for it: a text-generation load builds the wrapper
    Wrapper("cohere_compass", **QWEN_VIT.mounts, entry=VIDEO_SCATTER, refuses=QWEN_VIT.refuses, image_grids=lambda part: QWEN_VIT.image_grids,
            video_grids=lambda part: QWEN_VIT.video_grids(SECONDS)),
    # Qwen4-Exp: no final norm; lm_head reads the streams as hyper_connection_mixer mixes them,
    # which its blocks' layer_output already is (`text.Qwen4ExpLayer`); the text model repeats the
    # embeddings the scatter left into its streams, so they are read where it is handed them
    Wrapper("qwen4_exp", **QWEN_VIT.mounts, text_only="model", refuses=QWEN_VIT.refuses, readout=UNNORMED,
            entry=attrs.evolve(SCATTER, embeddings_to="model.language_model"),
            image_grids=lambda part: QWEN_VIT.image_grids),
    Text(tuple(TEXTS), envoys=text_envoys),
    Tower(tuple(TOWERS), rename=QWEN_VIT.tower_rename, envoys=tower_envoys),
    # Qwen3.5's gated attention (head outputs read at o_proj's input, after the gate), for
    # the families written on its blocks; the DeepStack block (its tap read at the text model's
    # `_deepstack_process` call, call k after block k), for Granite-Docling's
    adapters={"gated_attention": GatedAttention, "deepstack_layer": DeepStackLayer},
    checkpoints=builders,
)
