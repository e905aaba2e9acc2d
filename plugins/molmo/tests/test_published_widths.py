"""Molmo 2 at transformers 5.23's default widths, built on the meta device (no weights).

``Molmo2Config()`` is the class's defaults, read from it (Molmo2-8B's shape, as the class
documents it): a text model of 36 blocks, 4096 wide, 32 query heads over 8 key heads of 128, an
MLP 12288 wide; the tower of 25 blocks, 1152 wide, 16 heads of 72, 14-pixel patches, an MLP 4304
wide; the adapter pooling the streams of blocks 24 and 18 (2304 wide) into 1152, then an MLP
18944 wide onto 3584 (the class's default ``text_hidden_size``, which is not its text model's
4096: the defaults alone do not run, and nothing here runs them)."""

import transformers

from vlreg.testing.conformance import PublishedWidths


class TestMolmo2(PublishedWidths):
    config = transformers.Molmo2Config
    checkpoint = "molmo2"
    family = "molmo2"
    parts = {"text": ("molmo2_text", "vlreg-molmo"), "vision": ("molmo2_vision", "vlreg-molmo")}
    published = {
        "num_layers": 36, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
        "intermediate_size": 12288,
        "vision.num_layers": 25, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.patch_size": 14,
        "projector.image_pooling_2d.q_proj.weight.shape": (1152, 2304),
        "projector.image_projector.down_proj.weight.shape": (3584, 18944),
    }
