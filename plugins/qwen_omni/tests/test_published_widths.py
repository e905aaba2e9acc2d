"""The omni thinkers at their published widths and full depth, built on the meta device
(no weights): the names, sizes and support table a real checkpoint's thinker gets.

transformers' defaults are not the published thinkers' throughout, so the fields that
differ are written here, from the published checkpoints' configs:

* Qwen/Qwen2.5-Omni-7B: the text defaults are its thinker's (Qwen2-7B's widths); its tower
  is Qwen2.5-VL-7B's, 1280 wide (``Qwen2_5OmniVisionEncoderConfig`` defaults to 3584):
  32 blocks of 16 heads, MLPs 3420 wide, merged to 3584, windows of 112 pixels, full
  attention on blocks 7, 15, 23 and 31;
* Qwen/Qwen3-Omni-30B-A3B-Instruct: its thinker's text model is Qwen3-30B-A3B's (the
  defaults are 28 blocks and a 3584-token vocabulary, no published one): 48 blocks 2048
  wide, 32 query heads of 128 over 4 key/value heads, 128 experts, 8 a token, each 768
  wide, a vocabulary of 152064; its tower is the default (Qwen3-VL's: 27 blocks 1152 wide,
  DeepStack taps after blocks 8, 16, 24), merged to the text model's 2048.
"""

import pytest
import transformers
from transformers import AutoProcessor

from vlreg import StandardizedTransformer
from vlreg.plugin import MoeMlp
from vlreg.testing import build

QWEN2_5_OMNI_7B_VISION = {"hidden_size": 1280, "depth": 32, "num_heads": 16, "intermediate_size": 3420,
                          "out_hidden_size": 3584, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}
QWEN3_OMNI_30B_TEXT = {"hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
                       "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
                       "moe_intermediate_size": 768, "vocab_size": 152064}


@pytest.fixture(scope="module")
def lazy(tmp_path_factory):
    def load(config_class: str, tiny: str, **fields) -> StandardizedTransformer:
        folder = tmp_path_factory.mktemp(config_class)
        getattr(transformers, config_class)(**fields).save_pretrained(folder)
        AutoProcessor.from_pretrained(build(tiny)).save_pretrained(folder)  # nothing is processed on meta
        return StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")

    return load


def test_qwen2_5_omni_7b_thinker(lazy):
    model = lazy("Qwen2_5OmniThinkerConfig", "qwen2_5_omni_thinker", vision_config=QWEN2_5_OMNI_7B_VISION)
    assert not model.dispatched and model.family.name == "qwen_omni"
    assert model.family.entry.operation == "inputs_embeds_masked_scatter_1"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (28, 3584, 28, 4, 128)
    assert model.intermediate_size == 18944 and model.vocab_size == 152064
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (32, 1280, 16, 80)
    assert (vision.intermediate_size, vision.window_size, vision.patch_size) == (3420, 112, 14)
    rows = model.support()
    assert {row for row, why in rows.items() if why} == {"vision.self_attn.attention_scores",
                                                         "vision.self_attn.attention_probabilities",
                                                         "videos", "audio"}  # the claim's refusals


def test_qwen3_omni_30b_a3b_thinker(lazy):
    model = lazy("Qwen3OmniMoeThinkerConfig", "qwen3_omni_moe_thinker", text_config=QWEN3_OMNI_30B_TEXT,
                 vision_config={"out_hidden_size": 2048})
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (48, 2048, 32, 4, 128)
    assert all(isinstance(block.mlp, MoeMlp) for block in model.layers)
    mlp = model.layers[0].mlp
    assert (mlp.num_experts, mlp.top_k, mlp.intermediate_size) == (128, 8, 768) and model.vocab_size == 152064
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size, vision.patch_size) == (
        27, 1152, 16, 4304, 16)
    rows = model.support()
    assert all("not served on this family yet" in rows[f"layers.{k}.deepstack_output"] for k in range(3))
    assert all("feed layers[0] to layers[2] only" in rows[f"layers.{k}.deepstack_output"] for k in (3, 47))
