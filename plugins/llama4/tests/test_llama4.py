"""What is particular to Llama 4: the root scatter, the interleaved dense and MoE
blocks and the sigmoid router, and the text-only load."""

from __future__ import annotations

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.plugin import Mlp
from vlreg.testing import QUESTION, build, chat
from vlreg.testing.conformance import image
from vlreg_llama4.text import Llama4Moe

CHECKPOINT = "llama4"
LOAD_OPTIONS = {"dtype": torch.bfloat16}


@pytest.fixture(scope="module")
def path():
    return str(build(CHECKPOINT))


def test_the_features_are_written_in_the_wrappers_own_forward(model):
    assert model.family.entry.host == ""
    with model.trace(chat(model), images=[image(112, 84)]):
        tower = model.vision.tower_output.save()  # the tower runs inside the root's forward
        projected = model.projector.output.save()
        model.vision.image_features[:4] = 0  # the first tile's tokens
        first = model.layers[0].input.save()
    assert tower.shape == (5, 17, 32)  # 4 tiles and the global image, 16 patches and the class token
    ids = model.processor(text=chat(model), images=[image(112, 84)], return_tensors="pt")["input_ids"]
    at = (ids == model._module.config.image_token_id)[0]
    # the projector's rows, whether it took the tiles' patches flat (transformers 5.23, 5.24) or per tile (5.25)
    projected = projected.reshape(-1, projected.shape[-1])
    assert first[0, at][:4].abs().max() == 0 and torch.equal(first[0, at][4:], projected[4:].to(first.dtype))


def test_a_lazy_load_serves_the_root_scatter_after_dispatch(path, model):
    lazy = StandardizedTransformer(path, task="image-text-to-text", dispatch=False, attn_implementation="eager",
                                   dtype=torch.bfloat16)
    with lazy.trace(chat(model), images=[image(112, 84)]):
        lazy.vision.tower_output.save()
        features = lazy.vision.image_features.save()
    with model.trace(chat(model), images=[image(112, 84)]):
        expected = model.vision.image_features.save()
    assert lazy.dispatched and torch.equal(features, expected)


def test_dense_and_moe_blocks_interleave(model):
    assert [type(block.mlp) for block in model.layers] == [Mlp, Llama4Moe, Mlp, Llama4Moe]
    rows = model.support()
    assert "layers.1,3.mlp.router_logits" in rows and rows["layers.1,3.mlp.router_logits"] is None
    assert "no slot's output is held apart" in rows["layers.1,3.mlp.expert_outputs"]
    mlp = model.layers[1].mlp
    assert (mlp.num_experts, mlp.top_k, mlp.intermediate_size, model.layers[0].mlp.intermediate_size) == (4, 2, 32, 128)


def test_expert_weights_are_a_sigmoid_of_the_chosen_logits_scaling_the_experts_input(model):
    prompt, images = chat(model), [image(112, 84)]
    with model.trace(prompt, images=images):
        mlp = model.layers[1].mlp
        logits, weights, indices = mlp.router_logits.save(), mlp.expert_weights.save(), mlp.expert_indices.save()
        shared, routed, out = mlp.shared_expert_output.save(), mlp.routed_output.save(), mlp.mlp_output.save()
    top = logits.topk(model.layers[1].mlp.top_k, dim=1)
    assert torch.equal(indices, top.indices)
    assert torch.equal(weights, torch.sigmoid(top.values.float()).to(weights.dtype))
    assert (weights > 0).all() and (weights < 1).all() and not torch.allclose(weights.float().sum(1), torch.ones(1))
    assert torch.equal((shared + routed).reshape(out.shape), out)  # the shared expert's output is the copy it was
    with model.trace(prompt, images=images):
        mlp = model.layers[1].mlp
        mlp.expert_weights[:] = 0  # every expert's input is then zero, and so is its output
        shared, routed, out = mlp.shared_expert_output.save(), mlp.routed_output.save(), mlp.mlp_output.save()
    assert routed.abs().max() == 0 and torch.equal(shared.reshape(out.shape), out)


def test_a_written_slot_takes_its_weight_to_the_expert_written(model):
    prompt, images = chat(model), [image(112, 84)]
    with model.trace(prompt, images=images):
        mlp = model.layers[1].mlp
        weights, indices = mlp.expert_weights.save(), mlp.expert_indices.clone().save()  # edited in place below
        mlp.expert_indices[:, 0] = 3 - mlp.expert_indices[:, 0]  # the first slot to another expert
        moved, after = mlp.expert_indices.save(), mlp.expert_weights.save()
    apart = (3 - indices[:, 0]) != indices[:, 1]  # rows where the slot lands on an expert not already chosen
    assert apart.any()
    assert torch.equal(moved[apart].sort(1).values, torch.stack([3 - indices[:, 0], indices[:, 1]], 1)[apart].sort(1).values)
    assert torch.equal(after[apart].sort(1).values, weights[apart].sort(1).values)


def test_a_text_generation_load_is_the_causal_lm_read_out_of_the_wrapper(path, model):
    """Llama4ForCausalLM, its weights read out of the wrapper's checkpoint: the same
    names and values on a text prompt, and no tower."""
    text = StandardizedTransformer(path, dispatch=True, device="cpu", attn_implementation="eager", dtype=torch.bfloat16)
    assert type(text._module).__name__ == "Llama4ForCausalLM" and "vision" not in text.__dict__
    assert text.layers[1].mlp.router.path == "model.model.layers.1.feed_forward.router"
    assert torch.equal(text.layers[1].mlp.router.weight, model.layers[1].mlp.router.weight)
    assert torch.equal(text.lm_head.weight, model.lm_head.weight)
    with text.trace(QUESTION):
        routing, logits = text.layers[3].mlp.router_logits.save(), text.logits.save()
    with model.trace(QUESTION):
        expected_routing, expected = model.layers[3].mlp.router_logits.save(), model.logits.save()
    assert torch.equal(routing, expected_routing) and torch.equal(logits, expected)


def test_a_float32_load_traces_images_as_the_bfloat16_one_does(path, model):
    """Llama 4's image processor emits bfloat16 pixels whatever the weights; a trace hands
    them to the tower in the load's dtype (as transformers' pipelines do), so a float32
    load runs, and its features follow the bfloat16 load's."""
    wide = StandardizedTransformer(path, task="image-text-to-text", dispatch=True, device="cpu",
                                   attn_implementation="eager", dtype=torch.float32)
    picture = image(112, 84)
    with torch.no_grad(), wide.trace(chat(wide), images=[picture]):
        features = wide.vision.image_features.save()
    with torch.no_grad(), model.trace(chat(model), images=[picture]):
        narrow = model.vision.image_features.save()
    assert features.dtype == torch.float32
    torch.testing.assert_close(features, narrow.float(), atol=0.05, rtol=0.05)


def test_a_text_loads_expert_values_are_cut_per_invoke(path):
    """Llama4ForCausalLM has no image token: two text invokes each get their own rows of
    the routed tokens, and zeroing the routed output in one leaves the other's logits."""
    text = StandardizedTransformer(path, dispatch=True, device="cpu", attn_implementation="eager", dtype=torch.bfloat16)
    short, long = QUESTION, QUESTION + " The capital of France is Paris."
    saved: list = []
    for edit in (False, True):
        with text.trace() as tracer:
            with tracer.invoke(short):
                saved.append(text.layers[1].mlp.router_logits.save())
                if edit:
                    text.layers[1].mlp.routed_output[:] = 0
            with tracer.invoke(long):
                saved.append(text.layers[1].mlp.router_logits.save())
                saved.append(text.logits.save())
    with text.trace([short, long]):
        whole = text.layers[1].mlp.router_logits.save()
    assert saved[0].shape[0] + saved[1].shape[0] == whole.shape[0] and saved[0].shape[0] == saved[1].shape[0]
    torch.testing.assert_close(saved[5], saved[2])
