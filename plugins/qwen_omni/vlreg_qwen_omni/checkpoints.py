"""Tiny checkpoints of the Qwen omni thinkers for tests: random weights, the real processors.

Each is a thinker (the model that reads text, images, videos and audio and writes text;
the talker that speaks is a separate model): the real ``Qwen2_5OmniProcessor`` or
``Qwen3OmniMoeProcessor`` with the Qwen image processor, its video processor and Whisper's
feature extractor for audio, a tokenizer holding the line's image, video and audio
placeholders and brackets (named to the processor by role), a chat template after the
published one, and the thinker's config:

* Qwen2.5-Omni: Qwen2.5-VL's windowed tower 32 wide (2 blocks, windows of 56 pixels, block
  1 attending over whole images; 14-pixel patches merged 2 x 2), a Qwen2 text model 64
  wide (4 query heads of 16 over 2 key/value heads, M-RoPE sections [2, 3, 3]), a
  one-layer audio encoder;
* Qwen3-Omni: Qwen3-VL's tower 32 wide (3 blocks, learned positions on a 4 x 4 grid,
  DeepStack taps after blocks 0 and 1; 16-pixel patches merged 2 x 2), a Qwen3-MoE text
  model 64 wide whose MLPs route each token to 2 of 4 experts, a one-layer audio encoder.
"""

from __future__ import annotations

from pathlib import Path

from vlreg.testing import TINY_TEXT, family_builders, save, tokenizer

#: role -> token, as the processors ask the tokenizer for them
QWEN2_5_ROLES = {
    "image_token": "<|IMAGE|>",
    "video_token": "<|VIDEO|>",
    "audio_token": "<|AUDIO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
}
QWEN3_ROLES = {
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "audio_token": "<|audio_pad|>",
    "vision_bos_token": "<|vision_start|>",
    "vision_eos_token": "<|vision_end|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
}

#: Qwen2.5-Omni's default system turn (the published template writes it when a
#: conversation has none).
QWEN2_5_SYSTEM = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving "
    "auditory and visual inputs, as well as generating text and speech."
)


def _template(roles: dict, system: str | None) -> str:
    """A ChatML template: each image, video and audio as its bracketed placeholder, and
    ``system`` as the first turn where the conversation has none."""
    default = (
        "{% if loop.first and message['role'] != 'system' %}"
        f"<|im_start|>system\n{system}<|im_end|>\n"
        "{% endif %}"
    ) if system else ""
    vision = f"{roles['vision_bos_token']}{{}}{roles['vision_eos_token']}"
    return (
        "{% for message in messages %}" + default +
        "<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for item in message['content'] %}"
        "{% if item['type'] == 'image' or 'image' in item or 'image_url' in item %}"
        + vision.format(roles["image_token"]) +
        "{% elif item['type'] == 'audio' or 'audio' in item or 'audio_url' in item %}"
        f"{roles['audio_bos_token']}{roles['audio_token']}{roles['audio_eos_token']}"
        "{% elif item['type'] == 'video' or 'video' in item %}"
        + vision.format(roles["video_token"]) +
        "{% elif 'text' in item %}{{ item['text'] }}"
        "{% endif %}{% endfor %}{% endif %}"
        "<|im_end|>\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


AUDIO = {"encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 64, "d_model": 32, "output_dim": 64}

#: family -> (config class, processor class, token roles, system turn, patch size, text, vision, audio)
FAMILIES = {
    "qwen2_5_omni_thinker": (
        "Qwen2_5OmniThinkerConfig", "Qwen2_5OmniProcessor", QWEN2_5_ROLES, QWEN2_5_SYSTEM, 14,
        {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}},
        {"depth": 2, "hidden_size": 32, "num_heads": 4, "intermediate_size": 64, "out_hidden_size": 64,
         "window_size": 56, "fullatt_block_indexes": [1]},
        AUDIO,
    ),
    "qwen3_omni_moe_thinker": (
        "Qwen3OmniMoeThinkerConfig", "Qwen3OmniMoeProcessor", QWEN3_ROLES, None, 16,
        {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
         "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}},
        {"depth": 3, "hidden_size": 32, "num_heads": 4, "intermediate_size": 64, "out_hidden_size": 64,
         "patch_size": 16, "num_position_embeddings": 16, "deepstack_visual_indexes": [0, 1]},
        {**AUDIO, "downsample_hidden_size": 16},
    ),
}

#: Pixels the tiny processors resize an image between: 2 x 2 to 6 x 6 image tokens.
PIXELS = {14: (56 * 56, 168 * 168), 16: (64 * 64, 192 * 192)}


def _tiny(family: str, path: Path, text: dict, vision: dict, overrides: dict) -> Path:
    import transformers
    from transformers import GenerationConfig, Qwen2VLImageProcessor, WhisperFeatureExtractor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    config_class, processor_class, roles, system, patch, text_extra, vision_extra, audio = FAMILIES[family]
    special = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *roles.values())
    tok = tokenizer(special, eos_token="<|im_end|>", pad_token="<|endoftext|>", **roles)
    ids = dict(zip(special, tok.convert_tokens_to_ids(list(special))))
    low, high = PIXELS[patch]
    sizes = dict(patch_size=patch, merge_size=2, size={"shortest_edge": low, "longest_edge": high})
    processor = getattr(transformers, processor_class)(
        image_processor=Qwen2VLImageProcessor(**sizes),
        video_processor=Qwen2VLVideoProcessor(**sizes),
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=_template(roles, system),
    )
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    text = {"vocab_size": len(tok), **TINY_TEXT, **text_extra, "eos_token_id": eos, "pad_token_id": pad, **text}
    vision = {"patch_size": patch, "spatial_merge_size": 2, "temporal_patch_size": 2, **vision_extra, **vision}
    config = getattr(transformers, config_class)(
        text_config=text,
        vision_config=vision,
        audio_config=audio,
        image_token_id=ids[roles["image_token"]],
        video_token_id=ids[roles["video_token"]],
        audio_token_id=ids[roles["audio_token"]],
        audio_start_token_id=ids[roles["audio_bos_token"]],
        audio_end_token_id=ids[roles["audio_eos_token"]],
        vision_start_token_id=ids[roles["vision_bos_token"]],
        vision_end_token_id=ids[roles["vision_eos_token"]],
        **overrides,
    )
    return save(path, config, processor, GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad))


BUILDERS = family_builders(_tiny, FAMILIES)
