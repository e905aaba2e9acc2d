"""Qwen2-VL's text model as qwen2-vl.txt describes it, on a small checkpoint."""

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def path():
    return str(build("qwen2_vl"))


@pytest.fixture(scope="module")
def model(path):
    return StandardizedTransformer(path, task="image-text-to-text", dispatch=True, attn_implementation="eager", device="cpu")


def chat(model, *content, generation=True):
    messages = [{"role": "user", "content": list(content)}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)


IMAGE = {"type": "image"}


def question(text="What is in this image?"):
    return {"type": "text", "text": text}


def test_positions_are_three_streams(model):
    picture = image(112, 84)  # a 6 x 8 patch grid: 3 x 4 image tokens
    prompt = chat(model, IMAGE, question())
    grid = model.processor(text=prompt, images=[picture], return_tensors="pt")["image_grid_thw"][0]
    rows, columns = int(grid[1]) // 2, int(grid[2]) // 2
    rotary = model.model.language_model.rotary_emb
    with model.trace(prompt, images=[picture]):
        mask = model.vision.image_token_mask.save()
        positions = rotary.inputs[0][1].save()
    mask, positions = mask[0], positions[:, 0]
    assert positions.shape[0] == 3
    start = int(mask.nonzero()[0])
    before = positions[:, :start]
    assert torch.equal(before[0], before[1]) and torch.equal(before[1], before[2])
    assert torch.equal(before[0], torch.arange(start))
    image_positions = positions[:, mask]
    assert torch.all(image_positions[0] == start)
    grid_rows = torch.arange(rows).repeat_interleave(columns)
    grid_columns = torch.arange(columns).repeat(rows)
    assert torch.equal(image_positions[1], start + grid_rows)
    assert torch.equal(image_positions[2], start + grid_columns)
    end = int(mask.nonzero()[-1]) + 1
    after = positions[:, end]
    assert torch.all(after == start + max(rows, columns))
    assert after[0] < end, "after an image, a token's position is less than its index"


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def test_queries_and_keys_are_rotated(model):
    """On a prompt with no image the three streams agree, so the rotation is the
    ordinary rotary one, applied before the attention function."""
    prompt = chat(model, question("The quick brown fox."))
    block = model.layers[0]
    with model.trace(prompt):
        x = block.input.save()
        queries = block.self_attn.attention_queries.save()
        keys = block.self_attn.attention_keys.save()
    attention = block.self_attn._module
    normed = block.input_layernorm._module(x)
    seq, head_dim = x.shape[1], model.head_dim
    theta = model._text_config.rope_parameters["rope_theta"]
    frequencies = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.arange(seq, dtype=torch.float32)[:, None] * frequencies[None]
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()

    def rotated(projection, heads):
        states = projection(normed).view(1, seq, heads, head_dim).transpose(1, 2)
        return states * cos + rotate_half(states) * sin

    torch.testing.assert_close(queries, rotated(attention.q_proj, model.num_heads))
    torch.testing.assert_close(keys, rotated(attention.k_proj, model.num_kv_heads))
    plain = attention.q_proj(normed).view(1, seq, model.num_heads, head_dim).transpose(1, 2)
    assert not torch.allclose(queries, plain)


def test_grouped_query_attention(model):
    group = model.num_heads // model.num_kv_heads
    prompt = chat(model, question())
    attention = model.layers[1].self_attn
    with model.trace(prompt):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        scores = attention.attention_scores.save()
        heads = attention.attention_head_outputs.save()
    causal = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    expected = queries @ keys.repeat_interleave(group, dim=1).transpose(-1, -2) * model.head_dim**-0.5
    torch.testing.assert_close(scores[..., causal], expected[..., causal])
    with model.trace(prompt):
        attention.attention_values[:, 0] = 0  # key/value head 0
        edited = attention.attention_head_outputs.save()
    assert edited[:, :, :group].abs().max() == 0
    assert torch.equal(edited[:, :, group:], heads[:, :, group:])


def test_token_embeddings_hold_the_pad_embedding_at_the_image(model):
    picture = image(112, 84)
    with model.trace(chat(model, IMAGE, question()), images=[picture]):
        mask = model.vision.image_token_mask.save()
        embeddings = model.token_embeddings.save()
        first = model.layers[0].input.save()
    pad = model.embed_tokens.weight[model._module.config.image_token_id]
    assert torch.equal(embeddings[mask], pad.expand(int(mask.sum()), -1))
    assert torch.equal(first[~mask], embeddings[~mask])
    assert not torch.equal(first[mask], embeddings[mask])


def test_the_readout_is_tied_to_the_embedding(path):
    model = StandardizedTransformer(path, task="image-text-to-text", dispatch=True, device="cpu")
    assert model.embed_tokens.weight is model.lm_head.weight
    with torch.no_grad():
        model.embed_tokens.weight[0] += 1
    assert torch.equal(model.lm_head.weight[0], model.embed_tokens.weight[0])


def test_the_chat_template_writes_a_system_turn(model):
    tokenizer = model.tokenizer
    assert tokenizer.bos_token is None
    prompt = chat(model, question())
    assert prompt.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n")
    ids = tokenizer(prompt)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    generation = model._module.generation_config
    assert set(generation.eos_token_id) == {
        tokenizer.convert_tokens_to_ids("<|im_end|>"),
        tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    }


def test_every_image_load_is_the_wrapper_with_its_processor(model):
    assert type(model._module).__name__ == "Qwen2VLForConditionalGeneration"
    assert type(model.processor).__name__ == "Qwen2VLProcessor"
    assert model.tokenizer is model.processor.tokenizer
    assert model.layers.path == "model.model.language_model.layers"
    assert model.vision.path == "model.model.visual"
    assert model.family.name == "qwen2_vl"


def test_text_names_are_the_same_with_or_without_an_image(model):
    picture = image(112, 84)
    with model.trace(chat(model, question())):
        text_only = model.layers[1].layer_output.save()
    with model.trace(chat(model, IMAGE, question()), images=[picture]):
        mask = model.vision.image_token_mask.save()
        with_image = model.layers[1].layer_output.save()
    assert text_only.shape[-1] == with_image.shape[-1] == model.hidden_size
    assert with_image.shape[1] == text_only.shape[1] + int(mask.sum()) + 2  # pads and vision markers
