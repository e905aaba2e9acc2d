"""Kimi K2.5 against the conformance suite the core ships: its tower's per-image attention
serves no one pattern (`tower_patterns` computes each call's), DeepSeek-V3's experts route
by the sigmoid within the best groups. Before transformers 5.25 the suite's video is one frame
(one chunk of one frame, which transformers' forward runs there); a chunk of several frames is
refused before the model runs (checked here)."""

import pytest

from vlreg.testing import chat
from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance, image, no_patterns
from vlreg.testing.conformance.helpers import refused_before_running
from vlreg.testing.conformance.native import composite
from vlreg_kimi import SPLITS_FRAMES

#: The Kimi tower's names, from the tower.
KIMI_TOWER = {
    "layers": "layers",
    "patch_embed": "patch_embed",
    "layers.0.self_attn": "layers.0.attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.norm1",
    "layers.0.post_attention_layernorm": "layers.0.norm2",
}


class TestKimiK25(ExpertsConformance, AnalysisConformance, VisionConformance):
    checkpoint = "kimi_k25"
    native = composite(KIMI_TOWER, projector="model.mm_projector") | {
        "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate",
        "layers.0.self_attn.kv_a_layernorm": "model.language_model.layers.0.self_attn.kv_a_layernorm",
    }
    unavailable = no_patterns("once per image")
    renormalized = False  # sigmoid scores within the best groups, renormalized and scaled (GroupRoutedMoe.route)
    # a chunk of 4 frames pooled into one grid, then a chunk of the fifth alone (one frame before 5.25)
    pooled_video_chunks, video_frames = True, (56, 56, 1 if SPLITS_FRAMES else 5)
    # 112 x 84 is 4 x 3 tokens; 300 x 100 pads its height to 112 (its last row of tokens half over padding)
    image_sizes = ((112, 84), (300, 100))

    @pytest.mark.skipif(not SPLITS_FRAMES, reason="transformers 5.25 runs a Kimi K2.5 chunk of several frames")
    def test_a_chunk_of_several_frames_is_refused_before_the_model_runs(self, model):
        """Before transformers 5.25, the processor's default chunks (4 frames pooled into one
        grid) are refused by name before the model runs, saying what runs instead."""
        video = [image(56, 56, seed=k) for k in range(5)]  # a chunk of 4 frames, then one of the fifth
        with refused_before_running(model, r"chunk of 4 frames: install transformers 5\.25.*images=\[", ValueError):
            with model.trace(chat(model, "video", text=self.question), videos=[video]):
                model.logits.save()
