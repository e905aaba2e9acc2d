"""Llama 4 against the conformance suite the core ships, on a bfloat16 load (the
processor hands the tower bfloat16 pixels). The default image (112 x 84) is cut into
2 x 2 tiles and a global image, so every test runs through the tiles."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance
from vlreg.testing.conformance.helpers import attention_blocks


class TestLlama4(AnalysisConformance, ExpertsConformance, VisionConformance):
    checkpoint = "llama4"
    load_options = {"dtype": torch.bfloat16}
    native = {
        "layers": "language_model.model.layers",
        "embed_tokens": "language_model.model.embed_tokens",
        "norm": "language_model.model.norm",
        "lm_head": "language_model.lm_head",
        "vision": "vision_model",
        "vision.layers": "vision_model.model.layers",
        "vision.patch_embed": "vision_model.patch_embedding",
        "vision.layers.0.self_attn": "vision_model.model.layers.0.self_attn",
        "projector": "multi_modal_projector",
        "layers.0.mlp": "language_model.model.layers.0.feed_forward",
        "layers.1.mlp.router": "language_model.model.layers.1.feed_forward.router",
    }
    unavailable = {"layers.1,3.mlp.expert_outputs": "no slot's output is held apart"}
    renormalized = False  # a sigmoid of each chosen logit
    down_proj_transposed = True

    def test_sizes_agree_with_the_weights(self, model):
        """The suite's, but a dense block's MLP is ``intermediate_size_mlp`` wide and an
        expert ``intermediate_size`` (the model's), as on Llama 4 Maverick."""
        text = model._module.config.text_config
        dense = [block for block in model.layers if not block._module.is_moe_layer]
        assert dense and all(block.mlp.intermediate_size == text.intermediate_size_mlp for block in dense)
        with pytest.raises(Unavailable, match="differ"):  # dense blocks and experts: no one width
            model.intermediate_size
        for block in model.layers:
            if block._module.is_moe_layer:
                assert block.mlp.intermediate_size == text.intermediate_size
                assert block.mlp.shared_expert.down_proj.weight.shape[1] == text.intermediate_size
        attention = attention_blocks(model)[0].self_attn
        assert attention.o_proj.weight.shape[1] == model.num_heads * model.head_dim
        assert (attention.num_heads, attention.num_kv_heads, attention.head_dim) == (4, 2, 16)
