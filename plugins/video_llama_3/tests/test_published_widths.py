"""VideoLLaMA 3 at transformers 5.23's default widths, built on the meta device (no weights).

``VideoLlama3Config()`` is the class's defaults, read from it, not a published checkpoint's
(none was at hand): Qwen2's default text model (32 blocks, 4096 wide, 32 heads, an MLP 22016
wide) and the packed SigLIP tower of 12 blocks, 768 wide, 12 heads, 16-pixel patches; a
projector of two linear maps from the tower's width to the text's."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestVideoLlama3(PublishedWidths):
    config = transformers.VideoLlama3Config
    checkpoint = "video_llama_3"
    family = "video_llama_3"
    parts = {"text": ("qwen2", "vlreg-llava"), "vision": ("video_llama_3_vision", "vlreg-video-llama-3")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 22016,
        "vision.num_layers": 12, "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.head_dim": 64,
        "vision.intermediate_size": 3072, "vision.patch_size": 16,
        "projector.readout.0.weight.shape": (4096, 768), "projector.readout.2.weight.shape": (4096, 4096),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    aliases = {"model": {"vision": "model.vision_model", "projector": "model.projector"}}
