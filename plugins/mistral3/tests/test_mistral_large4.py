"""Mistral Large 4: Mistral 3's wrapper and Pixtral tower over latent attention whose keys
and values later blocks share, a DSA indexer refused by name, and softmax group routing;
against the conformance suites, and at the published widths on meta (Mistral-Large-4: 72
blocks 6144 wide, 64 heads with values of 128, 128 experts choosing 4; a 30-block Pixtral
tower 2048 wide with 14-pixel patches merged 2 x 2)."""

from __future__ import annotations

import pytest
import torch
from transformers import MistralLarge4Config

from vlreg import StandardizedTransformer, Unavailable
from vlreg.analysis import skip_layers
from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, PublishedWidths, VisionConformance, image
from vlreg.testing.conformance.native import PIXTRAL, composite
from vlreg.testing import chat

#: What vlreg does not serve on the tiny checkpoint, each with a fragment of its reason.
INDEXER = {f"self_attn.{name}": "no standard names for a sparse-attention indexer"
           for name in ("indexer_scores", "selected_keys", "sparse_attention_mask")}


class TestMistralLarge4(ExpertsConformance, AnalysisConformance, VisionConformance):
    checkpoint = "mistral_large4"
    native = composite(PIXTRAL) | {
        "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate",
        "layers.0.self_attn.kv_a_layernorm": "model.language_model.layers.0.self_attn.kv_a_layernorm",
    }
    unavailable = {"self_attn.query_latents": "q_lora_rank is None", "layers.1.self_attn.kv_latents": "reuses block 0's"}
    renormalized = False  # softmax scores within the best groups, renormalized and scaled (SoftmaxGroupRoutedMoe.route)
    image_sizes = ((112, 84), (64, 128))

    def test_the_indexer_and_reused_latents_are_refused_by_name(self, model):
        rows = model.support()
        for row, fragment in INDEXER.items():
            assert fragment in rows[row], row
        assert "reuses block 0's" in rows["layers.1.self_attn.kv_latents"]
        assert "q_lora_rank is None" in rows["self_attn.query_latents"]
        with pytest.raises(AttributeError, match="indexer.output"):
            model.layers[0].self_attn.selected_keys

    def test_a_write_to_a_shared_latent_reaches_the_blocks_that_reuse_it(self, model):
        """Block 1 expands block 0's key-value latent: zeroing it there moves block 1's
        values, which block 1 builds from nothing of its own."""
        prompt, pictures = chat(model), [image(112, 84)]
        with model.trace(prompt, images=pictures):
            plain = model.layers[1].self_attn.attention_values.save()
        with model.trace(prompt, images=pictures):
            model.layers[0].self_attn.kv_latents[:] = 0
            zeroed = model.layers[1].self_attn.attention_values.save()
        assert not torch.allclose(plain, zeroed)
        values = model.layers[1].self_attn._module.kv_b_proj.weight.new_zeros(zeroed.shape)
        torch.testing.assert_close(zeroed, values)  # no bias: a zero latent expands to zero values

    def test_the_indexer_restricts_each_query_to_its_selection(self, model):
        """Past ``index_topk`` keys, a query attends to exactly that many (the attention
        values vlreg serves are computed with the selection applied)."""
        prompt, pictures = chat(model), [image(112, 84)]
        topk = model._module.config.text_config.index_topk
        with model.trace(prompt, images=pictures):
            probabilities = model.layers[0].self_attn.attention_probabilities.save()
        kept = (probabilities[0] > 0).sum(-1)
        assert (kept[:, topk:] == topk).all() and kept.shape[-1] > topk

    def test_a_block_whose_latent_or_selection_is_reused_is_skipped_only_with_its_readers(self, model):
        with pytest.raises(Unavailable, match=r"layers \[1\] reuse its key-value latent"):
            skip_layers(model, 0, 0)
        assert model.layers[0].why_not_skipped(range(0, 2)) is None
        prompt, pictures = chat(model), [image(112, 84)]
        with model.trace(prompt, images=pictures):
            entering = model.layers[1].input.save()
        with model.trace(prompt, images=pictures):
            skip_layers(model, 1, 1)  # block 1 hands on the stream and block 0's selection it was given
            leaving = model.layers[2].input.save()
        torch.testing.assert_close(entering, leaving)


class TestMistralLarge4Published(PublishedWidths):
    config = MistralLarge4Config
    checkpoint = "mistral_large4"
    family = "mistral3"
    parts = {"vision": ("pixtral", "vlreg-mistral3"), "text": ("mistral_large4_text", "vlreg-mistral3")}
    published = {
        "num_layers": 72, "hidden_size": 6144, "num_heads": 64, "head_dim": 128,
        "layers.0.self_attn.kv_lora_rank": 512, "layers.3.self_attn.qk_rope_head_dim": 0,  # a block without positions
        "layers.1.mlp.num_experts": 128, "layers.1.mlp.top_k": 4,
        "vision.num_layers": 30, "vision.vision_hidden_size": 2048, "vision.num_heads": 16, "vision.patch_size": 14,
        "projector.patch_merger.merging_layer.weight.shape": (2048, 2048 * 2**2),
    }
    refused = {**INDEXER, "self_attn.query_latents": "q_lora_rank is None"}
