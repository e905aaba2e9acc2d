"""The real-geometry tier: llava-interleave-qwen-0.5b's config, tokenizer, processor and
chat template from ``../shared/checkpoints``, random weights at reduced depth.

This is where the spec's llava-interleave example runs with its printed figures. A fresh
clone has no ``../shared``: every test here then skips, saying so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer, Unavailable
from vlreg.plugin import Scatter
from vlreg.testing import build, forget, shared_checkpoint

pytestmark = pytest.mark.heavy  # a real geometry built: started first under make test

INTERLEAVE = "llava-interleave-qwen-0.5b-hf"
NEXT_MISTRAL = "llava-v1.6-mistral-7b-hf"


def shared(name: str):
    folder = shared_checkpoint(name)
    if folder is None:
        pytest.skip(
            f"../shared/checkpoints/{name} is absent (a fresh clone has no ../shared): "
            "this test needs that real checkpoint's metadata"
        )
    return folder


@pytest.fixture(scope="module")
def path():
    """The real geometry at 2 text and 2 tower blocks, bfloat16, built once, removed after."""
    folder = build("llava_interleave", source=shared(INTERLEAVE))
    yield str(folder)
    forget(folder)


@pytest.fixture(scope="module")
def model(path):
    return StandardizedTransformer(path, task="image-text-to-text", dispatch=True, attn_implementation="eager", device="cpu")


def spec_image() -> Image.Image:
    return Image.fromarray((np.random.RandomState(0).rand(64, 64, 3) * 255).astype("uint8"))


def spec_prompt(model: StandardizedTransformer) -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def test_spec_example(model):
    """vision.txt's llava-interleave example, its figures at reduced depth."""
    assert model.family.name == "llava" and type(model._module).__name__ == "LlavaForConditionalGeneration"
    assert model.family.parts["text"].model_type == "qwen2"
    assert model._aliases == {
        "embed_tokens": "model.language_model.embed_tokens",
        "layers": "model.language_model.layers",
        "norm": "model.language_model.norm",
        "vision": "model.vision_tower",
        "projector": "model.multi_modal_projector",
    }
    assert model.vision._aliases == {
        "patch_embed": "embeddings.patch_embedding", "layers": "encoder.layers", "norm": "post_layernorm",
    }
    assert model.vision.layers[0]._aliases == {"input_layernorm": "layer_norm1", "post_attention_layernorm": "layer_norm2"}
    figures = (model.vision.num_layers, model.vision.vision_hidden_size, model.vision.patch_size,
               model.num_layers, model.hidden_size)
    assert figures == (2, 1152, 14, 2, 1024)
    entry = model.family.entry
    assert entry == Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)
    location = type(model.vision).image_features.location(model.vision)
    assert location == "model.model.source.inputs_embeds_masked_scatter_0.input"
    assert entry.host == "model" and entry.host_envoy(model) is model.model
    assert entry.call(model) == ("model.source.inputs_embeds_masked_scatter_0", 1)

    with model.trace(spec_prompt(model), images=[spec_image()]):
        mask = model.vision.image_token_mask.save()
        tower = model.vision.tower_output.save()
        proj = model.projector.output.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    shapes = (tuple(mask.shape), int(mask.sum()), tuple(tower.shape), tuple(proj.shape), tuple(features.shape))
    assert shapes == ((1, 744), 729, (1, 729, 1152), (1, 729, 1024), (729, 1024))
    assert torch.equal(first[mask], features)


def test_full_depth_figures_on_a_lazy_build():
    """The real config, unreduced, built on the meta device (no weights needed): the
    spec's figures exactly."""
    lazy = StandardizedTransformer(str(shared(INTERLEAVE)), task="image-text-to-text", attn_implementation="eager")
    assert not lazy.dispatched
    figures = (lazy.vision.num_layers, lazy.vision.vision_hidden_size, lazy.vision.patch_size,
               lazy.num_layers, lazy.hidden_size)
    assert figures == (26, 1152, 14, 24, 1024)
    assert lazy.vision.image_size == 384


def test_llava_next_mistral_7b_config_binds_the_same_names():
    """The real LLaVA-NeXT Mistral 7B config, on the meta device. The shared folder holds
    the config only; nnsight's lazy build needs a processor, which the tiny NeXT
    checkpoint lends (it plays no part in the names or sizes)."""
    lazy = StandardizedTransformer(
        str(shared(NEXT_MISTRAL)), task="image-text-to-text", processor=str(build("llava_next")),
    )
    assert type(lazy._module).__name__ == "LlavaNextForConditionalGeneration"
    assert lazy.family.parts["text"].model_type == "mistral"
    assert lazy.family.parts["vision"].model_type == "clip_vision_model"
    assert "norm" not in lazy.vision._aliases
    figures = (lazy.vision.num_layers, lazy.vision.vision_hidden_size, lazy.vision.patch_size,
               lazy.vision.image_size, lazy.num_layers, lazy.hidden_size, lazy.num_kv_heads)
    assert figures == (24, 1024, 14, 336, 32, 4096, 8)


def test_projector_reads_the_last_block_before_post_layernorm(model):
    with model.trace(spec_prompt(model), images=[spec_image()]):
        last = model.vision.layers[-1].layer_output.save()
        tower = model.vision.tower_output.save()
        fed = model.projector.input.save()
    assert torch.equal(fed, last)
    torch.testing.assert_close(tower, model.vision.norm._module(last))
    assert not torch.equal(fed, tower)


def test_zeroing_the_features_changes_the_logits(model):
    prompt, images = spec_prompt(model), [spec_image()]
    with model.trace(prompt, images=images):
        plain = model.logits.save()
    with model.trace(prompt, images=images):
        model.vision.image_features[:] = 0
        ablated = model.logits.save()
    assert not torch.equal(plain, ablated)


def test_text_only_load(path):
    """vision.txt's text-only load: the wrapper, a warning, no processor, no vision rows,
    and text values on a text prompt."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text_only = StandardizedTransformer(path, dispatch=True, device="cpu")
    assert any("task='image-text-to-text'" in str(w.message) for w in caught)
    assert type(text_only._module).__name__ == "LlavaForConditionalGeneration"
    assert text_only.processor is None
    assert text_only.vision.no_images() == (
        "a text-only load: no processor, so no image reaches the model; load with task='image-text-to-text'"
    )
    assert [name for name in text_only.support() if name.startswith("vision")] == []
    with pytest.raises(Unavailable, match="no processor"):
        with text_only.trace("The capital of France is"):
            text_only.vision.tower_output.save()
    with text_only.trace("The capital of France is"):
        out = text_only.layers[-1].layer_output.save()
        logits = text_only.logits.save()
    ids = text_only.tokenizer("The capital of France is", return_tensors="pt")["input_ids"]
    assert tuple(out.shape) == (1, ids.shape[1], 1024)
    assert tuple(logits.shape) == (1, ids.shape[1], text_only.vocab_size)


CONVERSATIONS = [
    [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}],
    [{"role": "user", "content": [{"type": "text", "text": "Compare them."}, {"type": "image"}, {"type": "image"}]}],
    [
        {"role": "system", "content": [{"type": "text", "text": "You are a helpful assistant."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the picture."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A red square."}]},
        {"role": "user", "content": [{"type": "text", "text": "And the circle?"}, {"type": "text", "text": "Briefly."}]},
    ],
]


@pytest.mark.parametrize("generation", [True, False])
@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_tiny_interleave_template_gives_the_real_prompts(messages, generation):
    from transformers import AutoProcessor

    real = AutoProcessor.from_pretrained(shared(INTERLEAVE))
    tiny = AutoProcessor.from_pretrained(build("llava_interleave"))
    options = {"add_generation_prompt": generation, "tokenize": False}
    assert tiny.apply_chat_template(messages, **options) == real.apply_chat_template(messages, **options)
