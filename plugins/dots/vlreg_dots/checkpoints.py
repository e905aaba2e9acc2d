"""A tiny dots3.note for tests: random weights, through the real processor.

The processor is ``Dots3NoteProcessor`` over ``Qwen2VLImageProcessor`` (14-pixel patches
merged 2 x 2, images resized whole to 2 x 2 .. 6 x 6 tokens), ``Qwen3VLVideoProcessor``, the
audio feature extractor (``Dots3NoteFeatureExtractor``, which the processor requires) and a
tokenizer holding dots' special tokens. The chat template is written after dots.ocr's turns
(``<|user|>...<|endofuser|><|assistant|>``), each image as ``<|img|><|imgpad|><|endofimg|>``;
no published dots3.note template was at hand to check it against, and nothing here depends on
more than its placeholder.

The text model: 2 blocks 64 wide, an indexed one (a DSA indexer of 2 heads of 16 choosing 4
keys) then a sliding-window one (8 tokens); latent attention of 4 heads (queries through a
32-wide latent, keys and values through a 16-wide one, 16 wide without positions plus 8
rotary, values 16 wide); a dense first MLP, then 2 of 4 experts in 2 groups beside a shared
expert, weights scaled by 2.5. The tower: 2 blocks 32 wide of 2 heads, a dense MLP then 2 of 4
experts; the audio tower one block 32 wide.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_LATENT_MOE, TINY_TEXT, tiny

TOKENS = ("<|endoftext|>", "<|user|>", "<|endofuser|>", "<|assistant|>", "<|endofassistant|>", "<|system|>",
          "<|endofsystem|>", "<|img|>", "<|imgpad|>", "<|endofimg|>", "<|video_pad|>", "<|audio_comp_pad|>")

_CONTENT = (
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|img|><|imgpad|><|endofimg|>"
    "{% elif part['type'] == 'video' %}<|img|><|video_pad|><|endofimg|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
)
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>" + _CONTENT
    + "<|endof{{ message['role'] }}|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

#: Pixels an image is resized between: 2 x 2 to 6 x 6 tokens of 28 x 28 pixels.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 168 * 168

#: The sliding-window block's latent attention, as dots' config names it (``swa_*``).
LATENT = {key: TINY_LATENT_MOE[key] for key in ("num_key_value_heads", "q_lora_rank", "kv_lora_rank",
                                                "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")}
TEXT = {
    **TINY_TEXT, **TINY_LATENT_MOE, "head_dim": 24, "shared_experts_intermediate_size": 32,
    "index_topk": 4, "index_head_dim": 16, "index_n_heads": 2,
    "layer_types": ["indexed_attention", "sliding_attention"], "sliding_window": 8,
    "swa_num_attention_heads": TINY_TEXT["num_attention_heads"], "swa_head_dim": 24,
    **{f"swa_{key}": value for key, value in LATENT.items() if key != "qk_rope_head_dim"},
}
VISION = {"hidden_size": 32, "intermediate_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "patch_size": 14, "spatial_merge_size": 2, "adapter_in_dim": 32,
          "adapter_out_dim": TINY_TEXT["hidden_size"], "pyramid_num_routed": [-1, 4], "num_experts_per_tok": 2}
AUDIO = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
         "adapter_input_size": 32, "adapter_out_dim": TINY_TEXT["hidden_size"], "downsample_hidden_size": 16,
         "feature_size": 16}


def build_dots3_note(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Dots3NoteForConditionalGeneration checkpoint to ``path``.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import (Dots3NoteConfig, Dots3NoteFeatureExtractor, Dots3NoteProcessor, Qwen2VLImageProcessor,
                              Qwen3VLVideoProcessor)

    size = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
    return tiny(
        path, Dots3NoteConfig,
        lambda tok: Dots3NoteProcessor(image_processor=Qwen2VLImageProcessor(size=size, temporal_patch_size=1),
                                       video_processor=Qwen3VLVideoProcessor(size=size, patch_size=14, temporal_patch_size=1,
                                                                             do_sample_frames=False),
                                       feature_extractor=Dots3NoteFeatureExtractor(), tokenizer=tok,
                                       chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"eos_token": "<|endofassistant|>", "pad_token": "<|endoftext|>"},
        text=TEXT, vision=VISION,
        ids={"image_token_id": "<|imgpad|>", "video_token_id": "<|video_pad|>", "audio_token_id": "<|audio_comp_pad|>"},
        fields={"audio_config": AUDIO},
        overrides=overrides,
    )
