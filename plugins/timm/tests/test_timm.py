"""vlreg-timm's tower as other plugins and the host see it: the adapter ``"timm_tower"``,
keys that name no timm class, and lazy builds of timm towers."""

import pytest
import torch
from transformers import TimmWrapperModel

from vlreg import StandardizedTransformer
from vlreg.plugin import VisionLayer, adapter
from vlreg.testing import build
from vlreg.testing.conformance import image
from vlreg_timm.vision import TimmAttention, TimmMlp, TimmVision


def test_the_adapter_is_published_and_names_vit_blocks_by_native_path():
    tower = adapter("timm_tower")
    assert tower.rename["timm_model.blocks"] == "layers" and tower.rename["timm_model.stem"] == "patch_embed"
    envoys = tower.envoys(TimmWrapperModel)
    assert envoys[TimmWrapperModel] is TimmVision is tower.vision
    assert envoys["timm_model.blocks.*"] is VisionLayer
    assert envoys["timm_model.blocks.*.attn"] is TimmAttention and envoys["timm_model.blocks.*.mlp"] is TimmMlp


def test_no_key_names_a_timm_class():
    """A remote request carries the envoys map; a timm class in it would need timm to unpickle."""
    keys = adapter("timm_tower").envoys(TimmWrapperModel)
    assert not any(isinstance(key, type) and key.__module__.startswith("timm") for key in keys)


@pytest.mark.parametrize("name", ["perception_lm", "fast_vlm"])
def test_timm_towers_build_lazily_and_dispatch_to_the_same_values(name):
    """timm reads its drop-path rates off a tensor while it builds; that runs on real
    tensors (`TimmVision.built_for_real`), and the rest of the build stays on meta."""
    path = str(build(name))
    lazy = StandardizedTransformer(path, task="image-text-to-text", dispatch=False, device="cpu")
    assert not lazy.dispatched and lazy.vision.timm_model._module.num_features > 0
    assert {parameter.device.type for parameter in lazy.vision._module.parameters()} == {"meta"}
    eager = StandardizedTransformer(path, task="image-text-to-text", dispatch=True, device="cpu")
    assert lazy._aliases == eager._aliases
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]}]
    prompt = eager.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    found = []
    for model in (lazy, eager):
        with model.trace(prompt, images=[image(64, 48)]):
            found.append(model.vision.image_features.save())
    assert lazy.dispatched and torch.equal(*found)
