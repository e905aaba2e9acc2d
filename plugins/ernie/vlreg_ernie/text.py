"""ERNIE 4.5-VL-MoE's text blocks: pre-norm, Llama-shaped attention (3-D rotary positions,
applied before the attention function, so the standard reads hold), a dense MLP on the blocks
``mlp_layer_types`` calls dense, and on the others experts chosen by modality
(`vlreg.plugin.ModalityExperts`), each bank a `vlreg.plugin.ExpertBank`. The shared experts are
the dense MLP's class, so they are an `Mlp` too (``mlp.shared_experts.mlp_output``)."""

from vlreg.plugin import Attention, ExpertBank, Layer, ModalityExperts, Mlp, modeling_envoys

#: The banks under their standard names (names no other module of the model has).
RENAME = {"text_moe": "text_experts", "vision_moe": "vision_experts"}

envoys = modeling_envoys("ernie4_5_vl_moe", {
    "Ernie4_5_VLMoeDecoderLayer": Layer,
    "Ernie4_5_VLMoeTextAttention": Attention,
    "Ernie4_5_VLMoeMLP": Mlp,
    "Ernie4_5_VLMoeMoeBlock": ModalityExperts,
    "Ernie4_5_VLMoeSparseMoeBlock": ExpertBank,
})
