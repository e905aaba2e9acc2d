"""Qwen3-VL-4B-Instruct's real geometry (widths, token ids, template) at reduced depth,
its DeepStack taps moved inside the reduced tower."""

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.testing import build, forget, shared_checkpoint
from vlreg.testing.conformance import image

SOURCE = shared_checkpoint("Qwen3-VL-4B-Instruct")
pytestmark = pytest.mark.skipif(
    SOURCE is None,
    reason="../shared/checkpoints/Qwen3-VL-4B-Instruct is absent: the real checkpoints' metadata "
    "lives beside the repository, not in it",
)


@pytest.fixture(scope="module")
def model():
    path = build("qwen3_vl", source=str(SOURCE))
    yield StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True, attn_implementation="eager", device="cpu")
    forget(path)


def test_the_real_sizes_and_the_taps_kept_inside_the_reduced_tower(model):
    assert (model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (2560, 32, 8, 128)
    vision = model.vision
    assert (vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.patch_size) == (1024, 16, 64, 16)
    assert vision.deepstack_visual_indexes == (0, 1, 2) and vision.num_layers == model.num_layers == 3
    assert model.embed_tokens.weight is model.lm_head.weight


def test_a_448_image_through_the_real_template_is_196_tokens_with_deepstack(model):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt.startswith("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>")
    rows = []
    with model.trace(prompt, images=[image(448, 448)]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        positions = model.vision.position_embeddings.save()
        first_tower = model.vision.layers[0].input.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
        for k in range(3):
            rows.append((model.layers[k].layer_output.save(), model.layers[k].deepstack_output.save(),
                         model.layers[k + 1].input.save() if k < 2 else model.norm.input.save()))
    assert int(mask.sum()) == 196 and patches.shape == (1, 784, 1024)
    assert torch.equal(first_tower, (patches + positions)[0])
    assert torch.equal(first[mask], features) and features.shape == (196, 2560)
    for out, added, after in rows:
        assert added.shape == (196, 2560)
        assert torch.equal(after[mask], out[mask] + added)

