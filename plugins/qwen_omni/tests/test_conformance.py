"""The Qwen omni thinkers' image and text paths against the conformance suite the core ships."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import QWEN_VIT, composite
from vlreg_qwen_omni.checkpoints import PIXELS

QWEN = composite(QWEN_VIT, vision="model.visual", projector="model.visual.merger")


def tiny_videos(patch: int) -> dict:
    """The tiny processor's frame sizes, passed with each video: the omni processors' own call
    defaults (128 to 768 merge blocks a frame) override the video processor's saved sizes, and
    would make the tests' 56-pixel frames 288 tokens (an occlusion sweep of 18 forwards)."""
    low, high = PIXELS[patch]
    return {"size": {"shortest_edge": low, "longest_edge": high}}


class TestQwen2_5OmniThinker(AnalysisConformance, VisionConformance):
    """Qwen2.5-Omni's thinker: Qwen2.5-VL's windowed tower on images larger than a window,
    so its merger's output (window order) is not the features (the image tokens' order)."""

    checkpoint = "qwen2_5_omni_thinker"
    native = QWEN
    unavailable = no_patterns("once per window on a windowed block")
    image_sizes = ((112, 168), (168, 112))
    projector_output_is_features = False
    video_options = tiny_videos(14)


class TestQwen3OmniMoeThinker(ExpertsConformance, VisionConformance):
    """Qwen3-Omni's thinker: Qwen3-VL's tower and Qwen3-MoE text, every MLP routed; the
    learned tower positions and DeepStack refused by name."""

    checkpoint = "qwen3_omni_moe_thinker"
    native = QWEN
    unavailable = no_patterns("once per image") | {
        "vision.position_embeddings": "not served on this family yet",
        "vision.deepstack_features": "not served on this family yet",
        "mlp.shared_expert_output": "no shared expert",
        "layers.0.deepstack_output": "not served on this family yet",
        "layers.1.deepstack_output": "not served on this family yet",
    }
    image_sizes = ((128, 96), (64, 128))
    video_options = tiny_videos(16)
