"""The Qwen2, Llama and Mistral text models, as text parts any wrapper can host.

Their blocks already use the standard names (``self_attn``, ``mlp``,
``input_layernorm``, ``post_attention_layernorm``) and call transformers' attention
interface once per block, so they need no rename, only their module classes mapped
onto the standard envoys. Claimed by ``text_config.model_type``, so another wrapper
on one of these text models reuses them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vlreg.plugin import Attention, Layer, Mlp

#: model_type -> (transformers module, class-name prefix)
MODELS = {
    "qwen2": ("qwen2", "Qwen2"),
    "llama": ("llama", "Llama"),
    "mistral": ("mistral", "Mistral"),
}
MODEL_TYPES = tuple(MODELS)


def envoys(part: Any) -> dict[type, type]:
    """The part's block, attention and MLP classes onto the standard envoys, looked up by
    the part's own model type when a checkpoint resolves."""
    module, prefix = MODELS[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    return {
        getattr(modeling, f"{prefix}DecoderLayer"): Layer,
        getattr(modeling, f"{prefix}Attention"): Attention,
        getattr(modeling, f"{prefix}MLP"): Mlp,
    }
