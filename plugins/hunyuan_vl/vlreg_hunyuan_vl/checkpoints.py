"""HunYuan-VL checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``HunYuanVLProcessor`` over its own image processor (16-pixel patches merged
2 x 2, so a token is 32 x 32 pixels); the tokenizer names the image placeholder and the marks
around it (``image_token``, ``image_start_token``, ``image_end_token``) and a padding token, as
the processor requires. The chat template is written in plain turns with each image as
``<image_start><image><image_end>``; no published template was at hand, and nothing here
depends on more than its placeholder and marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

IMAGE, START, END = "<image>", "<image_start>", "<image_end>"
TOKENS = ("<pad>", "<s>", "</s>", START, END, IMAGE, "<image_newline>")
CHAT_TEMPLATE = chat_template("<|{role}|>", "</s>", f"{START}{IMAGE}{END}")

#: Pixels the tiny processor resizes an image between: 2 x 2 to 5 x 5 tokens of 32 pixels.
SIZE = {"shortest_edge": 64 * 64, "longest_edge": 160 * 160}


def build_hunyuan_vl(path: Path, **overrides: Any) -> Path:
    """Write a random-weight HunYuanVLForConditionalGeneration checkpoint to ``path``: a text
    model 64 wide, 2 blocks, 4 query heads over 2 key heads of 16 (queries and keys normed per
    head), M-RoPE; a tower 32 wide, 2 blocks of 2 heads, a learned 4 x 4 position grid.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import HunYuanVLConfig, HunYuanVLImageProcessor, HunYuanVLProcessor

    return tiny(
        path, HunYuanVLConfig,
        lambda tok: HunYuanVLProcessor(image_processor=HunYuanVLImageProcessor(size=SIZE), tokenizer=tok,
                                       chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "image_token": IMAGE,
                              "image_start_token": START, "image_end_token": END},
        text={**TINY_TEXT, "head_dim": 16,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 3, 3]}},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 16, "spatial_merge_size": 2, "max_image_size": 64, "min_image_size": 32,
                "out_hidden_size": TINY_TEXT["hidden_size"], "text_hidden_size": TINY_TEXT["hidden_size"]},
        ids={"image_token_id": IMAGE, "im_start_id": START, "im_end_id": END, "im_newline_id": "<image_newline>"},
        overrides=overrides,
    )


V4_IMAGE, V4_VIDEO, V4_START, V4_END = "<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"
V4_TOKENS = ("<pad>", "<s>", "</s>", V4_START, V4_END, V4_IMAGE, V4_VIDEO)
#: HY-V4-VL's processor (Qwen2-VL's) expands one placeholder per image or video; the template
#: writes each between marks in plain turns (no published template was at hand; the marks'
#: names are the Qwen line's). The marks matter: the model's ``get_rope_index`` takes each run
#: of image tokens (``mm_token_type_ids``) as one image, so two placeholders side by side
#: would be read as one image's tokens.
V4_CHAT_TEMPLATE = chat_template("<|{role}|>", "</s>", f"{V4_START}{V4_IMAGE}{V4_END}",
                                 f"{V4_START}{V4_VIDEO}{V4_END}")
#: HY-V4-VL's text model: two blocks 64 wide over 2 hyper-connection streams; latent attention
#: of 4 heads (queries through a 32-wide latent, keys and values through a 16-wide one, 16 + 8
#: rotary dimensions, M-RoPE), the first block's DSA indexer (2 heads of 16 choosing 4 keys)
#: reused by the second ("shared"); a dense first MLP, then 2 of 4 experts beside a shared one.
HY_V4_TEXT = {
    **TINY_TEXT, "num_key_value_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8, "v_head_dim": 16, "head_dim": 24,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 1, 1]},
    "index_topk": 4, "index_head_dim": 16, "index_n_heads": 2, "indexer_types": ["full", "shared"],
    "mlp_layer_types": ["dense", "sparse"], "hc_mult": 2, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "n_shared_experts": 1,
}


def build_hy_v4_vl(path: Path, **overrides: Any) -> Path:
    """Write a random-weight HYV4VLForConditionalGeneration checkpoint to ``path`` (transformers
    5.25): the text model of `HY_V4_TEXT`; HunYuan-VL's tiny tower (32 wide, 2 blocks of 2 heads,
    a learned 4 x 4 position grid) whose merger projects to 64; the attention sinks random
    (`_random_sinks`). ``overrides``: ``text_config``
    and ``vision_config`` dicts, other fields of the config."""
    from transformers import HYV4VLConfig, HYV4VLImageProcessor, HYV4VLProcessor, HYV4VLVideoProcessor

    return tiny(
        path, HYV4VLConfig,
        lambda tok: HYV4VLProcessor(image_processor=HYV4VLImageProcessor(size=SIZE), tokenizer=tok,
                                    video_processor=HYV4VLVideoProcessor(size=SIZE),
                                    chat_template=V4_CHAT_TEMPLATE),
        tokens=V4_TOKENS, roles={"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                                 "image_token": V4_IMAGE, "video_token": V4_VIDEO},
        text=HY_V4_TEXT,
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 16, "spatial_merge_size": 2, "max_image_size": 64,
                "out_hidden_size": TINY_TEXT["hidden_size"]},
        ids={"image_token_id": V4_IMAGE, "video_token_id": V4_VIDEO},
        overrides=overrides, weights=_random_sinks,
    )


def _random_sinks(model: Any) -> None:
    """Each head's sink logit drawn at random: transformers starts them all at
    ``learnable_sink_init`` (0), where a sink is the same for every head."""
    for block in model.model.language_model.layers:
        block.self_attn.sinks.normal_()
