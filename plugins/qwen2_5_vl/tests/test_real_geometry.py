"""The real Qwen2.5-VL-7B-Instruct geometry (config, tokenizer, processor, template from
``../shared``; random weights, 2 text blocks and 8 tower blocks, bfloat16).

The checkpoint is built once for the module and removed after it: its untied
152064 x 3584 embeddings make it about 3.5 GB on disk.
"""

from __future__ import annotations

import json

import pytest
import torch

from vlreg.testing import chat, shared_checkpoint
from vlreg.testing.conformance import image
from vlreg_qwen2_vl.checkpoints import CHAT_TEMPLATE

SOURCE = shared_checkpoint("Qwen2.5-VL-7B-Instruct")
pytestmark = [pytest.mark.heavy, pytest.mark.skipif(
    SOURCE is None,
    reason="../shared/checkpoints/Qwen2.5-VL-7B-Instruct is absent (a fresh clone has no ../shared): "
    "the real-geometry tier needs the real config, tokenizer and processor",
)]
WINDOWED, FULL = 0, 7
CHECKPOINT = "qwen2_5_vl"
BUILD_OPTIONS = {"source": str(SOURCE)}  # built once for the module, removed after it


@pytest.fixture(scope="module")
def prompt(model):
    return chat(model)


@pytest.fixture(scope="module")
def run(model, prompt):
    """One trace of a 448 x 448 image, reading what the tests need in forward order."""
    vision = model.vision
    windowed, full = vision.layers[WINDOWED].self_attn, vision.layers[FULL].self_attn
    picture = image(448, 448)
    saved = {"grid": model.processor(text=prompt, images=[picture], return_tensors="pt")["image_grid_thw"]}
    with model.trace(prompt, images=[picture]):
        saved["mask"] = vision.image_token_mask.save()
        saved["embedded"] = vision.patch_embeddings.save()
        saved["entering"] = vision.layers[0].input.save()
        saved["windowed"] = windowed.inputs[1]["cu_seqlens"].save()
        saved["queries"] = windowed.attention_queries.save()
        saved["keys"] = windowed.attention_keys.save()
        saved["values"] = windowed.attention_values.save()
        saved["heads"] = windowed.attention_head_outputs.save()
        saved["full"] = full.inputs[1]["cu_seqlens"].save()
        saved["projected"] = model.projector.output.save()
        saved["features"] = vision.image_features.save()
        saved["first"] = model.layers[0].input.save()
    return saved


def test_sizes(model):
    vision = model.vision
    assert (model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (3584, 28, 4, 128)
    assert model.vocab_size == 152064 and model.num_layers == 2
    assert (vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (1280, 16, 3420)
    assert (vision.patch_size, vision.spatial_merge_size, vision.window_size) == (14, 2, 112)
    assert vision.num_layers == 8 and vision.fullatt_block_indexes == (FULL,)
    assert model.embed_tokens.weight.dtype == torch.bfloat16


def test_a_448_pixel_image_is_256_tokens(model, run):
    assert run["grid"].tolist() == [[1, 32, 32]]
    assert int(run["mask"].sum()) == 256
    assert tuple(run["features"].shape) == (256, model.hidden_size)
    assert torch.equal(run["first"][run["mask"]], run["features"])


def test_window_order(model, run):
    vision, grid = model.vision, run["grid"]
    assert not torch.equal(run["projected"], run["features"])
    assert torch.equal(vision.to_scatter_order(run["projected"], grid), run["features"])
    assert not torch.equal(run["entering"], run["embedded"][0])
    assert torch.equal(vision.to_window_order(run["embedded"][0], grid), run["entering"])


def test_calls_per_window_and_per_image(model, run):
    windowed, full = run["windowed"], run["full"]
    assert torch.equal(windowed, model.vision.cu_seqlens(WINDOWED, run["grid"]))
    assert windowed.diff().tolist() == [64] * 16  # 112-pixel windows: 8 x 8 patches
    assert full.tolist() == [0, 1024]
    patterns = model.vision.layers[WINDOWED].self_attn.patterns(run["queries"], run["keys"], windowed)
    for pattern, start in zip(patterns, windowed[:-1].tolist()):
        mixed = (pattern @ run["values"][0, :, start : start + 64]).transpose(0, 1)
        assert torch.equal(mixed, run["heads"][0, start : start + 64])


CONVERSATIONS = {
    "image": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}],
    "system": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    "turns": [
        {"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "video"},
                                     {"type": "text", "text": "Compare."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "They differ."}]},
        {"role": "user", "content": "Why?"},
    ],
}


@pytest.mark.parametrize("generation", (False, True))
@pytest.mark.parametrize("name", CONVERSATIONS)
def test_the_tiny_template_renders_as_the_real_one(name, generation):
    """The tiny checkpoints reuse Qwen2-VL's template; the real Qwen2.5-VL one writes the
    same text (it only adds an ``add_vision_id`` option, off by default)."""
    from transformers import AutoTokenizer

    real = json.loads((SOURCE / "chat_template.json").read_text())["chat_template"]
    tokenizer = AutoTokenizer.from_pretrained(SOURCE)
    options = dict(tokenize=False, add_generation_prompt=generation)
    ours = tokenizer.apply_chat_template(CONVERSATIONS[name], chat_template=CHAT_TEMPLATE, **options)
    assert ours == tokenizer.apply_chat_template(CONVERSATIONS[name], chat_template=real, **options)
