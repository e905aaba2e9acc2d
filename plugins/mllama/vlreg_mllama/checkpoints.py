"""A tiny Mllama checkpoint for tests: random weights, the real processor.

What a Llama 3.2 Vision checkpoint holds, small: a tokenizer with Llama 3's turn tokens
and ``<|image|>`` added after the text vocabulary (as on the hub, where it is id 128256,
one past ``vocab_size``, inside the embedding's 8 extra rows and outside the readout);
the real ``MllamaProcessor`` with ``MllamaImageProcessor`` cutting images into up to 4
tiles of 28 pixels; a chat template in Llama 3.2 Vision's format. The text model is 64
wide, 4 blocks of which 1 and 3 cross-attend (so block 0 runs before any image is read);
the tower is 32 wide, 14-pixel patches (2 x 2 a tile and a class token), 2 local blocks
tapped after block 0, and 1 global block.

transformers initialises the cross-attention blocks' gates (and the tower's tile gates) at
zero, as training starts, which would shut the image out of the text model; the builder
sets them to fixed non-zero values so the image reaches the logits, as in a trained model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, chat_template, tokenizer

BOS, EOS, PAD, IMAGE = "<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>", "<|image|>"
TURNS = ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>")

#: Llama 3.2 Vision's prompt format, every turn's images before its text.
CHAT_TEMPLATE = chat_template("<|start_header_id|>{role}<|end_header_id|>\n\n", "<|eot_id|>", IMAGE, bos=True)

TILE, PATCH = 28, 14
TEXT = {**TINY_TEXT, "num_hidden_layers": 4, "cross_attention_layers": [1, 3]}
#: ``num_attention_heads`` is the vision config's ``attention_heads``.
VISION = {
    **TINY_VISION,
    "num_global_layers": 1,
    "num_attention_heads": 4,
    "image_size": TILE,
    "patch_size": PATCH,
    "max_num_tiles": 4,
    "intermediate_layers_indices": [0],
    "vision_output_dim": 64,
}


def build(path: Path, **overrides: Any) -> Path:
    """Write the tiny Mllama checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    import torch
    from tokenizers import AddedToken
    from transformers import GenerationConfig, MllamaConfig, MllamaForConditionalGeneration
    from transformers import MllamaImageProcessor, MllamaProcessor

    path = Path(path)
    tok = tokenizer((BOS, EOS, PAD, *TURNS), vocab_size=400, bos_token=BOS, eos_token=EOS, pad_token=PAD)
    vocabulary = len(tok)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken(IMAGE, special=True)]})
    image_id = tok.convert_tokens_to_ids(IMAGE)
    assert image_id == vocabulary, "the image token follows the text vocabulary"
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in (("bos", BOS), ("eos", EOS), ("pad", PAD))}
    special = {"bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]}
    text = {**TEXT, "vocab_size": vocabulary, **special, **overrides.pop("text_config", {})}
    vision = {**VISION, **overrides.pop("vision_config", {})}
    config = MllamaConfig(text_config=text, vision_config=vision, image_token_index=image_id, **overrides)
    images = MllamaImageProcessor(size={"height": vision["image_size"], "width": vision["image_size"]},
                                  max_image_tiles=vision["max_num_tiles"])
    processor = MllamaProcessor(image_processor=images, tokenizer=tok, chat_template=CHAT_TEMPLATE)

    torch.manual_seed(0)
    model = MllamaForConditionalGeneration(config).eval()
    with torch.no_grad():
        for index, block in enumerate(model.model.language_model.layers):
            if index in config.text_config.cross_attention_layers:
                block.cross_attn_attn_gate.fill_(0.7)
                block.cross_attn_mlp_gate.fill_(-0.5)
        tower = model.model.vision_model
        for gated in (tower.gated_positional_embedding, tower.pre_tile_positional_embedding, tower.post_tile_positional_embedding):
            gated.gate.fill_(0.4)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    GenerationConfig(**special).save_pretrained(path)
    return path


BUILDERS = {"mllama": build}
