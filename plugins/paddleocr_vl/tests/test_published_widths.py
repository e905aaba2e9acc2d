"""PaddleOCR-VL at transformers 5.23's default widths, built on the meta device (no weights).

``PaddleOCRVLConfig()`` is the class's defaults, read from it (PaddleOCR-VL 0.9B's shape, as
the class documents it): an ERNIE 4.5 text model of 18 blocks, 1024 wide, 16 query heads over
2 key heads of 128, an MLP 3072 wide; the packed SigLIP tower of 27 blocks, 1152 wide, 16
heads, 14-pixel patches, a learned 27 x 27 position grid; a projector from 4 patches' 4608."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestPaddleOCRVL(PublishedWidths):
    config = transformers.PaddleOCRVLConfig
    checkpoint = "paddleocr_vl"
    family = "paddleocr_vl"
    parts = {"text": ("paddleocr_vl_text", "vlreg-paddleocr-vl"), "vision": ("paddleocr_vl_vision", "vlreg-paddleocr-vl")}
    published = {
        "num_layers": 18, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 2, "head_dim": 128,
        "intermediate_size": 3072,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.patch_size": 14, "vision.spatial_merge_size": 2,
        "projector.linear_1.weight.shape": (4608, 4608), "projector.linear_2.weight.shape": (1024, 4608),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    aliases = {"model": {"vision": "model.visual.vision_model", "projector": "model.projector"}}
