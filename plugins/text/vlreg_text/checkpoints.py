"""Tiny base language models for tests: config, random weights, a trained tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_LATENT_MOE, TINY_TEXT, tokenizer

#: model_type -> its causal-LM config class
CONFIGS = {"qwen2": "Qwen2Config", "qwen3": "Qwen3Config", "llama": "LlamaConfig", "mistral": "MistralConfig",
           "deepseek_v3": "DeepseekV3Config"}

TINY = {**TINY_TEXT, "head_dim": 16, "max_position_embeddings": 512}
#: model_type -> its tiny config, where it is not `TINY` (DeepSeek-V3: latent attention,
#: whose head widths are its own fields, and experts)
FIELDS = {"deepseek_v3": {**TINY_TEXT, "max_position_embeddings": 512, **TINY_LATENT_MOE}}


def builder(model_type: str):
    def build(path: Path, **overrides: Any) -> Path:
        """A random-weight causal LM of this type: 64 wide, 4 heads over 2 of 16, 2 blocks
        (DeepSeek-V3: `TINY_LATENT_MOE`'s latent attention and experts)."""
        import torch
        import transformers
        from transformers import AutoModelForCausalLM

        tok = tokenizer(["<|endoftext|>"], eos_token="<|endoftext|>", pad_token="<|endoftext|>")
        config = getattr(transformers, CONFIGS[model_type])(
            vocab_size=len(tok), **{**FIELDS.get(model_type, TINY), **overrides},
            bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        )
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(config).eval().save_pretrained(path)
        tok.save_pretrained(path)
        return Path(path)

    return build


BUILDERS = {f"{model_type}_base": builder(model_type) for model_type in CONFIGS}
