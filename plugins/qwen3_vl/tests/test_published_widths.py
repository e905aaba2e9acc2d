"""Qwen3.5, Qwen3.5-MoE, Qwen3-VL-MoE (and Cosmos3 Omni, below) at their published widths and full depth, built
on the meta device from transformers' default configs (no weights): the names, sizes and
support table a real checkpoint of each gets."""

import pytest
import transformers
from transformers import AutoProcessor

from vlreg import StandardizedTransformer
from vlreg.testing import build


@pytest.fixture(scope="module")
def lazy(tmp_path_factory):
    processor = AutoProcessor.from_pretrained(build("qwen3_5"))  # the tiny one: nothing is processed on meta

    def load(config: "str | transformers.PretrainedConfig") -> StandardizedTransformer:
        """A lazy load of ``config`` (a config class's name: its defaults)."""
        config = getattr(transformers, config)() if isinstance(config, str) else config
        folder = tmp_path_factory.mktemp(config.model_type)
        config.save_pretrained(folder)
        processor.save_pretrained(folder)
        return StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")

    return load


def test_qwen3_5_every_fourth_block_attends_and_the_rest_are_linear(lazy):
    model = lazy("Qwen3_5Config")
    assert not model.dispatched and model.num_layers == 32
    assert (model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (4096, 16, 4, 256)
    full = ",".join(str(i) for i in range(3, 32, 4))  # 3,7,...,31
    linear = ",".join(f"{i}-{i + 2}" for i in range(0, 32, 4))  # 0-2,4-6,...,28-30
    rows = model.support()
    assert rows[f"layers.{full}.self_attn.attention_probabilities"] is None
    assert rows[f"layers.{linear}.linear_attn.decays"] is None
    mixer = model.layers[0].linear_attn
    assert (mixer.num_key_heads, mixer.num_value_heads, mixer.key_head_dim, mixer.value_head_dim) == (16, 32, 128, 128)
    assert "this tower has no DeepStack taps" in rows["vision.deepstack_features"]


def test_qwen3_5_moe_routes_to_8_of_256_experts_beside_a_shared_one(lazy):
    model = lazy("Qwen3_5MoeConfig")
    assert model.num_layers == 40
    mlp = model.layers[0].mlp
    assert (mlp.num_experts, mlp.top_k, mlp.intermediate_size) == (256, 8, 512)
    assert model.support()["mlp.shared_expert_output"] is None


def test_qwen3_vl_moe_routes_and_stacks(lazy):
    model = lazy("Qwen3VLMoeConfig")
    mlp = model.layers[0].mlp
    assert (mlp.num_experts, mlp.top_k, mlp.intermediate_size) == (60, 4, 1408)
    assert model.vision.deepstack_visual_indexes == (8, 16, 24)
    rows = model.support()
    assert rows["layers.2.deepstack_output"] is None and "layers[0] to layers[2]" in rows["layers.3.deepstack_output"]
    assert "no shared expert" in rows["mlp.shared_expert_output"]


def test_cosmos3_omni_at_transformers_default_widths(lazy):
    """No Cosmos3 checkpoint's config is at hand here (no hub), so this is transformers'
    default Cosmos3OmniConfig (its docstring names nvidia/Cosmos3-Nano) with the merger's
    output set to the text width (the default's 3584 feeds no 4096-wide text model): the
    sizes read off the modules and the DeepStack taps at tower blocks 8, 16 and 24."""
    config = transformers.Cosmos3OmniConfig()
    config.vision_config.out_hidden_size = config.text_config.hidden_size
    model = lazy(config)
    assert not model.dispatched and model.family.name == "qwen3_vl"
    assert type(model._module).__name__ == "Cosmos3OmniForConditionalGeneration"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (32, 4096, 32, 32, 128)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.patch_size) == (27, 1152, 16, 16)
    assert vision.deepstack_visual_indexes == (8, 16, 24)
    rows = model.support()
    assert rows["layers.2.deepstack_output"] is None and "layers[0] to layers[2]" in rows["layers.3.deepstack_output"]
    assert model.projector.linear_fc2.weight.shape[0] == 4096


def test_qwen4_exp_at_transformers_default_widths(lazy):
    """transformers' default Qwen4ExpConfig (its docstring names Qwen/Qwen4-Exp), with the five
    indexer fields it leaves unset and its attention needs to build set (their published values
    are not at hand here; they change no width below) and the merger's output set to the text
    width: four hyper-connection streams, every fourth block indexed, 10 of 512 experts."""
    config = transformers.Qwen4ExpConfig()
    text = config.text_config
    text.indexer_n_heads, text.indexer_kv_heads, text.indexer_head_dim = 4, 1, 256
    text.indexer_budget, text.indexer_compress_ratio = 2048, 64
    config.vision_config.out_hidden_size = text.hidden_size
    model = lazy(config)
    assert not model.dispatched and model.family.name == "qwen3_vl" and "norm" not in model.__dict__
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (40, 2048, 16, 2, 256)
    assert model.layers[0].num_streams == 4 and model.layers[0].streams_layout == "packed"
    mlp = model.layers[0].mlp
    assert (mlp.num_experts, mlp.top_k, mlp.intermediate_size) == (512, 10, 512)
    rows = model.support()
    indexed = ",".join(str(i) for i in range(3, 40, 4))
    assert rows[f"layers.{indexed}.self_attn.selected_token_mask"] is None
    assert "adds no n-gram embeddings" in rows["per_layer_output"]  # no ple_layer_ids by default
