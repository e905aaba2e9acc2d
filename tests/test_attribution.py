"""`vlreg.analysis.attribution_patching` against the first-order formula computed by hand,
with plain torch hooks on the native decoder layers, on three families; AtP*'s keys and
queries against the pattern recomputed by hand."""

import pytest
import torch

from vlreg import Unavailable, analysis
from vlreg.testing import chat
from vlreg.testing.conformance import image


def by_hand(model, prompt, clean, corrupt, token):
    """``(corrupt - clean) . d logit / d output`` at every token of every decoder layer, by
    forward hooks on the native layers and ``retain_grad``."""
    layers = [block._module for block in model.layers]
    outputs: list = []

    def keep(module, inputs, output):
        stream = output[0] if isinstance(output, tuple) else output
        if stream.requires_grad:
            stream.retain_grad()
        outputs.append(stream)

    handles = [layer.register_forward_hook(keep) for layer in layers]
    try:
        with torch.no_grad():
            model._module(**model.processor(text=prompt, images=corrupt, return_tensors="pt"))
        corrupted, outputs[:] = outputs[:], []
        model._module(**model.processor(text=prompt, images=clean, return_tensors="pt")).logits[0, -1, token].backward()
    finally:
        for handle in handles:
            handle.remove()
        model._module.zero_grad(set_to_none=True)
    return torch.stack([((bad - good) * good.grad).sum(-1)[0] for bad, good in zip(corrupted, outputs)])


@pytest.mark.parametrize("family", ["qwen2_vl", "llava_interleave", "gemma3"])
def test_attribution_patching_is_the_first_order_formula_by_hand(loaded, family):
    model = loaded(family)
    prompt, clean, corrupt = chat(model), [image(112, 84, seed=1)], [image(112, 84, seed=2)]
    found = analysis.attribution_patching(model, prompt, clean, corrupt, target=5)
    torch.testing.assert_close(found.effects["layer_output"], by_hand(model, prompt, clean, corrupt, 5))
    assert found.of_image(0).shape == (model.num_layers, found.geometry[0].tokens)
    assert all(parameter.grad is None for parameter in model._module.parameters())


def test_atp_keys_and_queries_are_the_pattern_recomputed_by_hand(loaded):
    model = loaded("qwen2_vl")
    prompt, clean, corrupt = chat(model), [image(112, 84, seed=1)], [image(112, 84, seed=2)]
    found = analysis.attribution_patching(model, prompt, clean, corrupt, target=5, layers=[1])
    attention = model.layers[1].self_attn
    runs = []
    for images in (clean, corrupt):
        with model.trace(prompt, images=images):
            q, k = attention.attention_queries.save(), attention.attention_keys.save()
            scores, pattern = attention.attention_scores.save(), attention.attention_probabilities
            with model.logits[0, -1, 5].backward():
                grad = pattern.grad.save()
        runs.append((q[0], k[0].repeat_interleave(q.shape[1] // k.shape[1], 0), scores[0], grad[0]))
    (q, k, scores, grad), (q2, k2, _, _) = runs
    scale = attention._module.scaling
    for t in (3, 20, scores.shape[-1] - 1):
        moved = scores.clone()
        moved[:, :, t] = scores[:, :, t] + scale * (q @ (k2[:, t] - k[:, t]).unsqueeze(-1)).squeeze(-1)
        key = (grad * (moved.softmax(-1) - scores.softmax(-1))).sum((1, 2))
        moved = scores.clone()
        moved[:, t] = scores[:, t] + scale * (k @ (q2[:, t] - q[:, t]).unsqueeze(-1)).squeeze(-1)
        query = (grad * (moved.softmax(-1) - scores.softmax(-1))).sum((1, 2))
        torch.testing.assert_close(found.keys[0, :, t], key, atol=1e-6, rtol=1e-4)
        torch.testing.assert_close(found.queries[0, :, t], query, atol=1e-6, rtol=1e-4)


def test_atp_keys_are_refused_where_the_pattern_is_not_served(loaded):
    model = loaded("qwen2_vl", attn_implementation="sdpa")
    prompt, clean, corrupt = chat(model), [image(112, 84, seed=1)], [image(112, 84, seed=2)]
    with pytest.raises(Unavailable, match="keys and queries .AtP\\*. are unavailable: the attention runs as 'sdpa'"):
        analysis.attribution_patching(model, prompt, clean, corrupt, attention=True)
    found = analysis.attribution_patching(model, prompt, clean, corrupt)
    assert found.keys is None and found.effects["layer_output"].shape[0] == model.num_layers
