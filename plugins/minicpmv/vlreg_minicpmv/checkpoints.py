"""MiniCPM-V 4.6, 4.7 and MiniCPM-OCR checkpoints for tests: tiny random weights, the real
processors and a ChatML template.

One tiny shape for the three:

* the image processor cuts 4-pixel patches and resizes to ``scale_resolution`` 32 (the
  published: 14 and 448), at most 4 slices: a 112 x 84 image is a 32 x 32 source image and
  2 x 2 slices of 32 x 32, 8 x 8 patches each, 2 x 2 tokens each in ``"16x"`` mode (20 in
  all), 4 x 4 in ``"4x"`` (MiniCPM-OCR's, 80);
* the tower is 32 wide, 2 blocks, its ``vit_merger`` after block 0 (``insert_layer_id``), so
  block 0 runs on the patches and block 1 on the halved grid; its position table 8 x 8;
* the text model is Qwen3.5, 64 wide, a linear-attention block then a full one.

The video processor takes every frame it is given (``do_sample_frames=False``: sampling by fps
needs each video's metadata). The tokenizer names the processor's tokens as attributes (``image_token``, ``slice_start_token``,
...): MiniCPM-V's processors read them off it. A template writes an image as the image token,
which the processor expands to the image's source image and slices.
"""

from __future__ import annotations

from pathlib import Path

from vlreg.testing import TINY_TEXT, chat_template, family_builders, save, tokenizer

#: The processor's tokens, by the tokenizer attribute each is read from.
NAMED = {
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "image_start_token": "<image>",
    "image_end_token": "</image>",
    "slice_start_token": "<slice>",
    "slice_end_token": "</slice>",
    "image_id_start_token": "<image_id>",
    "image_id_end_token": "</image_id>",
}
START, END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = (START, END, PAD, *NAMED.values())
TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", NAMED["image_token"], NAMED["video_token"])

PATCH_SIZE, SCALE = 4, 32
IMAGES = {"patch_size": PATCH_SIZE, "scale_resolution": SCALE, "max_slice_nums": 4}
TOWER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
         "patch_size": PATCH_SIZE, "image_size": SCALE}
TEXT = {**TINY_TEXT, "head_dim": 16, "layer_types": ["linear_attention", "full_attention"],
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4}

#: model type -> (config, processor, image processor, video processor) class names
FAMILIES = {
    "minicpmv4_6": ("MiniCPMV4_6Config", "MiniCPMV4_6Processor", "MiniCPMV4_6ImageProcessor", "MiniCPMV4_6VideoProcessor"),
    "minicpmv4_7": ("MiniCPMV4_7Config", "MiniCPMV4_7Processor", "MiniCPMV4_6ImageProcessor", "MiniCPMV4_6VideoProcessor"),
    "minicpm_ocr": ("MiniCPMOcrConfig", "MiniCPMOcrProcessor", "MiniCPMOcrImageProcessor", "MiniCPMOcrVideoProcessor"),
}


def _build(family: str, path: Path, text: dict, vision: dict, overrides: dict) -> Path:
    """A tiny checkpoint of ``family`` (the module's); ``overrides`` may hold
    ``image_processor``, fields of its image processor (``max_slice_nums``, ``slice_mode``)."""
    import transformers
    from transformers import GenerationConfig

    config_name, processor_name, image_name, video_name = FAMILIES[family]
    tok = tokenizer(SPECIAL_TOKENS, eos_token=END, pad_token=PAD, **NAMED)
    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    images = {**IMAGES, **overrides.pop("image_processor", {})}
    processor = getattr(transformers, processor_name)(
        image_processor=getattr(transformers, image_name)(**images),
        video_processor=getattr(transformers, video_name)(**images, do_sample_frames=False),
        tokenizer=tok, chat_template=TEMPLATE)
    text = {"model_type": "qwen3_5_text", "vocab_size": len(tok), **TEXT, "bos_token_id": None,
            "eos_token_id": ids[END], "pad_token_id": ids[PAD], **text}
    markers = {}
    if family == "minicpmv4_7":  # Canvas M-RoPE places the image's and slices' markers
        markers = {"image_start_id": ids[NAMED["image_start_token"]], "image_end_id": ids[NAMED["image_end_token"]],
                   "slice_start_id": ids[NAMED["slice_start_token"]], "slice_end_id": ids[NAMED["slice_end_token"]],
                   "newline_id": tok.convert_tokens_to_ids(tok.tokenize("\n"))[0]}
    config = getattr(transformers, config_name)(
        text_config=text, vision_config={**TOWER, **vision}, insert_layer_id=0,
        image_token_id=ids[NAMED["image_token"]], video_token_id=ids[NAMED["video_token"]], **markers, **overrides)
    return save(path, config, processor, GenerationConfig(eos_token_id=[ids[END], ids[PAD]], pad_token_id=ids[PAD]))


BUILDERS = family_builders(_build, FAMILIES)
