"""InternVL checkpoints for tests: tiny random-weight ones, written as a hub checkpoint is.

Each builder writes the config, random weights, a tokenizer with InternVL's special
tokens (Qwen's turn tokens, ``<img>``, ``</img>``, ``<IMG_CONTEXT>``, ``<video>``, named
on the tokenizer as the processor looks them up), the real ``InternVLProcessor`` with the
GOT-OCR2 image processor InternVL uses (dynamic tiles and a thumbnail) and InternVL's
chat template:

* ``internvl``: InternVL3's shape: the InternViT (a class token, layer scale) on a
  Qwen2 text model, whose part vlreg-llava serves;
* ``internvl3_5``: InternVL3.5's dense shape: the same tower on a Qwen3 text model, whose
  part another plugin serves (vlreg-text claims ``qwen3``);
* ``internvl3_5_moe``: InternVL3.5-30B-A3B's shape: the same tower on a Qwen3-MoE text
  model (each token routed to 2 of 4 experts), served here.

The tiny tower sees 56 x 56 tiles in 7-pixel patches (8 x 8 patches after its class
token); the pixel shuffle folds each 2 x 2 block of patches into one token, so a tile
is 4 x 4 = 16 tokens. The processor cuts an image into 1 to `MAX_TILES` tiles on the
grid whose aspect is closest to the image's and, when there is more than one, adds the
whole image squeezed into one tile (the thumbnail) after them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, chat_template, tiny

IMAGE_START, IMAGE_END, IMAGE, VIDEO = "<img>", "</img>", "<IMG_CONTEXT>", "<video>"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", IMAGE_START, IMAGE_END, IMAGE, VIDEO)
#: What InternVLProcessor reads off the tokenizer (InternVL's tokenizer_config names them).
ROLES = {
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
    "start_image_token": IMAGE_START,
    "end_image_token": IMAGE_END,
    "context_image_token": IMAGE,
    "video_token": VIDEO,
}

#: InternVL's (the -hf checkpoints') format: Qwen's turns, each image part as
#: ``<IMG_CONTEXT>`` on a line of its own where it stands among the texts.
CHAT_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", f"{IMAGE}\n", f"{VIDEO}\n")

#: The tiny tower's tile and patch, in pixels, and the tiles an image is cut into at most.
TILE, PATCH, MAX_TILES = 56, 7, 4
#: Tokens per tile: (56 / 7 / 2) ** 2, the 8 x 8 patches folded 2 x 2.
TOKENS_PER_TILE = (TILE // PATCH // 2) ** 2

TOWER = {
    **TINY_VISION,
    "num_attention_heads": 4,
    "image_size": TILE,
    "patch_size": PATCH,
    "attention_bias": True,
    "use_mean_pooling": True,
    # not 1: a block's sublayer outputs are scaled before the stream adds them
    "layer_scale_init_value": 0.5,
}
#: text model_type -> what its config adds to `TINY_TEXT`
TEXTS = {
    "qwen2": {},
    "qwen3": {"head_dim": 16},
    "qwen3_moe": {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "norm_topk_prob": True},  # as Qwen3-30B-A3B's router: top-k weights renormalized
}


def _builder(text_model: str):
    def build(path: Path, **overrides: Any) -> Path:
        return build_internvl(path, text_model=text_model, **overrides)

    build.__doc__ = f"Write a tiny InternVL checkpoint on a {text_model} text model (see `build_internvl`)."
    return build


def build_internvl(path: Path, *, text_model: str = "qwen2", **overrides: Any) -> Path:
    """Write a tiny InternVL checkpoint on ``text_model`` (``qwen2``, ``qwen3``, ``qwen3_moe``).
    ``overrides``: ``text_config`` and ``vision_config`` dicts, ``image_processor`` (fields
    of the image processor: ``max_patches``, ``size``), other fields of the top-level
    config."""
    from transformers import GotOcr2ImageProcessor, InternVLConfig, InternVLProcessor, InternVLVideoProcessor
    from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

    normalise = {"image_mean": IMAGENET_DEFAULT_MEAN, "image_std": IMAGENET_DEFAULT_STD}
    images = {"size": {"height": TILE, "width": TILE}, "min_patches": 1, "max_patches": MAX_TILES, **normalise}
    images.update(overrides.pop("image_processor", {}))
    return tiny(
        path, InternVLConfig,
        lambda tok: InternVLProcessor(
            image_processor=GotOcr2ImageProcessor(**images), tokenizer=tok,
            video_processor=InternVLVideoProcessor(size={"height": TILE, "width": TILE}, **normalise),
            image_seq_length=TOKENS_PER_TILE, chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles=ROLES, text={"model_type": text_model, **TINY_TEXT, **TEXTS[text_model],
                                                  "tie_word_embeddings": True},
        vision=TOWER, ids={"image_token_id": IMAGE},
        fields={"image_seq_length": TOKENS_PER_TILE, "downsample_ratio": 0.5, "vision_feature_layer": -1,
                "vision_feature_select_strategy": "default", "tie_word_embeddings": True},
        overrides=overrides,
    )


#: Qianfan-OCR's format: Qwen's turns, each image part as ``<image>``, which its processor
#: replaces by the image's ``<img><IMG_CONTEXT>...</img>``.
QIANFAN_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<image>\n")


def build_qianfan_ocr(path: Path, **overrides: Any) -> Path:
    """Write a tiny Qianfan-OCR checkpoint: InternVL3.5's shape (the InternViT renamed, on a
    Qwen3 text model) through ``QianfanOCRProcessor``, which takes no video. ``overrides`` as
    for `build_internvl`."""
    from transformers import GotOcr2ImageProcessor, QianfanOCRConfig, QianfanOCRProcessor
    from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

    images = {"size": {"height": TILE, "width": TILE}, "min_patches": 1, "max_patches": MAX_TILES,
              "image_mean": IMAGENET_DEFAULT_MEAN, "image_std": IMAGENET_DEFAULT_STD}
    images.update(overrides.pop("image_processor", {}))
    return tiny(
        path, QianfanOCRConfig,
        lambda tok: QianfanOCRProcessor(image_processor=GotOcr2ImageProcessor(**images), tokenizer=tok,
                                        image_seq_length=TOKENS_PER_TILE, chat_template=QIANFAN_TEMPLATE),
        tokens=(*SPECIAL_TOKENS, "<image>"), roles=ROLES,
        text={"model_type": "qwen3", **TINY_TEXT, **TEXTS["qwen3"], "tie_word_embeddings": True},
        vision={**TOWER, "drop_path_rate": 0.0}, ids={"image_token_id": IMAGE},
        fields={"image_seq_length": TOKENS_PER_TILE, "downsample_ratio": 0.5, "vision_feature_layer": -1,
                "vision_feature_select_strategy": "default", "tie_word_embeddings": True},
        overrides=overrides,
    )


BUILDERS = {"internvl": _builder("qwen2"), "internvl3_5": _builder("qwen3"), "internvl3_5_moe": _builder("qwen3_moe"),
            "qianfan_ocr": build_qianfan_ocr}
