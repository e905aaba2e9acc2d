"""The Qwen ViT as qwen2-vl.txt describes it: one packed row, per-image attention, the merger."""

import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def path():
    return str(build("qwen2_vl"))


@pytest.fixture(scope="module")
def model(path):
    return StandardizedTransformer(path, task="image-text-to-text", dispatch=True, attn_implementation="eager", device="cpu")


def chat(model, images=1, text="What is in this image?"):
    content = [{"type": "image"}] * images + [{"type": "text", "text": text}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)


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
