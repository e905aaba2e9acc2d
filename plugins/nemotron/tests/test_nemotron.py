"""What is particular to NemotronH Omni: the RADIO tower's packed row and its prefix of
summary and register tokens, the features the wrapper folds and projects from it, blocks
named by their kind whatever the order, and generation through the Mamba cache."""

from __future__ import annotations

import pytest
import torch

from vlreg import Unavailable, analysis
from vlreg.testing import chat, load
from vlreg.testing.conformance import at_each_step, image

CHECKPOINT = "nemotron_h_omni"


def test_the_features_are_the_tower_output_folded_and_projected(model):
    """Block 0 takes the prefix, then the projected patches plus the resampled positions;
    after the prefix rows, tower_output holds the image's patches in raster order; the
    wrapper's pixel shuffle and projector make them the features."""
    prompt, pictures = chat(model, images=1), [image(112, 84)]
    (rows, columns), = model.processor(text=prompt, images=pictures, return_tensors="pt")["image_grid_hw"].tolist()
    with model.trace(prompt, images=pictures):
        patches = model.vision.patch_embeddings.save()
        positions = model.vision.position_embeddings.save()
        first = model.vision.layers[0].input.save()
        out = model.vision.tower_output.save()
        features = model.vision.image_features.save()
    prefix = model.vision.class_tokens
    assert patches.shape == positions.shape == (1, rows * columns, model.vision.vision_hidden_size)
    assert torch.equal(first[:, prefix:], patches + positions)
    assert out.shape[:2] == (1, prefix + rows * columns)
    wrapper = model._module
    folded = wrapper.pixel_shuffle(out[0, prefix:].reshape(1, rows, columns, -1), wrapper.config.downsample_ratio)
    torch.testing.assert_close(wrapper.multi_modal_projector(folded.flatten(0, 2)), features)


def test_two_images_are_packed_in_one_row_each_after_its_prefix(model):
    prompt, pictures = chat(model, images=2), [image(112, 84), image(40, 120, seed=1)]
    grids = model.processor(text=prompt, images=pictures, return_tensors="pt")["image_grid_hw"].tolist()
    first, second = model.vision.geometry(prompt, pictures)
    prefix = model.vision.class_tokens
    with model.trace(prompt, images=pictures):
        embedded = model.vision.layers[0].input.save()
        model.vision.image_features[second.features] = 0  # the second image only
        stream = model.layers[0].input.save()
    with model.trace(prompt, images=pictures):
        plain = model.layers[0].input.save()
    lengths = [prefix + rows * columns for rows, columns in grids]
    assert embedded.shape[:2] == (1, sum(lengths))
    learned = model.vision.patch_embed._module.cls_register_token
    for start in (0, lengths[0]):  # each image's rows open with the learned summary and register tokens
        assert torch.equal(embedded[0, start : start + prefix], learned)
    assert stream[0, second.positions].abs().max() == 0
    untouched = torch.ones(stream.shape[1], dtype=torch.bool)
    untouched[second.positions] = False
    assert torch.equal(stream[0, untouched], plain[0, untouched]) and not torch.equal(stream, plain)


def test_the_tower_pattern_is_one_images(model):
    """With one image the tower's pattern is served (and sums to 1 over its prefix and
    patches); with two, each attends within itself in a call of its own: refused, while
    the queries are served over the packed row."""
    one, two = [image(112, 84)], [image(112, 84), image(40, 120, seed=1)]
    with model.trace(chat(model, images=1), images=one):
        pattern = model.vision.layers[0].self_attn.attention_probabilities.save()
    torch.testing.assert_close(pattern.sum(-1), torch.ones_like(pattern.sum(-1)))
    with model.trace(chat(model, images=2), images=two):
        queries = model.vision.layers[0].self_attn.attention_queries.save()
    assert queries.shape[2] > pattern.shape[-1]
    with pytest.raises(Unavailable, match="several images"):
        with model.trace(chat(model, images=2), images=two):
            model.vision.layers[0].self_attn.attention_probabilities.save()
    with pytest.raises(Unavailable, match="in a call of its own"):
        with model.trace(chat(model, images=2), images=two):
            model.vision.position_embeddings.save()


def test_each_block_takes_the_stream_the_one_before_leaves(model):
    """Whatever a block's kind (Mamba, experts, attention, MLP), the next one takes what it
    returns, and what it returns is its input plus its one sublayer's output."""
    flows = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(chat(model, images=1), images=[image(112, 84)]):
        for block in model.layers:
            x = block.input.save()
            part = block.__dict__[name_of(block)]
            added = (part.mlp_output if name_of(block) == "mlp" else part.attention_output).save()
            flows.append((x, added, block.layer_output.save()))
    for (x, added, out), (after, _, _) in zip(flows, flows[1:]):
        assert torch.equal(after, out)
    for x, added, out in flows:
        torch.testing.assert_close(x + added, out)


def name_of(block) -> str:
    return next(name for name in ("mamba", "self_attn", "mlp") if name in block.__dict__)


def test_attention_to_the_image_is_read_in_the_blocks_that_attend(model):
    prompt, pictures = chat(model, images=1), [image(112, 84)]
    found = analysis.attention_to_images(model, prompt, pictures)
    assert tuple(found.layers) == (2,)  # the Mamba, expert and MLP blocks have no pattern
    with pytest.raises(Unavailable, match=r"layers \[0\]: those blocks have no self_attn"):
        analysis.attention_to_images(model, prompt, pictures, layers=[0, 2])


def test_blocks_are_named_by_their_kind_in_any_order():
    kinds = ["full_attention", "linear_attention", "linear_attention", "mlp", "moe"]
    model = load("nemotron_h_omni", {"text_config": {"layers_block_type": kinds}})
    named = [[name for name in ("mamba", "self_attn", "mlp") if name in block.__dict__] for block in model.layers]
    assert named == [["self_attn"], ["mamba"], ["mamba"], ["mlp"], ["mlp"]]
    rows = model.support()
    assert {"layers.0.self_attn.attention_output", "layers.1-2.mamba.attention_output", "layers.3-4.mlp.mlp_output",
            "layers.4.mlp.router_logits"} <= set(rows)
    flows = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(chat(model, images=0)):
        for block in model.layers[1:3]:
            flows.append((block.input.save(), block.mamba.attention_output.save(), block.layer_output.save()))
    for x, mixer, out in flows:
        torch.testing.assert_close(x + mixer, out)


def test_without_a_cache_the_state_after_the_prompt_is_none(model):
    """The scan returns the state only for the cache; without one the rest is the same.
    Where the scan keeps its state inside mamba2_scan_forward (transformers 5.25,
    `Mamba.one_call`), the state is refused, naming it."""
    prompt = chat(model, images=0)
    one_call = model.layers[0].mamba.one_call
    runs = []  # made outside the trace: names first bound inside one do not leave it
    for options in ({"use_cache": False}, {}):
        with model.trace(prompt, **options):
            runs.append((None if one_call else model.layers[0].mamba.state_output.save(), model.logits.save()))
    (none, plain), (state, cached) = runs
    assert torch.equal(plain, cached)
    if not one_call:
        assert none is None and state is not None
        return
    with pytest.raises(Unavailable, match="mamba2_scan_forward"):
        with model.trace(prompt):
            model.layers[0].mamba.state_output.save()


def test_generation_runs_through_the_mamba_cache(model):
    """A generation's first step is the prefill, where the Mamba values are read (the
    state it leaves is what the later steps start from); the tokens are transformers' own."""
    prompt, pictures = chat(model, images=1), [image(112, 84)]
    mixer = model.layers[0].mamba
    steps = []  # made before the trace: names first bound inside one do not leave it
    with model.generate(prompt, images=pictures, max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
        state = None if mixer.one_call else mixer.state_output.save()  # refused there: see the test above
        for step in tracer.iter[0:3]:
            steps.append(model.logits[:, -1].argmax(-1).save())
    with model.generate(prompt, images=pictures, max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
        tokens = tracer.result.save()
    assert mixer.one_call or state.shape == (1, mixer.num_heads, mixer.head_dim, mixer.state_size)
    encoding = model.processor(text=prompt, images=pictures, return_tensors="pt")
    expected = model._module.generate(**encoding, max_new_tokens=3, min_new_tokens=3, do_sample=False)
    assert torch.equal(tokens, expected)
    assert torch.equal(torch.cat(steps), expected[0, -3:])


def test_the_scans_values_are_the_prefills_unless_there_is_no_cache(model):
    """After the prefill each token runs the recurrent update: the scan's values are refused
    there, naming the step, while what the mixer adds is served at every step; without a
    cache every step runs the scan over the whole sequence, and serves them. Where one
    function runs the scan at every step (transformers 5.25, `Mamba.one_call`), its values
    are served at every step, the new token's at a later one."""
    prompt = chat(model, images=0)
    added, outputs = [], []  # made before the traces: names first bound inside one do not leave it
    with model.generate(prompt, max_new_tokens=2, min_new_tokens=2) as tracer:
        for step in tracer.iter[0:2]:
            added.append(model.layers[0].mamba.attention_output.save())
    assert added[0].shape[1] > 1 and added[1].shape[1] == 1
    def heads(model):
        return model.layers[0].mamba.attention_head_outputs

    if model.layers[0].mamba.one_call:
        outputs = at_each_step(model, prompt, heads)
        assert outputs[0].shape[1] == added[0].shape[1] and outputs[1].shape[1] == 1
        return
    with pytest.raises(Unavailable, match="at step 1, after the prefill"):
        at_each_step(model, prompt, heads, outputs)
    assert len(outputs) == 1
    outputs = at_each_step(model, prompt, heads, use_cache=False)
    assert outputs[1].shape[1] == outputs[0].shape[1] + 1
