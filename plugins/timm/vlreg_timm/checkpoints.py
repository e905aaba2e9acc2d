"""Perception LM and FastVLM checkpoints for tests: tiny random-weight ones, written as a hub
checkpoint is. Each timm tower is built from its architecture's registry entry and the
``model_args`` the config gives it (timm's ``pretrained=False``: no weights, no hub).

* ``perception_lm``: the Perception Encoder (``vit_pe_core_large_patch14_336``) cut to the
  tiny tower's widths over 56 x 56 crops in 7-pixel patches (8 x 8 patches and a class token,
  learned positions and rotary ones, layer scale), a Llama text model, the real
  ``PerceptionLMProcessor`` (thumbnail and up to `MAX_TILES` tiles, 2 x 2 patches pooled a
  token, so 16 tokens a crop) with its image and video processors, a tokenizer with Llama 3's
  special tokens and ``<|image|>``, ``<|video|>``, and a template in Perception LM's format
  (the published one's default system turn, each turn's images and videos before its text);
* ``fast_vlm``: FastViT (``fastvit_mci3``'s hybrid shape cut to two stages, a RepMixer stage
  then an attention stage, reparameterized for inference as the published model is), a
  Qwen2 text model, ``LlavaProcessor`` over ``CLIPImageProcessor`` as the published one is
  (shortest edge then a centre crop, no normalization), its ``patch_size`` the tower's total
  stride (8 here: a 32-pixel crop is 4 x 4 tokens), and the published template's format
  (a default system turn, the images before the text, each text after a line break).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, save, tiny, tokenizer

# -- Perception LM ---------------------------------------------------------------

BOS, EOS, EOT = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
HEADER, END_HEADER, IMAGE, VIDEO = "<|start_header_id|>", "<|end_header_id|>", "<|image|>", "<|video|>"
PLM_SYSTEM = (
    "You are a helpful language and vision assistant. You are able to understand the visual content that the "
    "user provides, and assist the user with a variety of tasks using natural language."
)

#: Perception LM's format: a system turn (the default one where the conversation has none),
#: Llama 3 headers, each turn's images then videos then its texts, trimmed.
PLM_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] | trim %}"
    "{% set messages = messages[1:] %}{% else %}{% set system = '" + PLM_SYSTEM + "' %}{% endif %}"
    "<|start_header_id|>system<|end_header_id|>\n\n{{ system }}<|eot_id|>"
    "{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for part in message['content'] if part['type'] == 'image' %}<|image|>{% endfor %}"
    "{% for part in message['content'] if part['type'] == 'video' %}<|video|>{% endfor %}"
    "{% for part in message['content'] if part['type'] == 'text' %}{{ part['text'] | trim }}{% endfor %}"
    "{% endif %}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

#: The tiny tower's crop and patch in pixels, the projector's pooling, the tiles at most.
TILE, PATCH, POOL, MAX_TILES = 56, 7, 2, 4

PE_TOWER = {
    "architecture": "vit_pe_core_large_patch14_336",
    "do_pooling": False,
    "model_args": {
        "embed_dim": TINY_VISION["hidden_size"],
        "depth": TINY_VISION["num_hidden_layers"],
        "num_heads": TINY_VISION["num_attention_heads"],
        "mlp_ratio": TINY_VISION["intermediate_size"] / TINY_VISION["hidden_size"],
        "img_size": [TILE, TILE],
        "patch_size": PATCH,
        "ref_feat_shape": [TILE // PATCH, TILE // PATCH],
        "global_pool": "",
        "use_post_transformer_norm": False,
        "init_values": 0.1,
    },
}


def build_perception_lm(path: Path, **overrides: Any) -> Path:
    """Write a tiny Perception LM checkpoint. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, ``image_processor`` (its fields: ``max_num_tiles``,
    ``vision_input_type``), other fields of the top-level config."""
    from transformers import (GenerationConfig, PerceptionLMConfig, PerceptionLMImageProcessor, PerceptionLMProcessor,
                              PerceptionLMVideoProcessor)

    tok = tokenizer((BOS, EOS, IMAGE, VIDEO, HEADER, END_HEADER, EOT), bos_token=BOS, eos_token=EOT, pad_token=EOS,
                    image_token=IMAGE, video_token=VIDEO)
    images = {"tile_size": TILE, "max_num_tiles": MAX_TILES, "size": {"height": TILE, "width": TILE},
              "image_mean": [0.5] * 3, "image_std": [0.5] * 3, **overrides.pop("image_processor", {})}
    processor = PerceptionLMProcessor(
        video_processor=PerceptionLMVideoProcessor(size={"height": TILE, "width": TILE}),
        image_processor=PerceptionLMImageProcessor(**images),
        tokenizer=tok, patch_size=PATCH, pooling_ratio=POOL, chat_template=PLM_TEMPLATE,
    )
    ids = {"pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id,
           "eos_token_id": tok.convert_tokens_to_ids([EOS, EOT])}
    config = PerceptionLMConfig(
        text_config={"model_type": "llama", **TINY_TEXT, "vocab_size": len(tok), **ids,
                     **overrides.pop("text_config", {})},
        vision_config={**PE_TOWER, **overrides.pop("vision_config", {})},
        image_token_id=tok.convert_tokens_to_ids(IMAGE), video_token_id=tok.convert_tokens_to_ids(VIDEO),
        projector_pooling_ratio=POOL, vision_use_cls_token=True, **overrides,
    )
    return save(path, config, processor, GenerationConfig(**ids))


# -- FastVLM ---------------------------------------------------------------------

IM_START, IM_END, ENDOFTEXT, FAST_IMAGE = "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<image>"

#: FastVLM's format (Qwen2's turns): a default system turn, each turn's images, then each text
#: after a line break.
FAST_VLM_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] if part['type'] == 'image' %}<image>{% endfor %}"
    "{% for part in message['content'] if part['type'] == 'text' %}{{ '\n' + part['text'] }}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: The crop FastVLM's processor hands the tiny tower, and the tower's total stride.
CROP, STRIDE = 32, 8

FASTVIT_TOWER = {
    "architecture": "fastvit_mci3",
    "do_pooling": True,
    "global_pool": "avg",
    "hidden_size": 64,  # final_conv's width: twice the last stage's
    # at the config's 0.02, random convolutions shrink the grid stage by stage until the
    # features are ~1e-12, where no edit of them shows in the logits
    "initializer_range": 0.3,
    "model_args": {
        "inference_mode": True,
        "layer_scale_init_value": 0.5,  # timm's 1e-5 leaves the blocks adding nothing
        "layers": [1, 1],
        "embed_dims": [16, 32],
        "mlp_ratios": [2, 2],
        "se_downsamples": [False, False],
        "downsamples": [False, True],
        "pos_embs": [None, None],
        "token_mixers": ["repmixer", "attention"],
        "lkc_use_act": True,
        "stem_use_scale_branch": False,
    },
}


def build_fast_vlm(path: Path, **overrides: Any) -> Path:
    """Write a tiny FastVLM checkpoint. ``overrides``: ``text_config`` and ``vision_config``
    dicts, ``image_processor`` (fields of its ``CLIPImageProcessor``), other fields of the
    top-level config."""
    from transformers import CLIPImageProcessor, FastVlmConfig, LlavaProcessor

    images = {"size": {"shortest_edge": CROP}, "crop_size": {"height": CROP, "width": CROP},
              "image_mean": [0.0] * 3, "image_std": [1.0] * 3, **overrides.pop("image_processor", {})}
    return tiny(
        path, FastVlmConfig,
        lambda tok: LlavaProcessor(image_processor=CLIPImageProcessor(**images), tokenizer=tok, patch_size=STRIDE,
                                   vision_feature_select_strategy="full", chat_template=FAST_VLM_TEMPLATE),
        tokens=(ENDOFTEXT, IM_START, IM_END, FAST_IMAGE), roles={"eos_token": IM_END, "pad_token": ENDOFTEXT},
        text={"model_type": "qwen2", **TINY_TEXT}, vision=FASTVIT_TOWER, ids={"image_token_id": FAST_IMAGE},
        fields={"image_seq_length": (CROP // STRIDE) ** 2}, overrides=overrides,
    )


BUILDERS = {"perception_lm": build_perception_lm, "fast_vlm": build_fast_vlm}
