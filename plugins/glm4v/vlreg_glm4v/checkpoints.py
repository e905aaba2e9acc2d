"""Tiny checkpoints of the GLM-V line for tests: random weights, the real processors.

One builder per served model type (`BUILDERS`), all the same shape: a tokenizer with
GLM's special tokens (``[gMASK]<sop>``, the turn tokens, the image and video brackets and
their one placeholder ``<|image|>``, which a video's frames use too), the real
``Glm4vProcessor`` (``Glm46VProcessor`` on GLM-4.6V, Glmga and GLM-OCR) with GLM's image
processor at 14-pixel patches merged 2 x 2 (a token is 28 x 28 pixels), a chat template
written after the published one of each line, and the wrapper's config:

* text 64 wide, 2 blocks, 4 query heads of 16 over 2 key/value heads, a half-width
  rotary embedding in M-RoPE sections [1, 1, 2] (GLM-4.1V's 0.5 and [8, 12, 12], shrunk);
  GLM-4.1V's and GLM-OCR's blocks are sandwich-normed; GLM-4.5V's first block is dense and
  its second routes each token to 2 of 4 experts in 2 groups beside a shared expert,
  weights scaled by 2.5;
* a tower 32 wide, 2 blocks of 4 heads, learned positions on a 4 x 4 grid (GLM-OCR has
  none), whose downsampling convolution maps each 2 x 2 block of patches to one 64-wide
  token, then a merger whose hidden width (``vision_config.intermediate_size``, 48)
  differs from the tower blocks' MLP width (``out_hidden_size``, 64) as on the real ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, family_builders, save, tokenizer

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|image|>",
    "<|video|>",
    "<think>",
    "</think>",
    "<|begin_of_box|>",
    "<|end_of_box|>",
)
#: A turn ends where the next speaker's token comes: GLM stops on these.
STOP = ("<|endoftext|>", "<|user|>", "<|observation|>")

_CONTENT = (
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{%- else %}{%- for item in message['content'] %}"
    "{%- if item['type'] == 'video' or 'video' in item %}<|begin_of_video|><|video|><|end_of_video|>"
    "{%- elif item['type'] == 'image' or 'image' in item %}<|begin_of_image|><|image|><|end_of_image|>"
    "{%- elif item['type'] == 'text' %}{{ item['text'] }}"
    "{%- endif %}{%- endfor %}{%- endif %}"
)

#: GLM-4.1V-Thinking's format: ``[gMASK]<sop>``, then ``<|role|>`` and a newline before
#: each turn, images as ``<|begin_of_image|><|image|><|end_of_image|>``.
CHAT_TEMPLATE_41V = (
    "[gMASK]<sop>"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}<|system|>\n" + _CONTENT +
    "{%- elif message['role'] == 'user' %}<|user|>\n" + _CONTENT +
    "{%- elif message['role'] == 'assistant' %}<|assistant|>\n" + _CONTENT +
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{{ '\\n' }}{% endif %}"
)

#: GLM-4.5V's and GLM-4.6V's (and GLM-OCR's) format: GLM-4.1V's, with a thinking switch:
#: ``enable_thinking=False`` appends ``/nothink`` to each user turn and opens the answer
#: with an empty ``<think></think>``.
CHAT_TEMPLATE_45V = (
    "[gMASK]<sop>"
    "{%- set nothink = enable_thinking is defined and not enable_thinking %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}<|system|>\n" + _CONTENT +
    "{%- elif message['role'] == 'user' %}<|user|>\n" + _CONTENT + "{{ '/nothink' if nothink else '' }}"
    "{%- elif message['role'] == 'assistant' %}<|assistant|>\n" + _CONTENT +
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{{ '\\n<think></think>\\n' if nothink else '\\n' }}{% endif %}"
)

#: Pixels the tiny processor resizes an image between: 2 x 2 to 6 x 6 tokens of 28 x 28
#: pixels. GLM's resize counts a still image as two frames (the temporal patch), so the
#: bounds are twice the pixels of one.
MIN_PIXELS, MAX_PIXELS = 2 * 56 * 56, 2 * 168 * 168

#: GLM-5-Next's image processor bounds an image in tokens, not pixels: the same 2 x 2 to 6 x 6
TOKEN_BOUNDS = {"glm5_next": {"min_image_tokens": 4, "max_image_tokens": 36}}

TEXT = {
    **TINY_TEXT,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                        "mrope_section": [1, 1, 2]},
}
MOE = {
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "n_group": 2,
    "topk_group": 1,
    "routed_scaling_factor": 2.5,
    "norm_topk_prob": True,
}
#: GLM-5-Next's text model, three blocks: a linear (KDA) block of 4 heads of 16, then two latent
#: attention blocks (4 heads, queries through a 32-wide latent, keys and values through a 16-wide one,
#: no rotary part), the first running its DSA indexer (2 heads of 16 choosing 2 pools of 2 keys and
#: the incomplete last pool), the second reusing that selection ("shared"); a dense first MLP, then
#: 2 of 4 experts in 2 groups beside a shared expert; 3 hyper-connection streams.
GLM5_NEXT = {
    "num_hidden_layers": 3, "num_key_value_heads": 4, "rope_parameters": None,
    "layer_types": ["linear_attention", "indexed_attention", "indexed_attention"],
    "indexer_types": ["full", "full", "shared"], "mlp_layer_types": ["dense", "sparse", "sparse"],
    "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 0, "v_head_dim": 16,
    "index_topk": 4, "index_kpool": 2, "index_head_dim": 16, "index_n_heads": 2,
    "linear_head_dim": 16, "linear_num_heads": 4, "hc_mult": 3, "hc_sinkhorn_iters": 4,
    **{key: MOE[key] for key in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                                 "n_shared_experts", "n_group", "topk_group", "routed_scaling_factor")},
}
VISION = {
    "depth": 2,
    "hidden_size": 32,
    "num_heads": 4,
    "out_hidden_size": 64,
    "intermediate_size": 48,
    "image_size": 56,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}

#: model type -> (config class, processor class, image and video processor classes'
#: prefix, chat template, text config, vision config)
FAMILIES = {
    "glm4v": ("Glm4vConfig", "Glm4vProcessor", "Glm4v", CHAT_TEMPLATE_41V, {}, {}),
    "glm4v_moe": ("Glm4vMoeConfig", "Glm4vProcessor", "Glm4v", CHAT_TEMPLATE_45V, MOE, {}),
    # GLM-4.6V: GLM-4.1V's classes, its parts chosen by their model types
    "glm46v": ("Glm46VConfig", "Glm46VProcessor", "Glm46V", CHAT_TEMPLATE_45V,
               {"model_type": "glm4v_text"}, {"model_type": "glm4v_vision"}),
    "glmga": ("GlmgaConfig", "Glm46VProcessor", "Glmga", CHAT_TEMPLATE_45V,
              {"model_type": "glm4v_text"}, {"model_type": "glm4v_vision"}),
    "glm_ocr": ("GlmOcrConfig", "Glm46VProcessor", "Glm46V", CHAT_TEMPLATE_45V, {}, {"attention_bias": True}),
    "glm5_next": ("Glm5NextConfig", "Glm5NextProcessor", "Glm5Next", CHAT_TEMPLATE_45V, GLM5_NEXT,
                  {"attention_bias": True, "projection_intermediate_size": 48}),
}


def processor(family: str, **sizes: Any) -> Any:
    """The family's real processor over the tiny tokenizer; ``sizes`` are the image
    processor's (``size={"shortest_edge": ..., "longest_edge": ...}``)."""
    import transformers

    _, processor_class, prefix, template, _, _ = FAMILIES[family]
    tok = tokenizer(SPECIAL_TOKENS, _corpus(), eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    size = sizes.pop("size", {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS})
    return getattr(transformers, processor_class)(
        image_processor=getattr(transformers, f"{prefix}ImageProcessor")(size=size, **TOKEN_BOUNDS.get(family, {}),
                                                                          **sizes),
        # a list of frames carries no timing, which GLM's sampling by fps needs: every frame is taken
        video_processor=getattr(transformers, f"{prefix}VideoProcessor")(size=size, do_sample_frames=False, **sizes),
        tokenizer=tok,
        chat_template=template,
    )


def _corpus() -> tuple[str, ...]:
    from vlreg.testing.checkpoints import CORPUS

    return (*CORPUS, "user assistant system /nothink")


def _tiny(family: str, path: Path, text: dict, vision: dict, overrides: dict) -> Path:
    import transformers
    from transformers import GenerationConfig

    config_class, _, _, _, text_extra, vision_extra = FAMILIES[family]
    made = processor(family)
    tok = made.tokenizer
    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    eos, pad = ids["<|endoftext|>"], ids["<|endoftext|>"]
    text = {"vocab_size": len(tok), **TEXT, **text_extra, "eos_token_id": eos, "pad_token_id": pad, **text}
    vision = {**VISION, **vision_extra, **vision}
    if family == "glm_ocr":
        vision.pop("image_size")  # no learned positions to size
    config = getattr(transformers, config_class)(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image|>"],
        video_token_id=ids["<|video|>"],
        image_start_token_id=ids["<|begin_of_image|>"],
        image_end_token_id=ids["<|end_of_image|>"],
        video_start_token_id=ids["<|begin_of_video|>"],
        video_end_token_id=ids["<|end_of_video|>"],
        **overrides,
    )
    stops = [ids[token] for token in STOP]
    return save(path, config, made, GenerationConfig(eos_token_id=stops, pad_token_id=pad))


BUILDERS = family_builders(_tiny, FAMILIES)
