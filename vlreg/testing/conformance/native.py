"""The native paths a family's standard names must resolve to (``native`` of a conformance
class), written as its layout: transformers' composite vision-language layout by default,
with the tower's own names under it from a table several families share. Each path is still
checked one by one against the loaded model (`test_standard_names_resolve_to_native_paths`),
so a table names only what a tower of that kind really holds::

    native = composite(QWEN_VIT, vision="model.visual", projector="model.visual.merger")
    native = composite(SIGLIP) | {"layers.0.input_layernorm": "model.language_model.layers.0.input_layernorm"}
"""

from __future__ import annotations

from typing import Mapping

#: A CLIP encoder's names, from the tower (its ``post_layernorm`` norms the pooled row only).
CLIP = {
    "layers": "encoder.layers",
    "patch_embed": "embeddings.patch_embedding",
    "layers.0.self_attn": "encoder.layers.0.self_attn",
    "layers.0.mlp": "encoder.layers.0.mlp",
    "layers.0.input_layernorm": "encoder.layers.0.layer_norm1",
    "layers.0.post_attention_layernorm": "encoder.layers.0.layer_norm2",
}
#: A SigLIP encoder's (Idefics3's, Janus's and Aria's towers are laid out the same).
SIGLIP = {**CLIP, "norm": "post_layernorm"}
#: The Qwen ViT's (Qwen2-VL to Qwen3.5, the omni thinkers, GLM-4V).
QWEN_VIT = {
    "layers": "blocks",
    "patch_embed": "patch_embed",
    "layers.0.self_attn": "blocks.0.attn",
    "layers.0.mlp": "blocks.0.mlp",
    "layers.0.input_layernorm": "blocks.0.norm1",
    "layers.0.post_attention_layernorm": "blocks.0.norm2",
}
#: Pixtral's (Mistral 3, LightOnOCR, Pixtral on LLaVA).
PIXTRAL = {
    "layers": "transformer.layers",
    "patch_embed": "patch_conv",
    "layers.0.self_attn": "transformer.layers.0.attention",
    "layers.0.mlp": "transformer.layers.0.feed_forward",
    "layers.0.input_layernorm": "transformer.layers.0.attention_norm",
    "layers.0.post_attention_layernorm": "transformer.layers.0.ffn_norm",
}


def composite(tower: Mapping[str, str] | None = None, *, text: str = "model.language_model",
              vision: str = "model.vision_tower", projector: str = "model.multi_modal_projector",
              lm_head: str = "lm_head") -> dict[str, str]:
    """``{standard name: native path}`` of a model laid out as transformers' composite
    vision-language models are: the text model's ``layers``, ``embed_tokens`` and ``norm``
    under ``text``, the readout at ``lm_head``, the tower at ``vision`` with ``tower``'s
    names (relative to it) under it, the projector at ``projector``."""
    paths = {mount: f"{text}.{mount}" for mount in ("layers", "embed_tokens", "norm")}
    paths |= {"lm_head": lm_head, "vision": vision, "projector": projector}
    return paths | {f"vision.{name}": f"{vision}.{path}" for name, path in (tower or {}).items()}
