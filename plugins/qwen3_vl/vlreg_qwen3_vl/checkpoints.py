"""Checkpoints of the Qwen3 line for tests: tiny, or a real geometry at reduced depth.

One builder per family (`BUILDERS`), all the same shape: the tokenizer's special tokens
and the chat format are Qwen2-VL's, the processor is the real ``Qwen3VLProcessor`` with
the Qwen image processor at 16-pixel patches (a token is 32 x 32 pixels), the text model
is 64 wide with 4 query heads over 2 key/value heads of 16 and M-RoPE sections [2, 3, 3]
interleaved, and the tower is 32 wide. The tiny tower has three blocks and, on Qwen3-VL,
DeepStack taps after blocks 0 and 1, so text blocks 0 and 1 receive them. The MoE text
models route each token to 2 of 4 experts; Qwen3.5's blocks are linear, full, linear.

``cohere_compass`` is Cohere's North on Qwen3-VL's shape: its text blocks are Cohere2's
(parallel, sliding-window blocks rotated, the last block global with no positions), the
logits scaled by ``logit_scale`` 0.5, and its own processor classes (Qwen3-VL's by another
name).

``cosmos3_omni`` is the Qwen3-VL checkpoint under a ``Cosmos3OmniConfig`` (untied
embeddings, the config's default). transformers maps no processor to ``cosmos3_omni``
(only its image processor, ``Qwen2VLImageProcessor``, and its tokenizer), so the
checkpoint saves a ``Qwen3VLProcessor``, which ``AutoProcessor`` then loads from its
``processor_class``; a published Cosmos3 checkpoint's own processor files decide there.
"""

from __future__ import annotations

from pathlib import Path

from vlreg.testing import TINY_TEXT, chat_template, family_builders, from_source, save, tokenizer
from vlreg_qwen2_vl.checkpoints import CHAT_TEMPLATE, SPECIAL_TOKENS

#: Pixels the tiny processor resizes an image between: 2 x 2 to 5 x 5 tokens of 32 pixels.
MIN_PIXELS, MAX_PIXELS = 64 * 64, 160 * 160

TEXT = {**TINY_TEXT, "num_hidden_layers": 3, "head_dim": 16}
MROPE = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "depth": 3,
    "num_heads": 4,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "num_position_embeddings": 16,
}
#: Cohere's blocks: two sliding-window blocks rotated, the last global and unrotated.
COHERE = {"layer_types": ["sliding_attention", "sliding_attention", "full_attention"], "sliding_window": 4096,
          "rope_parameters": {"sliding_attention": MROPE, "full_attention": None}, "logit_scale": 0.5}
MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
LINEAR = {
    "layer_types": ["linear_attention", "full_attention", "linear_attention"],
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
}

#: Qwen4-Exp: Qwen3.5-MoE's blocks (linear, indexed, linear) under two hyper-connection streams,
#: n-gram embeddings (PLE) on block 0 over a small hashed table, and the sparse-attention indexer on
#: block 1 (all five indexer fields must be set: the attention always builds the indexer)
QWEN4_EXP = {
    **LINEAR, **MOE, "shared_expert_intermediate_size": 32,
    "layer_types": ["linear_attention", "indexed_attention", "linear_attention"],
    "hc_count": 2, "hc_lowrank": 8, "ple_layer_ids": [1], "ple_embed_dim": 16, "ngram_size": 3, "heads_per_ngram": 2,
    "ngram_vocab_size_base": 97, "make_ngram_vocab_size_divisible_by": 8,
    "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 4,
    "indexer_compress_ratio": 2,
}

#: family -> (config class, what its text config adds, what its tower adds, tied embeddings)
FAMILIES = {
    "qwen3_vl": ("Qwen3VLConfig", {}, {"deepstack_visual_indexes": [0, 1]}, True),
    "cosmos3_omni": ("Cosmos3OmniConfig", {}, {"deepstack_visual_indexes": [0, 1]}, False),
    "cohere_compass": ("CohereCompassConfig", COHERE, {"deepstack_visual_indexes": [0, 1]}, False),
    "qwen3_vl_moe": ("Qwen3VLMoeConfig", {**MOE, "num_local_experts": 4}, {"deepstack_visual_indexes": [0, 1]}, True),
    # untied, as Qwen3.5's are: its text-only class reads lm_head from the checkpoint
    "qwen3_5": ("Qwen3_5Config", LINEAR, {}, False),
    "qwen3_5_moe": ("Qwen3_5MoeConfig", {**LINEAR, **MOE, "shared_expert_intermediate_size": 32}, {}, False),
    "qwen4_exp": ("Qwen4ExpConfig", QWEN4_EXP, {}, False),
}

#: The tokens a prompt is written with: the special tokens, then the end of a turn, the padding,
#: the image's and the video's placeholders and the vision markers (Qwen's, in its chat format).
QWEN_PROMPTS = (SPECIAL_TOKENS, ("<|im_end|>", "<|endoftext|>", "<|image_pad|>", "<|video_pad|>", "<|vision_start|>",
                                 "<|vision_end|>"), CHAT_TEMPLATE)
#: Cohere's North's: its processor's placeholders and markers, in Cohere's turns (the published
#: template's preamble and role tokens left out).
_COHERE = ("<|END_OF_TURN_TOKEN|>", "<PAD>", "<|IMAGE_PAD|>", "<|VIDEO_PAD|>", "<|VISION_START|>", "<|VISION_END|>")
COHERE_PROMPTS = (("<|START_OF_TURN_TOKEN|>", *_COHERE), _COHERE, chat_template(
    "<|START_OF_TURN_TOKEN|>{role}\n", "<|END_OF_TURN_TOKEN|>", "<|VISION_START|><|IMAGE_PAD|><|VISION_END|>",
    "<|VISION_START|><|VIDEO_PAD|><|VISION_END|>"))
#: family -> its processor's, image processor's and video processor's classes and its prompts,
#: where not Qwen3-VL's
PROCESSORS = {"cohere_compass": ("CohereCompassProcessor", "CohereCompassImageProcessor", "CohereCompassVideoProcessor",
                                 COHERE_PROMPTS)}


def _build(family: str, path: Path, text: dict, vision: dict, overrides: dict) -> Path:
    """Tiny (see the module), or with ``source=`` a real checkpoint's metadata folder at 2
    text blocks and a tower cut to keep its DeepStack taps."""
    source = overrides.pop("source", None)
    if source is not None:
        return _from_source(path, Path(source), text, vision, overrides)
    return _tiny(family, path, text, vision, overrides)


def _from_source(path: Path, source: Path, text: dict, vision: dict, overrides: dict) -> Path:
    """The real geometry, shallow. A reduced tower keeps its DeepStack taps inside its
    depth (the real 4B taps blocks 5, 11 and 17): they move to its first blocks, else
    DeepStack would silently never run."""
    from transformers import AutoConfig

    taps = getattr(AutoConfig.from_pretrained(source).vision_config, "deepstack_visual_indexes", None) or []
    vision.setdefault("depth", max(len(taps), 2))
    if taps:
        vision.setdefault("deepstack_visual_indexes", list(range(min(len(taps), vision["depth"]))))
    text.setdefault("num_hidden_layers", max(len(taps), 2))
    return from_source(path, source, text=text, vision=vision, **overrides)


def _tiny(family: str, path: Path, text: dict, vision: dict, overrides: dict) -> Path:
    import transformers
    from transformers import GenerationConfig

    config_class, text_extra, vision_extra, tied = FAMILIES[family]
    *names, (tokens, named, template) = PROCESSORS.get(
        family, ("Qwen3VLProcessor", "Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", QWEN_PROMPTS))
    processor_class, image_class, video_class = (getattr(transformers, name) for name in names)
    end, padding, image, video, start, stop = named
    tok = tokenizer(tokens, eos_token=end, pad_token=padding)
    ids = dict(zip(tokens, tok.convert_tokens_to_ids(list(tokens))))
    sizes = dict(patch_size=16, merge_size=2, size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS})
    processor = processor_class(
        image_processor=image_class(**sizes),
        video_processor=video_class(**sizes),
        tokenizer=tok,
        chat_template=template,
    )
    eos, pad = ids[end], ids[padding]
    text = {"vocab_size": len(tok), **TEXT, "rope_parameters": MROPE, **text_extra, "bos_token_id": None,
            "eos_token_id": eos, "pad_token_id": pad, "tie_word_embeddings": tied, **text}
    vision = {**VISION, "out_hidden_size": text["hidden_size"], **vision_extra, **vision}
    config = getattr(transformers, config_class)(
        text_config=text,
        vision_config=vision,
        image_token_id=ids[image],
        video_token_id=ids[video],
        vision_start_token_id=ids[start],
        vision_end_token_id=ids[stop],
        tie_word_embeddings=tied,
        **overrides,
    )
    return save(path, config, processor, GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad))


BUILDERS = family_builders(_build, FAMILIES)
