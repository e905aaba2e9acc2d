"""Gradients of served values (`vlreg.core.serving.gradients`): the issue's snippet, the
geometry of views inside a batch, edits, and every refusal, in vlreg's words.

`GradientConformance` checks every family's values against plain autograd; these are the
behaviours a user meets on one family (Qwen2-VL, a tiny checkpoint)."""

import contextlib

import pytest
import torch

from vlreg import OutOfOrder, ReadOnly, Unavailable
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "qwen2_vl"


@contextlib.contextmanager
def refused_before_the_backward(model, pattern):
    """Around a trace whose gradient must be refused with `Unavailable` matching ``pattern``
    before the backward runs: no weight gets a gradient."""
    model._module.zero_grad(set_to_none=True)  # what earlier tests' backwards left
    with pytest.raises(Unavailable, match=pattern) as caught:
        yield caught
    assert "0x" not in str(caught.value) and ".i0" not in str(caught.value)  # no object ids, no nnsight names
    assert all(parameter.grad is None for parameter in model._module.parameters()), "the backward ran first"

def native_features_gradient(model, prompt, images, answer):
    """The features' gradient by plain torch: a forward hook on the merger keeps its output's."""
    kept = []

    def keep(module, inputs, output):
        output.retain_grad()
        kept.append(output)

    handle = model._module.model.visual.merger.register_forward_hook(keep)
    try:
        inputs = model.processor(text=prompt, images=images, return_tensors="pt")
        model._module(**inputs).logits[0, -1, answer].backward()
    finally:
        handle.remove()
        model._module.zero_grad(set_to_none=True)
    return kept[0].grad


def test_the_issues_snippet_gives_autograds_gradient_of_the_features(model):
    prompt, images = chat(model), [image(112, 84)]
    with model.trace(prompt, images=images):
        features = model.vision.image_features
        with model.logits[0, -1, 5].backward():
            g = features.grad.save()
    model._module.zero_grad(set_to_none=True)
    torch.testing.assert_close(g, native_features_gradient(model, prompt, images, 5))


def test_inputs_takes_served_values_and_no_weight_gets_a_gradient(model):
    prompt, images = chat(model), [image(112, 84)]
    with model.trace(prompt, images=images):
        features = model.vision.image_features
        stream = model.layers[1].layer_output
        with model.logits[0, -1, 5].backward(inputs=[features, stream]):
            g = features.grad.save()
    assert all(parameter.grad is None for parameter in model._module.parameters())
    torch.testing.assert_close(g, native_features_gradient(model, prompt, images, 5))


def test_gradients_read_in_any_order_and_views_of_values_by_their_geometry(model):
    """Two invokes: each reads its own rows (a select of the batch's features); a view the
    user makes of a value (one token's row) reads that row of its gradient."""
    prompts, images = [chat(model), chat(model, text="Describe it.")], [image(112, 84, seed=1), image(112, 84, seed=2)]
    grads = []
    with model.trace() as tracer:
        for prompt, picture in zip(prompts, images):
            with tracer.invoke(prompt, images=[picture]):
                features = model.vision.image_features
                row = features[3]
                stream = model.layers[0].input
                with model.logits[0, -1, 5].backward(retain_graph=True):  # the invokes share one graph
                    grads.append((features.grad.save(), row.grad.save(), stream.grad.save()))
    for (features, row, stream), prompt, picture in zip(grads, prompts, images):
        expected = native_features_gradient(model, prompt, [picture], 5)
        torch.testing.assert_close(features, expected)
        torch.testing.assert_close(row, expected[3])
        assert stream.shape[0] == 1


def test_an_edit_of_a_gradient_flows_on_and_an_in_place_edit_lands(model):
    prompt, images = chat(model), [image(112, 84)]
    runs = []
    for edit in (None, "assign", "in place"):
        with model.trace(prompt, images=images):
            features = model.vision.image_features
            stream = model.layers[0].input
            with model.logits[0, -1, 5].backward():
                kept = stream.grad.clone().save()
                if edit == "assign":
                    stream.grad = stream.grad * 2
                elif edit == "in place":
                    stream.grad[...] *= 2
                runs.append((kept, features.grad.save()))
    (clean, features), (_, assigned), (_, in_place) = runs
    torch.testing.assert_close(assigned, 2 * features)
    torch.testing.assert_close(in_place, 2 * features)


def test_an_edit_after_the_backward_passed_the_value_is_refused_in_vlregs_names(model):
    prompt, images = chat(model), [image(112, 84)]
    with pytest.raises(OutOfOrder) as caught:
        with model.trace(prompt, images=images):
            features = model.vision.image_features
            stream = model.layers[1].layer_output
            with model.logits[0, -1, 5].backward():
                features.grad
                stream.grad = stream.grad * 2
    message = str(caught.value)
    assert "layers[1].layer_output.grad was assigned after vision.image_features.grad was asked for" in message
    assert "reverse of the forward order" in message and "0x" not in message


def test_a_gradient_read_after_the_backward_passed_it_refuses_edits_in_place(model):
    prompt, images = chat(model), [image(112, 84)]
    with pytest.raises(ReadOnly, match="layers.1..layer_output.grad was read after the backward had moved past"):
        with model.trace(prompt, images=images):
            features = model.vision.image_features
            stream = model.layers[1].layer_output
            with model.logits[0, -1, 5].backward():
                features.grad
                stream.grad[...] = 0


def test_a_value_the_metric_does_not_depend_on_says_so(model):
    prompt, images = chat(model), [image(112, 84)]
    with pytest.raises(OutOfOrder, match=r"layers\[1\].layer_output.grad never arrived: .* does not depend on it"):
        with model.trace(prompt, images=images):
            stream = model.layers[0].layer_output
            later = model.layers[1].layer_output
            with stream.sum().backward():
                later.grad


def test_a_forward_value_read_inside_the_backward_is_refused(model):
    prompt, images = chat(model), [image(112, 84)]
    with pytest.raises(OutOfOrder, match="inside `with metric.backward\\(\\):` only gradients are served"):
        with model.trace(prompt, images=images):
            metric = model.logits[0, -1, 5]
            with metric.backward():
                model.layers[0].input.grad


def test_discrete_values_refuse_their_gradient(model):
    prompt, images = chat(model), [image(112, 84)]
    with refused_before_the_backward(model, "vision.image_token_mask.grad is unavailable: it holds bool values .* discrete"):
        with model.trace(prompt, images=images):
            mask = model.vision.image_token_mask
            with model.logits[0, -1, 5].backward():
                mask.grad


def test_a_trace_without_gradients_refuses_before_the_backward_runs(model):
    prompt, images = chat(model), [image(112, 84)]
    with refused_before_the_backward(model, "the metric has no gradient.*under torch.no_grad"):
        with torch.no_grad(), model.trace(prompt, images=images):
            features = model.vision.image_features
            with model.logits[0, -1, 5].backward():
                features.grad
    with refused_before_the_backward(model, "vision.image_features.grad is unavailable: it was computed without gradient"):
        with model.trace(prompt, images=images):
            with torch.no_grad():
                features = model.vision.image_features
            stream = model.layers[0].input
            with model.logits[0, -1, 5].backward():
                features.grad


def test_a_generate_trace_refuses_gradients(model):
    prompt, images = chat(model), [image(112, 84)]
    with refused_before_the_backward(model, "generate trace runs without gradients"):
        with model.generate(prompt, images=images, max_new_tokens=1):
            metric = model.logits[0, -1, 5]
            with metric.backward():
                pass


def test_a_replayed_tower_cache_refuses_the_gradients_it_cannot_give(model):
    prompt, images = chat(model), [image(112, 84)]
    cache = model.vision.cache(prompt, images)
    with refused_before_the_backward(model, "vision.image_features.grad is unavailable: this trace replays the tower"):
        with model.trace(prompt, images=images):
            cache.replay()
            features = model.vision.image_features
            with model.logits[0, -1, 5].backward():
                features.grad


def test_discrete_image_codes_refuse_their_gradient(loaded):
    model = loaded("chameleon")
    prompt = f"{model.processor.image_token}What is in this image?"  # the checkpoint has no chat template
    with refused_before_the_backward(model, "vision.image_codes.grad is unavailable: it holds int32 values .* discrete"):
        with model.trace(prompt, images=[image(112, 84)]):
            codes = model.vision.image_codes
            with model.logits[0, -1, 5].backward():
                codes.grad


def test_gradients_under_remote_local_are_the_local_ones(model):
    """remote="local" serializes the trace as a request to NDIF: the gradients come back equal."""
    prompt, images = chat(model), [image(112, 84)]
    found = []
    for remote in (False, "local"):
        with model.trace(prompt, images=images, remote=remote):
            features = model.vision.image_features
            stream = model.layers[1].layer_output
            with model.logits[0, -1, 5].backward(inputs=[features, stream]):
                found.append((features.grad.save(), stream.grad.save()))
    (features, stream), (remote_features, remote_stream) = found
    assert torch.equal(features, remote_features) and torch.equal(stream, remote_stream)
    assert features.abs().sum() > 0


def stream_gradient(model, start: bool):
    """A block's gradient, the gradient started at the token embeddings if ``start``."""
    with model.trace(chat(model), images=[image(112, 84)]):
        if start:
            model.token_embeddings.requires_grad_()
        stream = model.layers[1].layer_output
        with model.logits[0, -1, 5].backward():
            grad = stream.grad.save()
    return grad


def test_a_frozen_model_serves_the_streams_gradients_from_the_token_embeddings_on(model):
    """As an NDIF model actor loads a model (weights frozen): a metric with no gradient is
    refused naming what to do; after ``model.token_embeddings.requires_grad_()`` a block's
    gradient is the unfrozen model's, and the image's values, computed before it, refuse."""
    expected = stream_gradient(model, start=False)
    model._module.zero_grad(set_to_none=True)
    model._module.requires_grad_(False)
    try:
        with refused_before_the_backward(model, r"frozen .* model.token_embeddings.requires_grad_\(\) first"):
            stream_gradient(model, start=False)
        torch.testing.assert_close(stream_gradient(model, start=True), expected)
        with refused_before_the_backward(model, r"vision.image_features.grad is unavailable: .* frozen"):
            with model.trace(chat(model), images=[image(112, 84)]):
                model.token_embeddings.requires_grad_()
                features = model.vision.image_features
                with model.logits[0, -1, 5].backward():
                    features.grad
    finally:
        model._module.requires_grad_(True)


def test_gradients_of_an_offloaded_model_are_the_in_memory_ones(model, tmp_path):
    """The tower on disk (accelerate loads its weights for each forward): its blocks', the
    features' and the text blocks' gradients are the in-memory model's."""
    import warnings

    from vlreg.testing import load
    from vlreg.testing.conformance.trust_scale import _on_disk

    def gradients(loaded):
        found = []
        with loaded.trace(chat(loaded), images=[image(112, 84)]):
            block = loaded.vision.layers[0].layer_output
            features = loaded.vision.image_features
            stream = loaded.layers[1].layer_output
            with loaded.logits[0, -1, 5].backward(inputs=[block, features, stream]):
                found.extend([block.grad.save(), features.grad.save(), stream.grad.save()])
        return found

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # accelerate's note that offloaded weights are on the meta device
        offloaded = load(CHECKPOINT, device=_on_disk(model, "vision"), offload_folder=str(tmp_path))
    assert "disk" in set(offloaded._module.hf_device_map.values())
    for in_memory, on_disk in zip(gradients(model), gradients(offloaded)):
        torch.testing.assert_close(on_disk, in_memory)
