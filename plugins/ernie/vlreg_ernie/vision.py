"""ERNIE 4.5-VL-MoE's tower: the Qwen ViT (the ``"qwen_vit"`` adapter's envoys), whose
attention is Qwen2.5-VL's, one call per image."""

from vlreg.plugin import adapter, tower_envoys

QWEN_VIT = adapter("qwen_vit")

envoys = tower_envoys(
    "ernie4_5_vl_moe",
    ("Ernie4_5_VLMoeVisionTransformerPretrainedModel", "Ernie4_5_VLMoeVisionBlock", "Ernie4_5_VLMoeVisionAttention",
     "Ernie4_5VLVisionMLP"),
    vision=QWEN_VIT.Vision, attention=QWEN_VIT.Attention)
