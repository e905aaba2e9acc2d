"""Inkling 2 checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``Inkling2Processor`` over ``Inkling2ImageProcessor``, which cuts an image,
padded to whole tokens, into one 8 x 8 pixel row per image token here (2 x 2 patches of 4
pixels; the published one cuts 40 x 40 rows of 2 x 2 patches of 20), and writes one
``<|unused_200054|>`` per token. The chat format is ChatML-like, written for the test (the
published template was not at hand).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import tiny
from vlreg.testing.recipes import chat_template

IMAGE = "<|unused_200054|>"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", IMAGE)
CHAT_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", IMAGE)


def build_inkling2(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Inkling2ForConditionalGeneration checkpoint to ``path``: a text
    model 64 wide of 2 blocks, a sliding-window one (window 8) then a full-attention one, 4
    query heads over 2 key heads of 16, the block attention residual restarting every 2
    blocks, 4 routed experts (2 per token) 32 wide; a tower 32 wide, 2 blocks of 2 heads,
    4-pixel patches merged 2 x 2, a learned 4 x 4 grid of positions.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import Inkling2Config

    return _inkling2(path, Inkling2Config, overrides)


def _inkling2(path: Path, config: Any, overrides: dict) -> Path:
    from transformers import Inkling2ImageProcessor, Inkling2Processor

    heads = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
    return tiny(
        path, config,
        lambda tok: Inkling2Processor(image_processor=Inkling2ImageProcessor(size={"height": 8, "width": 8}),
                                      tokenizer=tok, chat_template=CHAT_TEMPLATE, image_token=IMAGE),
        tokens=SPECIAL_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        # every row of the readout a real token (the tokenizer's 320): transformers 5.23 cuts
        # lm_head's output to unpadded_vocab_size, 5.25 builds lm_head that narrow
        text={"vocab_size": 320, "unpadded_vocab_size": 320, "hidden_size": 64, "num_hidden_layers": 2, "layer_types": ["hybrid_sliding", "hybrid"],
              "max_position_embeddings": 1024, **heads, **{f"swa_{name}": size for name, size in heads.items()},
              "sliding_window_size": 8, "d_rel": 4, "rel_extent": 16, "n_layers_per_attn_res_block": 2,
              "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 4, "spatial_merge_size": 2, "posemb_grid_size": 4, "projection_hidden_dim": 64,
                "text_hidden_size": 64},
        ids={"image_token_id": IMAGE},
        overrides=overrides,
    )


INKLING_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", IMAGE, "<|unused_200053|>", "<|content_image|>",
                  "<|content_audio_input|>")


def build_inkling_mm_model(path: Path, **overrides: Any) -> Path:
    """Write a random-weight InklingForConditionalGeneration (Inkling 1) checkpoint to ``path``:
    a text model 64 wide of 2 blocks (a sliding-window one, window 8, then a full-attention one;
    a dense MLP then routed experts, 4 of them, 2 per token, and 2 shared), 4 query heads over 2
    key heads of 16; a tower of 4 folding layers over 4-pixel patches (one patch an image token; its
    config's unused ``hidden_size`` 48, apart from the text's 64 its output has);
    a small audio tower, which vlreg refuses.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import InklingConfig, InklingFeatureExtractor, InklingImageProcessor, InklingProcessor

    heads = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
    return tiny(
        path, InklingConfig,
        lambda tok: InklingProcessor(feature_extractor=InklingFeatureExtractor(),
                                     image_processor=InklingImageProcessor(size={"height": 4, "width": 4}),
                                     tokenizer=tok, chat_template=CHAT_TEMPLATE),
        tokens=INKLING_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        text={"vocab_size": 320, "unpadded_vocab_size": 320, "hidden_size": 64, "num_hidden_layers": 2,
              "layer_types": ["hybrid_sliding", "hybrid"], "mlp_layer_types": ["dense", "sparse"],
              "max_position_embeddings": 1024, **heads, **{f"swa_{name}": size for name, size in heads.items()},
              "sliding_window_size": 8, "d_rel": 4, "rel_extent": 16, "intermediate_size": 128,
              "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 2,
              "logits_mup_width_multiplier": 4.0},
        vision={"patch_size": 4, "temporal_patch_size": 2, "num_hidden_layers": 4, "hidden_size": 48},
        ids={"image_token_id": IMAGE, "audio_token_id": "<|unused_200053|>",
             "image_bos_token_id": "<|content_image|>", "audio_bos_token_id": "<|content_audio_input|>"},
        fields={"audio_config": {"n_mel_bins": 80, "mel_vocab_size": 16}},
        overrides=overrides,
    )


def build_inkling2_loop(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Inkling2LoopForConditionalGeneration checkpoint (transformers
    5.25) to ``path``: `build_inkling2`'s, every block opening its own group (a group of
    one, as the loop must start and end on a group's edge), its second block looped: run
    twice a forward, the second pass gated by messages from the first (rank 8).
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import Inkling2LoopConfig

    loop = {"n_layers_per_attn_res_block": 1, "loop_layer_index_start": 1, "loop_layer_index_end": 2,
            "loop_num_passes": 2, "loop_gate_rank": 8}
    return _inkling2(path, Inkling2LoopConfig, {**overrides, "text_config": {**loop, **overrides.get("text_config", {})}})
