"""NemotronH Omni checkpoints for tests: tiny random-weight ones, written as a hub
checkpoint is.

``nemotron_h_omni`` writes the config, random weights, a tokenizer with the family's
special tokens (ChatML's turns, ``<image>``, ``<img>``, ``</img>``, ``<video>`` and the
audio placeholders the processor looks up), the real ``NemotronH_Omni_Reasoning_V3Processor``
with its image and video processors, and a ChatML chat template that puts ``<image>``
where an image stands (the processor expands it to ``<img>``, one ``<image>`` per token,
``</img>``). No audio: the config has no ``audio_config``, so the model builds no audio
tower (the processor still takes Parakeet's feature extractor, as the class requires).

The text model has one block of each kind NemotronH mixes, in the default order:
Mamba-2 (``linear_attention``), experts (``moe``), attention (``full_attention``), MLP
(``mlp``). Its Mamba chunk is 8 tokens, so a prompt spans several chunks and the scan
carries its state across them. The tiny RADIO tower sees 8-pixel patches after 2 summary
and 2 register tokens and scales its blocks' sublayer outputs by 0.5; the processor
resizes an image to `MIN_PATCHES` to `MAX_PATCHES` patches with both sides even, and the
pixel shuffle folds each 2 x 2 block of patches into one token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny, tokenizer

IMAGE, IMAGE_START, IMAGE_END, VIDEO = "<image>", "<img>", "</img>", "<video>"
AUDIO, AUDIO_START, AUDIO_END = "<so_embedding>", "<so_start>", "<so_end>"
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", IMAGE, IMAGE_START, IMAGE_END, VIDEO,
                  AUDIO, AUDIO_START, AUDIO_END)
ROLES = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "<|im_end|>", "pad_token": "</s>"}

#: ChatML turns, each image as ``<image>`` on a line of its own where it stands.
CHAT_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", f"{IMAGE}\n", f"{VIDEO}\n")

#: The tiny tower's patch in pixels, and the patches an image is resized to at least and at most.
PATCH, MIN_PATCHES, MAX_PATCHES = 8, 16, 64

#: One block of each kind NemotronH mixes, in the default order.
BLOCKS = ["linear_attention", "moe", "full_attention", "mlp"]
TEXT = {
    **TINY_TEXT,
    "num_hidden_layers": len(BLOCKS),  # NemotronH counts its blocks in layers_block_type
    "layers_block_type": BLOCKS,
    "head_dim": 16,
    "mamba_num_heads": 4,
    "mamba_head_dim": 16,
    "ssm_state_size": 8,
    "n_groups": 2,
    "chunk_size": 8,
    # steps of 0.1 to 1 rather than 0.001 to 0.1: the state a random mixer writes then
    # moves the logits even in bfloat16
    "time_step_min": 0.1,
    "time_step_max": 1.0,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32,
}
TOWER = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "mlp_ratio": 2.0,
    "patch_size": PATCH,
    "image_size": 64,
    "max_img_size": 128,
    "num_cls_tokens": 2,
    "num_registers": 2,
    # not 1 (C-RADIO's): a block's sublayer outputs are scaled before the stream adds them
    "layerscale_value": 0.5,
}


def build_nemotron_h_omni(path: Path, **overrides: Any) -> Path:
    """Write a tiny NemotronH Omni checkpoint. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, ``image_processor`` (fields of the image processor), other
    fields of the top-level config."""
    from transformers import ParakeetFeatureExtractor
    from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
    from transformers.models.nemotron_h_omni import (
        NemotronH_Omni_Reasoning_V3_Config,
        NemotronH_Omni_Reasoning_V3ImageProcessor,
        NemotronH_Omni_Reasoning_V3Processor,
        NemotronH_Omni_Reasoning_V3VideoProcessor,
    )

    images = {"patch_size": PATCH, "min_num_patches": MIN_PATCHES, "max_num_patches": MAX_PATCHES,
              **overrides.pop("image_processor", {})}
    videos = NemotronH_Omni_Reasoning_V3VideoProcessor(patch_size=PATCH, video_target_num_patches=MIN_PATCHES,
                                                       norm_mean=list(OPENAI_CLIP_MEAN), norm_std=list(OPENAI_CLIP_STD))
    tower = {**TOWER, "video_temporal_patch_size": 2}
    return tiny(
        path, NemotronH_Omni_Reasoning_V3_Config,
        lambda tok: NemotronH_Omni_Reasoning_V3Processor(
            image_processor=NemotronH_Omni_Reasoning_V3ImageProcessor(**images), video_processor=videos, tokenizer=tok,
            feature_extractor=ParakeetFeatureExtractor(), chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles=ROLES, text=TEXT, vision=tower,
        ids={"image_token_id": IMAGE, "video_token_id": IMAGE},
        fields={"downsample_ratio": 0.5, "projector_hidden_size": 64,
                "vision_hidden_size": {**tower, **overrides.get("vision_config", {})}["hidden_size"]},
        overrides=overrides,
    )


def build_nemotron_h(path: Path, **overrides: Any) -> Path:
    """Write a tiny NemotronH language model alone (``NemotronHForCausalLM``): the Omni's
    text config and tokenizer; ``overrides`` are fields of the config."""
    import torch
    from transformers import AutoModelForCausalLM, NemotronHConfig

    tok = tokenizer(SPECIAL_TOKENS, **ROLES)
    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    special = {"bos_token_id": ids["<s>"], "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["</s>"]}
    config = NemotronHConfig(vocab_size=len(tok), **{**TEXT, **special, **overrides})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return Path(path)


BUILDERS = {"nemotron_h_omni": build_nemotron_h_omni, "nemotron_h_base": build_nemotron_h}
