"""Inkling 2 at transformers' default widths, built on the meta device (no weights).

``Inkling2Config()`` is the class's defaults (Inkling-2-Small's, by its docstring's checkpoint),
read from it: a text model of 48 blocks 4608 wide, 48 query heads over 8 key heads of 128 on
both kinds of block, 384 routed experts 2304 wide, 8 per token; a packed tower of 23 blocks
1024 wide, 16 heads, 20-pixel patches merged 2 x 2, and a merger to the text width."""

import pytest
import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestInkling2(PublishedWidths):
    config = transformers.Inkling2Config
    checkpoint = "inkling2"
    family = "inkling"
    parts = {"text": ("inkling2_text", "vlreg-inkling"), "vision": ("inkling2_vision", "vlreg-inkling")}
    published = {
        "num_layers": 48, "hidden_size": 4608, "num_heads": 48, "num_kv_heads": 8, "head_dim": 128,
        "vision.num_layers": 23, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
        "vision.intermediate_size": 4096, "vision.patch_size": 20, "vision.spatial_merge_size": 2,
        "projector.linear_1.weight.shape": (4096, 4096), "projector.linear_2.weight.shape": (4608, 4096),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL,
               "layers.0.attention_mix": "the first block's attention reads its input as it is",
               "mlp.shared_expert_output": "no shared expert"}
    read_only = ["vision.image_token_mask", "vision.tower_output", "layers.0.block_states"]
    aliases = {"model": {"vision": "model.vision_tower", "projector": "model.vision_tower.merger"}}


@pytest.mark.skipif(not hasattr(transformers, "Inkling2LoopConfig"),
                    reason="inkling2_loop: not in this transformers release (5.24 adds it)")
class TestInkling2Loop(PublishedWidths):
    """``Inkling2LoopConfig()``'s defaults (Inkling-2-Mini's, by its docstring): 24 text blocks
    2304 wide, blocks 6 to 17 looped 3 passes, so 48 block calls (``num_layers``, as
    ``total_num_hidden_layers``), 24 query heads over 8 key heads of 128, 128 routed experts
    1152 wide; Inkling 2's tower, its merger to 2304."""

    config = getattr(transformers, "Inkling2LoopConfig", None)
    checkpoint = "inkling2_loop"
    family = "inkling"
    parts = {"text": ("inkling2_loop_text", "vlreg-inkling"), "vision": ("inkling2_vision", "vlreg-inkling")}
    published = {
        "num_layers": 48, "hidden_size": 2304, "num_heads": 24, "num_kv_heads": 8, "head_dim": 128,
        "layers.6.module_index": 6, "layers.18.module_index": 6, "layers.18.pass_index": 1,
        "layers.47.module_index": 23, "vision.num_layers": 23, "vision.vision_hidden_size": 1024,
        "projector.linear_2.weight.shape": (2304, 4096),
    }
    refused = TestInkling2.refused
    read_only = TestInkling2.read_only
    aliases = TestInkling2.aliases


NO_BLOCKS = "Inkling 1's tower has no blocks"


class TestInkling1(PublishedWidths):
    """``InklingConfig()``'s defaults (thinkingmachines/Inkling's, by its docstring): 66 text
    blocks 6144 wide, 64 query heads of 128 over 16 key heads on the sliding-window blocks and
    8 on the full-attention ones (every sixth), 256 routed experts 3072 wide, 6
    per token, and 2 shared; a tower of 24 folding layers over 40-pixel patches, the last
    projecting to the text's 6144 (its config's ``hidden_size``, 1024, sizes nothing)."""

    config = transformers.InklingConfig
    checkpoint = "inkling_mm_model"
    family = "inkling"
    parts = {"text": ("inkling_text", "vlreg-inkling"), "vision": ("inkling_vision", "vlreg-inkling")}
    published = {
        "num_layers": 66, "hidden_size": 6144, "num_heads": 64, "head_dim": 128,
        "layers.0.self_attn.num_kv_heads": 16, "layers.5.self_attn.num_kv_heads": 8, "layers.0.mlp.num_experts": 256, "vision.num_layers": 0, "vision.vision_hidden_size": 6144,
        "vision.patch_size": 40,
    }
    refused = {"vision.layers": NO_BLOCKS, "vision.patch_embeddings": "embeds no patch whole",
               "audio": "audio is not served"}
