"""EXAONE 4.5's tower (``Exaone4_5_VisionModel``): Qwen2.5-VL's windowed Qwen ViT, its
attention grouped-query (``qkv`` split into the queries, then fewer key and value heads).

The Qwen ViT's reads hold: the queries, keys and values are the three ``unsqueeze`` calls
after the rotary embedding (``[1, heads, patches, head_dim]``, the keys and values with the
key heads), the head outputs the join of the per-window calls."""

from vlreg.plugin import adapter, tower_envoys

#: The tower's module classes onto the windowed Qwen ViT's envoys.
envoys = tower_envoys(
    "exaone4_5", ("Exaone4_5_VisionModel", "Exaone4_5_VisionBlock", "Exaone4_5_VisionAttention", "Exaone4_5_MLP"),
    vision=adapter("windowed_qwen_vit"), attention=adapter("qwen_vit").Attention)
