"""What LightOnOCR promises beyond the conformance suite: the published checkpoint's chat
format, where its image tokens lie (no row breaks; an odd number of patches leaves an
edge no token covers), a lit pixel in its token, the writable tower, and the published
widths on meta (LightOnOCR-1B: 28 Qwen3 blocks 1024 wide, 16 heads of 128 over 8
key/value heads; a 24-block Pixtral tower 1024 wide, 14-pixel patches merged 2 x 2)."""

from __future__ import annotations

import torch
from transformers import AutoProcessor, LightOnOcrConfig

from vlreg import StandardizedTransformer
from vlreg.testing import build, chat
from vlreg.testing.conformance import image, lit, taken_sizes

CHECKPOINT = "lighton_ocr"

#: (width, height): sides that make whole tokens, odd patch counts, strips, past the longest edge.
SIZES = ((64, 48), (56, 40), (40, 64), (30, 30), (120, 16), (200, 150))


def test_the_chat_format_is_the_published_checkpoints(model):
    """As LightOnOCR-1B-1025's own template renders (outputs taken from it)."""
    assert chat(model, text="Read it.") == (
        "<|im_start|>system<|im_end|>\n<|im_start|>user\n<|image_pad|>Read it.\n<|im_end|>\n<|im_start|>assistant\n")
    assert chat(model, text=None) == "<|im_start|>system<|im_end|>\n<|im_start|>user\n<|image_pad|><|im_end|>\n<|im_start|>assistant\n"
    conversation = [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
        {"role": "user", "content": "c"},
    ]
    assert model.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False) == (
        "<|im_start|>system\nBe exact.<|im_end|>\n<|im_start|>user\na\n<|image_pad|><|im_end|>\n"
        "<|im_start|>assistant\nb\n<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_grids_count_the_image_tokens_with_no_row_breaks(model):
    prompt = chat(model, text=None)
    for size in taken_sizes(model, prompt, SIZES):
        encoding = model.processor(text=prompt, images=[image(*size)], return_tensors="pt")
        height, width = encoding["image_sizes"][0].tolist()
        (geometry,) = model.vision.geometry(prompt, [image(*size)])
        (grid,) = geometry.grids
        ids = encoding["input_ids"][0]
        assert (grid.rows, grid.columns) == (height // 16, width // 16), size
        assert grid.tokens == int((ids == model._module.config.image_token_id).sum()), size
        assert not (ids == model.processor.image_break_token_id).any()


def test_a_lit_pixel_lands_in_the_token_whose_box_holds_it(model):
    """A pixel lit at a token's box centre is brightest in that token's 2 x 2 patches of
    the pixels the processor hands the tower."""
    prompt = chat(model, text=None)
    for size in taken_sizes(model, prompt, SIZES):
        (geometry,) = model.vision.geometry(prompt, [image(*size)])
        (grid,) = geometry.grids
        for token in range(grid.tokens):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            probe = lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)
            encoding = model.processor(text=prompt, images=[probe], return_tensors="pt")
            height, width = encoding["image_sizes"][0].tolist()
            pixels = encoding["pixel_values"][0].sum(0)[: grid.rows * 16, : grid.columns * 16]
            bright = pixels.reshape(grid.rows, 16, grid.columns, 16).amax((1, 3)).flatten().argmax()
            assert int(bright) == token, (size, token)


def test_every_tower_value_takes_a_write(model):
    """The projector reads the tower's last_hidden_state, not a block's stream out of the
    hidden states (Mistral 3's): nothing in the tower is read-only, and an edit of the
    tower's output reaches the features."""
    assert [row for row in model.read_only() if row.startswith("vision.")] == ["vision.image_token_mask"]  # off the ids
    prompt, pictures = chat(model, text=None), [image(64, 48)]
    with model.trace(prompt, images=pictures):
        plain = model.vision.image_features.save()
    with model.trace(prompt, images=pictures):
        model.vision.tower_output[:] = 0
        zeroed = model.vision.image_features.save()
    assert not torch.allclose(plain, zeroed)


def test_the_published_widths_on_meta(tmp_path):
    LightOnOcrConfig().save_pretrained(tmp_path)
    AutoProcessor.from_pretrained(build("lighton_ocr")).save_pretrained(tmp_path)  # nothing is processed on meta
    model = StandardizedTransformer(str(tmp_path), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "mistral3"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (28, 1024, 16, 8, 128)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.patch_size) == (24, 1024, 16, 64, 14)
    assert tuple(model.projector.patch_merger.merging_layer.weight.shape) == (1024, 1024 * 2**2)
    rows = model.support()
    assert all(why is None for why in rows.values()), {row: why for row, why in rows.items() if why}
