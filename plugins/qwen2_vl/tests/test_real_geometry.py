"""Qwen2-VL-2B-Instruct's real geometry (widths, token ids, template) at reduced depth."""

import json

import pytest
import torch
from transformers import AutoProcessor

from vlreg.testing import chat, shared_checkpoint
from vlreg.testing.conformance import image
from vlreg_qwen2_vl.checkpoints import CHAT_TEMPLATE

INSTRUCT = shared_checkpoint("Qwen2-VL-2B-Instruct")
BASE = shared_checkpoint("Qwen2-VL-2B")
pytestmark = [pytest.mark.heavy, pytest.mark.skipif(
    INSTRUCT is None,
    reason="../shared/checkpoints/Qwen2-VL-2B-Instruct is absent: the real checkpoints' metadata "
    "lives beside the repository, not in it",
)]
CHECKPOINT = "qwen2_vl"
BUILD_OPTIONS = {"source": str(INSTRUCT)}  # built once for the module, removed after it


def test_the_real_sizes(model):
    assert (model.num_heads, model.num_kv_heads, model.head_dim) == (12, 2, 128)
    assert (model.hidden_size, model.vocab_size) == (1536, 151936)
    text = model._text_config
    assert text.rope_parameters["mrope_section"] == [16, 24, 24]
    assert text.rope_parameters["rope_theta"] == 1e6
    assert model._module.config.image_token_id == model.tokenizer.convert_tokens_to_ids("<|image_pad|>") == 151655
    assert model.embed_tokens.weight is model.lm_head.weight
    vision = model.vision
    assert (vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (1280, 16, 80)
    assert (vision.intermediate_size, vision.patch_size, vision.spatial_merge_size) == (5120, 14, 2)


def test_a_448_image_is_1024_patches_and_256_tokens(model):
    picture = image(448, 448)
    with model.trace(chat(model), images=[picture]):
        mask = model.vision.image_token_mask.save()
        fed = model.projector.input.save()
        merged = model.projector.output.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert int(mask.sum()) == 256
    assert tuple(fed.shape) == (1024, 1280)
    assert tuple(merged.shape) == (256, 1536)
    assert torch.equal(merged, features)
    assert torch.equal(first[mask], features)


def test_rotary_sections_carry_time_rows_and_columns(model):
    picture = image(112, 112)  # 8 x 8 patches: 4 x 4 image tokens
    rotary = model.model.language_model.rotary_emb
    with model.trace(chat(model, text="Hi"), images=[picture]):
        mask = model.vision.image_token_mask.save()
        sin = rotary.output[1].save()
    sin = sin[0, mask[0]].view(4, 4, 128)  # image tokens in raster order
    time = torch.cat([sin[..., 0:16], sin[..., 64:80]], -1)
    rows = torch.cat([sin[..., 16:40], sin[..., 80:104]], -1)
    columns = torch.cat([sin[..., 40:64], sin[..., 104:128]], -1)
    assert torch.equal(time, time[:1, :1].expand_as(time))
    assert torch.equal(rows, rows[:, :1].expand_as(rows))
    assert len({tuple(row.tolist()) for row in rows[:, 0]}) == 4
    assert torch.equal(columns, columns[:1].expand_as(columns))
    assert len({tuple(column.tolist()) for column in columns[0]}) == 4


def test_an_edit_to_kv_head_j_reaches_query_heads_6j_to_6j_plus_5(model):
    attention = model.layers[1].self_attn
    prompt = chat(model, images=0, text="The capital of France is")
    with model.trace(prompt):
        plain = attention.attention_head_outputs.save()
    with model.trace(prompt):
        attention.attention_values[:, 1] = 0
        edited = attention.attention_head_outputs.save()
    changed = [h for h in range(12) if not torch.equal(plain[:, :, h], edited[:, :, h])]
    assert changed == list(range(6, 12))


def test_no_bos_and_a_system_turn(model):
    tokenizer = model.tokenizer
    assert tokenizer.bos_token is None
    prompt = chat(model, images=0, text="Hi")
    assert tokenizer(prompt)["input_ids"][0] == 151644 == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert "You are a helpful assistant." in prompt
    generation = json.loads((INSTRUCT / "generation_config.json").read_text())
    assert set(generation["eos_token_id"]) == {151645, 151643}


def test_the_tiny_checkpoints_template_writes_what_the_real_one_writes(model):
    conversations = [
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}],
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": [{"type": "text", "text": "and"}, {"type": "image"}, {"type": "video"}]},
        ],
    ]
    for messages in conversations:
        for generation in (True, False):
            real = model.processor.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)
            tiny = model.processor.apply_chat_template(
                messages, add_generation_prompt=generation, tokenize=False, chat_template=CHAT_TEMPLATE
            )
            assert tiny == real


@pytest.mark.skipif(BASE is None, reason="../shared/checkpoints/Qwen2-VL-2B is absent")
def test_the_base_template_takes_one_content_list():
    processor = AutoProcessor.from_pretrained(BASE)
    content = [{"type": "image"}, {"type": "text", "text": "A photo of"}]
    assert processor.apply_chat_template(content) == "<|vision_start|><|image_pad|><|vision_end|>A photo of"
