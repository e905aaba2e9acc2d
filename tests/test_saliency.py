"""`vlreg.analysis.saliency` and `integrated_gradients`: gradient x input against plain
torch on the transformers model, integrated gradients' completeness (the attributions add
up to the metric's change from the baseline), and every refusal, before the model runs."""

import pytest
import torch

from vlreg import analysis
from vlreg.testing import chat
from vlreg.testing.conformance import image
from vlreg.testing.conformance.helpers import refused_before_running

PICTURE, OTHER = image(112, 84), image(112, 84, seed=7)


def by_hand(model, prompt, picture, token):
    """Gradient x input of the ``token`` logit at the last position, by plain torch: the
    features at the merger's output (a forward hook) and at the pixels (a float tensor the
    processor takes, as the helper hands it)."""
    kept = []

    def keep(module, inputs, output):
        output.retain_grad()
        kept.append(output)

    pixels = torch.from_numpy(__import__("numpy").asarray(picture)).float().permute(2, 0, 1).requires_grad_()
    handle = model._module.model.visual.merger.register_forward_hook(keep)
    try:
        inputs = model.processor(text=prompt, images=[pixels], return_tensors="pt")
        model._module(**inputs).logits[0, -1, token].backward()
    finally:
        handle.remove()
        model._module.zero_grad(set_to_none=True)
    (features,) = kept
    return (features * features.grad).sum(-1).detach(), (pixels * pixels.grad).sum(0).detach()


def test_saliency_is_gradient_times_input_at_the_tokens_and_the_pixels(loaded):
    model = loaded("qwen2_vl")
    prompt = chat(model)
    found = analysis.saliency(model, prompt, [PICTURE], target=5)
    tokens, pixels = by_hand(model, prompt, PICTURE, 5)
    torch.testing.assert_close(found.tokens[0], tokens)
    torch.testing.assert_close(found.pixels[0], pixels)
    assert found.pixels[0].shape == (84, 112)  # the picture as given, before the processor's resize
    assert found.per_token(0).shape == (found.geometry[0].tokens,)
    assert all(parameter.grad is None for parameter in model._module.parameters())


@pytest.mark.parametrize("name", ["qwen2_vl", "llava_interleave"])
@pytest.mark.parametrize("at, baseline", [("pixels", "black"), ("tokens", [OTHER])])
def test_integrated_gradients_add_up_to_the_metrics_change(loaded, name, at, baseline):
    """Completeness: the attributions' sum is f(input) - f(baseline), up to the midpoint
    rule's remainder, which shrinks as the steps grow. (From zero features the metric jumps
    where the text model normalizes them: another image's features are the baseline there.)"""
    model = loaded(name)
    coarse, fine = (analysis.integrated_gradients(model, chat(model), [PICTURE], at=at, baseline=baseline, steps=steps,
                                                  batch=8, target=5) for steps in (4, 16))
    change = fine.metric - fine.baseline_metric
    assert abs(change) > 1e-3
    total = float(sum(each.sum() for each in fine.attributions))
    assert abs(total - change) == pytest.approx(abs(fine.completeness))
    assert abs(fine.completeness) <= 0.02 * abs(change)
    assert abs(fine.completeness) < abs(coarse.completeness)
    assert fine.attributions[0].shape == ((84, 112) if at == "pixels" else (fine.geometry[0].tokens,))


@pytest.mark.parametrize("name, reason", [
    ("chameleon", "unavailable: this family reads the image as discrete codes"),
    ("video_llava", "unavailable: this family's image processor is no torchvision one"),
])
def test_pixel_gradients_are_refused_where_none_reach_the_picture(loaded, name, reason):
    model = loaded(name)
    prompt = f"{model.processor.image_token}What is in this image?"  # Chameleon's checkpoint has no chat template
    with refused_before_running(model, reason):
        analysis.saliency(model, prompt, [PICTURE])
    with refused_before_running(model, reason):
        analysis.integrated_gradients(model, prompt, [PICTURE])
    assert analysis.saliency(model, prompt, [PICTURE], pixels=False).pixels is None


@pytest.mark.parametrize("options, message", [
    ({"at": "patches"}, "at is 'pixels' or 'tokens', not 'patches'"),
    ({"baseline": "grey"}, "a pixel baseline is 'black', 'blur' or images as given, not 'grey'"),
    ({"baseline": [image(56, 56)]}, "a baseline image must have the size of the image it stands for"),
    ({"at": "tokens", "baseline": "grey"}, "a token baseline is 'zero', a tensor or images, not 'grey'"),
    ({"at": "tokens", "baseline": torch.zeros(3)}, "a token baseline is"),
    ({"steps": 1024}, "with 1024 steps, the path from this baseline passes an image whose pixels are all at most 1"),
])
def test_integrated_gradients_refuse_bad_options_before_the_model_runs(loaded, options, message):
    model = loaded("qwen2_vl")
    ran = []
    handle = model._module.register_forward_pre_hook(lambda *args: ran.append(True))
    try:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            analysis.integrated_gradients(model, chat(model), [PICTURE], **options)
    finally:
        handle.remove()
    assert not ran, "the model ran before the refusal"


def relevancy_by_hand(model, prompt, picture, token):
    """Chefer et al.'s rule with plain torch: forward hooks on the native attention modules
    keep their eager patterns (their second output), autograd gives their gradients."""
    kept = []

    def keep(module, inputs, output):
        kept.append(output[1])

    handles = [layer.self_attn.register_forward_hook(keep) for layer in model._module.model.language_model.layers]
    try:
        logits = model._module(**model.processor(text=prompt, images=[picture], return_tensors="pt")).logits
        grads = torch.autograd.grad(logits[0, -1, token], kept)
    finally:
        for handle in handles:
            handle.remove()
    relevance = torch.eye(kept[0].shape[-1])
    for pattern, grad in zip(kept, grads):
        relevance = relevance + (pattern[0] * grad[0]).clamp(min=0).mean(0).detach() @ relevance
    return relevance[-1]


def test_relevancy_is_chefers_rule_by_hand(loaded):
    model = loaded("qwen2_vl")
    prompt = chat(model)
    found = analysis.relevancy(model, prompt, [PICTURE], target=5)
    expected = relevancy_by_hand(model, prompt, PICTURE, 5)
    torch.testing.assert_close(found.sequence, expected)
    torch.testing.assert_close(found.tokens[0], expected[found.geometry[0].positions])
    assert found.layers == tuple(range(model.num_layers)) and found.target == 5


def test_relevancy_is_refused_where_the_pattern_is_not_formed(loaded):
    model = loaded("qwen2_vl", attn_implementation="sdpa")
    with refused_before_running(model, "relevancy is unavailable: it weighs the attention pattern"):
        analysis.relevancy(model, chat(model), [PICTURE])
