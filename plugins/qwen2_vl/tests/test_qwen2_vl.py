"""Qwen2-VL as qwen2-vl.txt describes it, on a small checkpoint: the text model, and the Qwen ViT
(one packed row, per-image attention, the merger)."""

import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build, chat
from vlreg.testing.conformance import image


CHECKPOINT = "qwen2_vl"


@pytest.fixture(scope="module")
def path():
    return str(build(CHECKPOINT))


def test_positions_are_three_streams(model):
    picture = image(112, 84)  # a 6 x 8 patch grid: 3 x 4 image tokens
    prompt = chat(model)
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
    prompt = chat(model, images=0, text="The quick brown fox.")
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
    prompt = chat(model, images=0)
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
    with model.trace(chat(model), images=[picture]):
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
    prompt = chat(model, images=0)
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
    with model.trace(chat(model, images=0)):
        text_only = model.layers[1].layer_output.save()
    with model.trace(chat(model), images=[picture]):
        mask = model.vision.image_token_mask.save()
        with_image = model.layers[1].layer_output.save()
    assert text_only.shape[-1] == with_image.shape[-1] == model.hidden_size
    assert with_image.shape[1] == text_only.shape[1] + int(mask.sum()) + 2  # pads and vision markers


red = Image.new("RGB", (56, 56), "red")
wide = image(112, 56, seed=3)


def test_every_image_in_one_row(model):
    prompt = chat(model, images=2)
    inputs = model.processor(text=prompt, images=[red, wide], return_tensors="pt")
    sizes = inputs["image_grid_thw"].prod(-1).tolist()  # patches per image
    with model.trace(prompt, images=[red, wide]):
        block = model.vision.layers[1].input.save()
        patches = model.vision.layers[1].layer_output.save()
    per_image = patches[0].split(sizes)
    assert [p.shape for p in per_image] == [(n, model.vision.vision_hidden_size) for n in sizes]
    assert patches.shape == (1, sum(sizes), model.vision.vision_hidden_size)
    assert block.shape == (sum(sizes), model.vision.vision_hidden_size)
    assert all(thw[0] == 1 for thw in inputs["image_grid_thw"].tolist())


def test_patches_are_in_merge_block_order(model):
    """Each 2 x 2 block of neighbouring patches is four consecutive rows, blocks in
    raster order: a picture of solid 28 x 28 squares gives four equal rows per block."""
    greys = torch.randperm(12, generator=torch.Generator().manual_seed(1)).view(3, 4) * 20
    squares = greys.to(torch.uint8)[..., None].expand(3, 4, 3)
    picture = Image.fromarray(squares.repeat_interleave(28, 0).repeat_interleave(28, 1).numpy())
    prompt = chat(model)
    pixels = model.processor(text=prompt, images=[picture], return_tensors="pt")["pixel_values"]
    with model.trace(prompt, images=[picture]):
        embedded = model.vision.patch_embeddings.save()
    blocks = embedded[0].view(-1, 4, embedded.shape[-1])
    assert blocks.shape[0] == 12
    assert torch.equal(blocks, blocks[:, :1].expand_as(blocks))
    assert len({tuple(block[0].tolist()) for block in blocks}) == 12
    means = pixels.view(12, 4, -1).mean(-1)[:, 0]
    assert torch.equal(means.argsort(), greys.flatten().argsort()), "blocks are not in raster order"


def test_the_merger_folds_four_patches_into_one_image_token(model):
    picture = image(112, 84)
    with model.trace(chat(model), images=[picture]):
        mask = model.vision.image_token_mask.save()
        fed = model.projector.input.save()  # [patches, vision_hidden_size]
        merged = model.projector.output.save()
        tower = model.vision.tower_output.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert fed.shape[0] // 4 == mask.sum()
    assert torch.equal(merged, features)
    assert torch.equal(first[mask], features)
    assert torch.equal(fed, tower[0])
    merger = model.projector._module
    block = merger.ln_q(fed[4:8]).reshape(-1)
    torch.testing.assert_close(merger.mlp(block), merged[1])


def test_per_image_patterns_reproduce_the_head_outputs(model):
    attn = model.vision.layers[1].self_attn
    with model.trace(chat(model, images=2), images=[red, wide]):
        cu = attn.inputs[1]["cu_seqlens"].save()  # read first: the module's input
        q = attn.attention_queries.save()
        k = attn.attention_keys.save()
        v = attn.attention_values.save()
        heads = attn.attention_head_outputs.save()
    patterns = []
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        scores = q[0, :, a:b] @ k[0, :, a:b].transpose(-1, -2) * model.vision.head_dim**-0.5
        patterns.append(scores.softmax(-1))
    assert len(patterns) == 2
    helped = attn.patterns(q, k, cu)
    for pattern, mine, (a, b) in zip(patterns, helped, zip(cu[:-1].tolist(), cu[1:].tolist())):
        assert pattern.shape == (model.vision.num_heads, b - a, b - a)
        torch.testing.assert_close(mine, pattern)
        torch.testing.assert_close(pattern @ v[0, :, a:b], heads[0, a:b].transpose(0, 1))
        assert torch.equal((mine @ v[0, :, a:b]).transpose(0, 1), heads[0, a:b])


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_there_is_no_one_pattern(path, implementation):
    model = StandardizedTransformer(path, task="image-text-to-text", dispatch=True, attn_implementation=implementation, device="cpu")
    for name in ("attention_scores", "attention_probabilities"):
        reason = model.support()[f"vision.self_attn.{name}"]
        assert "once per image" in reason and "cu_seqlens" in reason
        assert "attn_implementation" not in reason
        with pytest.raises(Unavailable, match="cu_seqlens"):
            with model.trace(chat(model), images=[red]):
                getattr(model.vision.layers[0].self_attn, name).save()


def test_sizes(model):
    vision = model.vision
    config = model._module.config.vision_config
    assert vision.vision_hidden_size == config.embed_dim
    assert vision.num_heads * vision.head_dim == vision.vision_hidden_size
    assert vision.intermediate_size == config.embed_dim * config.mlp_ratio
    assert vision.patch_size == 14 and vision.spatial_merge_size == 2 and vision.window_size is None
    with pytest.raises(Unavailable, match="image_grid_thw"):
        vision.image_size


def test_several_prompts_with_images_in_one_invoke(model):
    prompts = [chat(model), chat(model, text="Describe the picture.")]
    with model.trace(prompts, images=[red, wide]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert mask.shape[0] == 2
    assert mask[0].sum() == 4 and mask[1].sum() == 8
    assert torch.equal(first[mask], features)


def test_vision_markers_surround_the_pads(model):
    picture = image(112, 84)
    prompt = chat(model)
    assert "<|vision_start|><|image_pad|><|vision_end|>" in prompt
    ids = model.processor(text=prompt, images=[picture], return_tensors="pt")["input_ids"][0]
    with model.trace(prompt, images=[picture]):
        mask = model.vision.image_token_mask.save()
    positions = mask[0].nonzero().flatten()
    tokens = model.tokenizer.convert_ids_to_tokens([int(ids[positions[0] - 1]), int(ids[positions[-1] + 1])])
    assert tokens == ["<|vision_start|>", "<|vision_end|>"]
    assert torch.equal(ids[mask[0]], torch.full((len(positions),), model._module.config.image_token_id))
