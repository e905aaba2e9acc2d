"""Granite-Docling checkpoints for tests: a tiny one, random weights, through the real processor
(``GraniteDoclingProcessor`` over ``GraniteDoclingImageProcessor``, as transformers maps the type).

Tiles of 64 pixels, at most 4 an image (a thumbnail after several), 16-pixel patches folded 2 x 2
into a token: 2 x 2 tokens a tile (4 x 4 on the fine path). The tower's blocks 0 and 1 are the
DeepStack taps, added after text blocks 0 and 1. The chat template is written in Granite's
turns (``<|start_of_role|>user<|end_of_role|>...<|end_of_text|>``) with each image as
``<image>``; no published template was at hand to check it against. The µP multipliers are set
away from 1 (embeddings times 2, each sublayer's output times 0.5, logits divided by 4) so a
rule that forgot one would show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

#: The tags the processor writes before each tile's tokens (up to 4 x 4 tiles).
TILE_TAGS = tuple(f"<row_{r + 1}_col_{c + 1}>" for r in range(4) for c in range(4))
#: ``<image>`` last: the id after a prompt's last token (``<|end_of_role|>``) is no image token's
TOKENS = ("<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<fake_token_around_image>", "<global-img>",
          *TILE_TAGS, "<image>")
CHAT_TEMPLATE = chat_template("<|start_of_role|>{role}<|end_of_role|>", "<|end_of_text|>\n", "<image>")

TILE, PATCH, FOLD = 64, 16, 2
#: The µP multipliers of the tiny text model.
MULTIPLIERS = {"embedding_multiplier": 2.0, "residual_multiplier": 0.5, "logits_scaling": 4.0,
               "attention_multiplier": 0.2}


def build_granite_docling(path: Path, **overrides: Any) -> Path:
    """Write a random-weight GraniteDoclingForConditionalGeneration checkpoint to ``path``: a
    Granite text model 64 wide, 2 blocks, 4 query heads over 2 key heads, the `MULTIPLIERS`; a
    SigLIP-shaped tower 32 wide, 2 blocks, both DeepStack taps; the connector into 64, both
    paths. ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the
    top-level config."""
    from transformers import GraniteDoclingConfig, GraniteDoclingImageProcessor, GraniteDoclingProcessor

    images = GraniteDoclingImageProcessor(size={"height": TILE, "width": TILE}, max_patches=4)
    seq_len = ((TILE // PATCH) // FOLD) ** 2
    return tiny(
        path, GraniteDoclingConfig,
        lambda tok: GraniteDoclingProcessor(image_processor=images, tokenizer=tok, image_seq_len=seq_len,
                                            chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"eos_token": "<|end_of_text|>", "pad_token": "<|end_of_text|>"},
        text={**TINY_TEXT, **MULTIPLIERS},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "image_size": TILE, "patch_size": PATCH, "scale_factor": FOLD,
                "out_hidden_size": TINY_TEXT["hidden_size"],
                "deepstack_visual_indexes": [0, 1]},
        ids={"image_token_id": "<image>"},
        fields={"pad_token_id": None},
        overrides=overrides,
    )


#: Granite 4 Vision's tiny tower: CLIP, 56-pixel crops of 14-pixel patches (4 x 4 a crop), 64 wide so the
#: config's Q-Former (``hidden_size // 64`` heads) has one head.
G4_SIDE, G4_PATCH = 56, 14
#: LLaVA-NeXT's crops, in pixels (height, width), multiples of the crop side.
G4_PINPOINTS = [[56, 112], [112, 56], [112, 112]]
#: Each 2 x 2 window of patches becomes one token (``"query side / window side"``).
G4_RATE = "1/2"
#: ``<image>`` before the role tokens: the id after a prompt's last token (``<|end_of_role|>``) is no image token's
G4_TOKENS = ("<|end_of_text|>", "<image>", "<|start_of_role|>", "<|end_of_role|>")


def build_granite4_vision(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Granite4VisionForConditionalGeneration checkpoint to ``path``:
    Granite text 64 wide, 2 blocks, the `MULTIPLIERS`; a CLIP tower 64 wide, 2 blocks, over
    `G4_PINPOINTS` crops; the layerwise projector reads tower block 0's stream
    (``hidden_states[1]``) into text block 0, the first spatial one the last block's stream
    into text block 1 (one spatial target: the other three spatial projectors exist and are
    not run). ``overrides`` as for `build_granite_docling`."""
    from transformers import Granite4VisionConfig, Granite4VisionProcessor, LlavaNextImageProcessor

    images = LlavaNextImageProcessor(size={"shortest_edge": G4_SIDE}, crop_size={"height": G4_SIDE, "width": G4_SIDE},
                                     image_grid_pinpoints=G4_PINPOINTS)
    qformer = {"model_type": "blip_2_qformer", "num_hidden_layers": 1, "intermediate_size": 128,
               "cross_attention_frequency": 1, "max_position_embeddings": 64, "use_qformer_text_input": False}
    return tiny(
        path, Granite4VisionConfig,
        lambda tok: Granite4VisionProcessor(image_processor=images, tokenizer=tok, patch_size=G4_PATCH,
                                            vision_feature_select_strategy="default", num_additional_image_tokens=1,
                                            downsample_rate=G4_RATE, chat_template=CHAT_TEMPLATE),
        tokens=G4_TOKENS, roles={"eos_token": "<|end_of_text|>", "pad_token": "<|end_of_text|>"},
        text={**TINY_TEXT, **MULTIPLIERS},
        vision={"model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128,
                "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": G4_SIDE, "patch_size": G4_PATCH},
        ids={"image_token_index": "<image>"},
        fields={"image_grid_pinpoints": G4_PINPOINTS, "vision_feature_select_strategy": "default",
                "downsample_rate": G4_RATE, "deepstack_layer_map": [[1, 0]], "spatial_vision_layer": -1,
                "spatial_target_layers": [1], "projector_dropout": 0.0, "qformer_config": qformer},
        overrides=overrides,
    )
