"""Models bigger than the memory they are given: accelerate's offload keeps every value,
edit and the image's features what they are in memory; the largest geometries build on
the meta device with no weights."""

from __future__ import annotations

import warnings

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image

PICTURE = image(112, 84)

#: the tiny Qwen2-VL with its text blocks on disk (as a checkpoint too big for memory
#: leaves some), the rest in memory
ON_DISK = {
    "model.visual": "cpu",
    "model.language_model.embed_tokens": "cpu",
    "model.language_model.layers.0": "disk",
    "model.language_model.layers.1": "disk",
    "model.language_model.norm": "cpu",
    "model.language_model.rotary_emb": "cpu",
    "lm_head": "cpu",
}


def run(model):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        features = model.vision.image_features.save()
        pattern = model.layers[0].self_attn.attention_probabilities.save()
        model.layers[0].mlp.mlp_output[:] = 0
        out = model.layers[1].layer_output.save()
        logits = model.logits.save()
    return [features, pattern, out, logits]


@pytest.fixture(scope="module")
def in_memory():
    return run(StandardizedTransformer(str(build("qwen2_vl")), task="image-text-to-text", dispatch=True,
                                       attn_implementation="eager", device="cpu"))


#: the tower on disk, named first (the map's first device is where transformers' pipeline
#: runs inputs); then the first parameter offloaded (the model's first parameter is on meta)
TOWER_FIRST = {"model.visual": "disk", "model.language_model": "cpu", "lm_head": "cpu"}
FIRST_PARAMETER = {"model.visual.patch_embed": "disk", "model.visual.rotary_pos_emb": "cpu", "model.visual.blocks": "cpu",
                   "model.visual.merger": "cpu", "model.language_model": "cpu", "lm_head": "cpu"}


@pytest.mark.parametrize("placement", ["device_map", "max_memory", "tower first", "first parameter"])
def test_an_offloaded_model_serves_and_edits_what_it_does_in_memory(in_memory, placement, tmp_path):
    maps = {"device_map": ON_DISK, "tower first": TOWER_FIRST, "first parameter": FIRST_PARAMETER}
    options = ({"device_map": "auto", "max_memory": {"cpu": "300KB"}} if placement == "max_memory"
               else {"device_map": maps[placement]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StandardizedTransformer(str(build("qwen2_vl")), task="image-text-to-text", dispatch=True,
                                        attn_implementation="eager", offload_folder=str(tmp_path), **options)
    assert "disk" in set(model._module.hf_device_map.values())
    for offloaded, expected in zip(run(model), in_memory):
        assert torch.equal(offloaded, expected)


def test_a_map_with_every_module_on_disk_is_refused_saying_what_to_map(tmp_path):
    with pytest.raises(ValueError, match="puts every module on disk, .* map one module to 'cpu'"):
        StandardizedTransformer(str(build("qwen2_vl")), task="image-text-to-text", dispatch=True,
                                device_map={"": "disk"}, offload_folder=str(tmp_path))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: a load onto it works")
@pytest.mark.parametrize("where", [{"device": "cuda"}, {"device_map": {"": 0}}, {"device_map": "cuda:1"}])
def test_a_gpu_where_torch_sees_none_is_refused_saying_load_on_the_cpu(where):
    """transformers fails deep in the load ("Found no NVIDIA driver"), which nnsight wraps in
    every model class's traceback; a lazy build (remote use) places nothing and is taken."""
    with pytest.raises(ValueError, match=r"puts weights on a GPU, and torch sees none here .*device='cpu'"):
        StandardizedTransformer(str(build("qwen2_vl")), task="image-text-to-text", dispatch=True, **where)
    StandardizedTransformer(str(build("qwen2_vl")), task="image-text-to-text", **where)


def test_the_largest_qwen_geometries_build_on_meta_with_no_weights(tmp_path):
    """Qwen2-VL-72B's and Qwen2.5-VL-72B's widths and depths (80 text blocks 8192 wide,
    64 heads over 8; a 32-block tower), built on the meta device."""
    import transformers
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(build("qwen2_vl"))
    text = {"hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80, "num_attention_heads": 64,
            "num_key_value_heads": 8, "vocab_size": 152064}
    for name, vision in (("Qwen2VLConfig", {"embed_dim": 1280, "depth": 32, "hidden_size": 8192}),
                         ("Qwen2_5_VLConfig", {"hidden_size": 1280, "depth": 32, "out_hidden_size": 8192})):
        folder = tmp_path / name
        getattr(transformers, name)(text_config=text, vision_config=vision).save_pretrained(folder)
        processor.save_pretrained(folder)
        model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False)
        assert not model.dispatched and model.embed_tokens.weight.device.type == "meta"
        assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads) == (80, 8192, 64, 8)
        assert model.vision.num_layers == 32 and model.vision.vision_hidden_size == 1280


def drop_rates(depth: int) -> list:
    """What timm's models do while they are built: read values off a fresh tensor."""
    return torch.linspace(0, 0.1, depth, device="cpu").tolist()


class ReadsValues:
    """An envoy class naming `drop_rates` as read for real during a lazy build."""

    built_for_real = (f"{__name__}.drop_rates", f"{__name__}.no_such_function")


def test_a_lazy_build_runs_the_functions_envoys_name_on_real_tensors():
    """nnsight's meta build puts every tensor on meta, so a constructor reading one's value
    fails there; `built_for_real` runs the functions the family's envoy classes name for
    real (a name the module lacks is left alone), only during the build."""
    from nnsight.modeling.mixins.meta import MetaDevice

    from vlreg.core.loading import built_for_real

    this = __import__(__name__, fromlist=["drop_rates"])
    with MetaDevice():
        with pytest.raises(Exception, match="meta"):
            drop_rates(3)
        with built_for_real([ReadsValues, torch.nn.Linear]):
            assert this.drop_rates(3) == pytest.approx([0.0, 0.05, 0.1])
            assert torch.empty(2).device.type == "meta"
        with pytest.raises(Exception, match="meta"):
            this.drop_rates(3)
    assert this.drop_rates is drop_rates
