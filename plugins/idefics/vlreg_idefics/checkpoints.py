"""Idefics2, Idefics3 and SmolVLM checkpoints for tests: tiny, random weights, real processors.

Each builder writes what a hub checkpoint holds: the config, random weights, a tokenizer
with the family's special tokens (the image tokens, the turn tokens; on Idefics3 and SmolVLM
``<global-img>`` and the 36 ``<row_r_col_c>`` tile tags), the real processor class with its
image processor (and SmolVLM's video processor) and a chat template in the family's prompt
format. The images are kept small so a trace is cheap:

* ``idefics2``: images resized to a longest edge of 64 (and at least 16 a side), split into
  4 crops and the whole image (``do_image_splitting``, as Idefics2-8B's processor does),
  8-pixel patches, a perceiver resampling each frame to 4 latents (20 image tokens an
  image). A Mistral text model, as Idefics2-8B's.

* ``idefics3``: 32-pixel frames of 8-pixel patches shuffled by 2, so a frame is 2 x 2
  tokens; images resized to a longest edge of 64, so at most 2 x 2 tiles and the global
  image (20 image tokens). A Llama text model, as Idefics3-8B's.
* ``smolvlm``: 64-pixel frames of 8-pixel patches shuffled by 4 (as SmolVLM's 512-pixel
  frames of 16-pixel patches are), again 2 x 2 tokens a frame; longest edge 128. A Llama
  text model (SmolLM2's), tied embeddings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, save, tokenizer

IMAGE, FAKE, GLOBAL, END = "<image>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"
#: The tags the processor writes before each tile's tokens (up to 6 x 6 tiles).
TILE_TAGS = tuple(f"<row_{r + 1}_col_{c + 1}>" for r in range(6) for c in range(6))

#: Idefics3's prompt format: "User:<image>What is in this image?<end_of_utterance>\nAssistant:"
#: (a colon alone before content that opens with an image, else ": "), after a BOS.
_TURNS = (
    "{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'][0]['type'] == 'image' %}{{ ':' }}{% else %}{{ ': ' }}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{ line['text'] }}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
IDEFICS3_TEMPLATE = "<|begin_of_text|>" + _TURNS
#: SmolVLM's: the same turns after "<|im_start|>".
SMOLVLM_TEMPLATE = "<|im_start|>" + _TURNS

TOWER = {**TINY_VISION, "num_attention_heads": 4, "patch_size": 8}

#: family -> tile side, longest edge, pixel-shuffle factor, text special tokens, their roles, tied embeddings
FAMILIES = {
    "idefics3": (32, 64, 2, ("<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"),
                 {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                  "pad_token": "<|reserved_special_token_0|>"}, False),
    "smolvlm": (64, 128, 4, ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
                {"unk_token": "<|endoftext|>", "bos_token": "<|im_start|>", "eos_token": END,
                 "pad_token": "<|im_end|>"}, True),
}


def builder(family: str):
    """The checkpoint builder of ``family`` (`vlreg_checkpoints`)."""

    def build(path: Path, **overrides: Any) -> Path:
        return _tiny(family, Path(path), **overrides)

    build.__doc__ = (
        f"Write a tiny random-weight {family} checkpoint to ``path`` (see the module). ``overrides``: "
        f"``text_config`` and ``vision_config`` dicts, other fields of the top-level config."
    )
    return build


def _tiny(family: str, path: Path, **overrides: Any) -> Path:
    import transformers
    from transformers import GenerationConfig

    tile, longest, scale, text_tokens, roles, tied = FAMILIES[family]
    tokens = (*text_tokens, FAKE, IMAGE, END, GLOBAL, *TILE_TAGS)
    tok = tokenizer(tokens, vocab_size=400, **roles)
    ids = dict(zip(tokens, tok.convert_tokens_to_ids(list(tokens))))
    prefix = {"idefics3": "Idefics3", "smolvlm": "SmolVLM"}[family]
    images = getattr(transformers, f"{prefix}ImageProcessor")(
        size={"longest_edge": longest}, max_image_size={"longest_edge": tile}
    )
    seq_len = ((tile // TOWER["patch_size"]) // scale) ** 2
    if family == "smolvlm":
        from transformers import SmolVLMVideoProcessor

        videos = SmolVLMVideoProcessor(size={"longest_edge": longest}, max_image_size={"longest_edge": tile})
        processor = transformers.SmolVLMProcessor(
            image_processor=images, tokenizer=tok, video_processor=videos, image_seq_len=seq_len,
            chat_template=SMOLVLM_TEMPLATE,
        )
    else:
        processor = transformers.Idefics3Processor(
            image_processor=images, tokenizer=tok, image_seq_len=seq_len, chat_template=IDEFICS3_TEMPLATE
        )
    special = {"bos_token_id": ids[roles["bos_token"]], "eos_token_id": ids[roles["eos_token"]],
               "pad_token_id": ids[roles["pad_token"]]}
    text = {"model_type": "llama", "vocab_size": len(tok), **TINY_TEXT, "tie_word_embeddings": tied, **special,
            **overrides.pop("text_config", {})}
    vision = {**TOWER, "image_size": tile, **overrides.pop("vision_config", {})}
    config = getattr(transformers, f"{prefix}Config")(
        text_config=text, vision_config=vision, image_token_id=ids[IMAGE], scale_factor=scale,
        tie_word_embeddings=tied, **overrides,
    )
    return save(path, config, processor, GenerationConfig(**special))


#: Idefics2's: the same turns after Mistral's BOS (which Idefics2-8B's tokenizer adds itself).
IDEFICS2_TEMPLATE = "<s>" + _TURNS
#: Idefics2's perceiver: latents a frame, blocks, heads of a width over key/value heads.
PERCEIVER = {"resampler_n_latents": 4, "resampler_depth": 2, "resampler_n_heads": 4, "resampler_head_dim": 16,
             "num_key_value_heads": 2}


def idefics2(path: Path, **overrides: Any) -> Path:
    """Write a tiny random-weight idefics2 checkpoint to ``path`` (see the module).
    ``overrides``: ``text_config``, ``vision_config`` and ``perceiver_config`` dicts, other
    fields of the top-level config."""
    from transformers import GenerationConfig, Idefics2Config, Idefics2ImageProcessor, Idefics2Processor

    text_tokens = ("<unk>", "<s>", "</s>")
    tokens = (*text_tokens, FAKE, IMAGE, END)
    tok = tokenizer(tokens, vocab_size=320, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<unk>")
    ids = dict(zip(tokens, tok.convert_tokens_to_ids(list(tokens))))
    perceiver = {**PERCEIVER, **overrides.pop("perceiver_config", {})}
    images = Idefics2ImageProcessor(size={"shortest_edge": 16, "longest_edge": 64}, do_image_splitting=True)
    processor = Idefics2Processor(image_processor=images, tokenizer=tok, image_seq_len=perceiver["resampler_n_latents"],
                                  chat_template=IDEFICS2_TEMPLATE)
    special = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<unk>"]}
    text = {"model_type": "mistral", "vocab_size": len(tok), **TINY_TEXT, "rms_norm_eps": 1e-5, **special,
            **overrides.pop("text_config", {})}
    vision = {**TOWER, "image_size": 64, **overrides.pop("vision_config", {})}
    perceiver.update(hidden_size=text["hidden_size"], rms_norm_eps=text["rms_norm_eps"])  # the perceiver runs at the text width
    config = Idefics2Config(text_config=text, vision_config=vision, perceiver_config=perceiver,
                            image_token_id=ids[IMAGE], **overrides)
    return save(path, config, processor, GenerationConfig(**special))


BUILDERS = {"idefics2": idefics2, **{family: builder(family) for family in FAMILIES}}


#: IDEFICS (1)'s prompt format, "User: What is in this image?<end_of_utterance>\nAssistant:".
#: Its processor writes each image's placeholders itself, after the BOS and before the text,
#: so an image entry writes nothing here; `IdeficsProcessor` drops a ``chat_template`` it is
#: given, so the template rides on the tokenizer.
IDEFICS_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] | capitalize }}: "
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{ line['text'] }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
#: IDEFICS's tower: a CLIP-shaped ViT, 28-pixel images of 14-pixel patches (a class token and 2 x 2 patches).
IDEFICS_VISION = {"embed_dim": 32, "image_size": 28, "patch_size": 14, "intermediate_size": 64,
                  "num_hidden_layers": 2, "num_attention_heads": 2}
#: Its perceiver: 4 latents an image, one block.
IDEFICS_PERCEIVER = {"resampler_n_latents": 4, "resampler_depth": 1, "resampler_n_heads": 2, "resampler_head_dim": 16}


def idefics(path: Path, **overrides: Any) -> Path:
    """Write a tiny random-weight idefics checkpoint to ``path``: a 64-wide text model of 2
    blocks, each after a gated cross-attention block (``cross_layer_interval`` 1), the tower
    and perceiver above. transformers starts the gates (``alpha_cross_attn``, ``alpha_dense``)
    at zero, which shuts the image out; they are set to fixed non-zero values, as trained.
    ``overrides``: ``vision_config`` and ``perceiver_config`` dicts, other config fields."""
    import torch
    from transformers import GenerationConfig, IdeficsConfig, IdeficsForVisionText2Text
    from transformers import IdeficsImageProcessor, IdeficsProcessor

    tokens = ("<unk>", "<s>", "</s>", FAKE, IMAGE, END)
    tok = tokenizer(tokens, vocab_size=320, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<unk>")
    tok.chat_template = IDEFICS_TEMPLATE
    ids = dict(zip(tokens, tok.convert_tokens_to_ids(list(tokens))))
    special = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<unk>"]}
    vision = {**IDEFICS_VISION, **overrides.pop("vision_config", {})}
    perceiver = {**IDEFICS_PERCEIVER, **overrides.pop("perceiver_config", {})}
    text = {key: TINY_TEXT[key] for key in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                            "num_attention_heads", "max_position_embeddings")}
    config = IdeficsConfig(vocab_size=len(tok), **text, cross_layer_interval=1, use_resampler=True,
                           vision_config=vision, perceiver_config=perceiver, **special, **overrides)
    processor = IdeficsProcessor(image_processor=IdeficsImageProcessor(image_size=vision["image_size"]), tokenizer=tok)
    torch.manual_seed(0)
    model = IdeficsForVisionText2Text(config).eval()
    with torch.no_grad():
        for block in model.model.gated_cross_attn_layers:
            block.alpha_cross_attn.fill_(0.7)
            block.alpha_dense.fill_(-0.5)
    path = Path(path)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    GenerationConfig(**special).save_pretrained(path)
    return path


BUILDERS["idefics"] = idefics
