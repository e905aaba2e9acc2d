"""Mllama at the sizes transformers' default config gives, on the meta device (no
weights): the names, sizes and support table such a checkpoint gets, and what ``vlreg
inspect`` prints of it.

The default ``MllamaConfig`` is Llama 3.2 11B Vision's geometry: a text model 4096 wide,
32 heads over 8 key/value heads of 128, 40 blocks of which 3, 8, ..., 38 cross-attend; a
tower 1280 wide with 16 heads, 32 local and 8 global blocks over 448-pixel tiles of
14-pixel patches (1025 positions a tile, its class token first), tapped after local
blocks 3, 7, 15, 23 and 30, so the projector reads 1280 x 6 = 7680 features a position.
"""

from __future__ import annotations

import json

from transformers import AutoProcessor, MllamaConfig

from vlreg.cli import main
from vlreg.testing import build, load
from vlreg.testing.conformance import PublishedWidths

CROSS = [3, 8, 13, 18, 23, 28, 33, 38]
SPANS = ",".join(map(str, CROSS))


class TestLlama32Vision11B(PublishedWidths):
    config = MllamaConfig
    checkpoint = "mllama"
    family = "mllama"
    parts = {"wrapper": ("mllama", "vlreg-mllama"), "text": ("mllama_text_model", "vlreg-mllama"),
             "vision": ("mllama_vision_model", "vlreg-mllama")}
    published = {
        "num_layers": 40, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
        "cross_attention_layers": CROSS, "embed_tokens.weight.shape": (128256 + 8, 4096), "vocab_size": 128256,
        "vision.num_layers": 32, "vision.num_global_layers": 8, "vision.vision_hidden_size": 1280, "vision.num_heads": 16,
        "vision.head_dim": 80, "vision.image_size": 448, "vision.patch_size": 14, "vision.max_num_tiles": 4,
        "vision.vision_output_dim": 7680, "projector.weight.shape": (4096, 7680),
        "layers.3.cross_attn.path": "model.model.language_model.layers.3.cross_attn", "layers.3.cross_attn.num_kv_heads": 8,
    }
    read_only = ["vision.image_token_mask", f"layers.{SPANS}.text_row_mask"]

    def test_cross_attention_blocks_and_their_rows(self, model):
        assert "self_attn" in model.layers[4].__dict__
        rows = model.support()
        assert f"layers.{SPANS}.cross_attn.attention_probabilities" in rows and f"layers.{SPANS}.text_row_mask" in rows
        assert "vision.global_layers.self_attn.attention_probabilities" in rows


def test_inspect_names_the_cross_attention_blocks(tmp_path, capsys):
    MllamaConfig().save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cross_attention_layers"] == CROSS
    assert main(["inspect", str(tmp_path)]) == 0
    assert "cross-attention blocks (the image reaches only these): [3, 8, 13, 18, 23, 28, 33, 38]" in capsys.readouterr().out


def test_geometry_at_the_default_tiles(tmp_path):
    """448-pixel tiles of 14-pixel patches: 32 x 32 patches and a class token a tile, 4
    tiles an image, so 4100 positions of the states an image, as the tower makes them."""
    from transformers import MllamaImageProcessor, MllamaProcessor

    from vlreg.testing.conformance import image

    tiny = AutoProcessor.from_pretrained(build("mllama"))
    MllamaProcessor(image_processor=MllamaImageProcessor(size={"height": 448, "width": 448}), tokenizer=tiny.tokenizer,
                    chat_template=tiny.chat_template).save_pretrained(tmp_path)
    MllamaConfig(image_token_index=tiny.tokenizer.convert_tokens_to_ids("<|image|>"),
                 text_config={"num_hidden_layers": 4, "cross_attention_layers": [1], "vocab_size": len(tiny.tokenizer) - 1,
                              "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2}).save_pretrained(tmp_path)
    model = load(tmp_path, dispatch=False)
    first, second = model.vision.geometry("<|image|><|image|>What is in these images?", [image(1000, 700), image(300, 900)])
    assert first.tokens == second.tokens == 4 * (32 * 32 + 1) and second.offset == 4100
    assert [grid.label for grid in first.grids] == [f"tile {r},{c}{kind}" for r in range(2) for c in range(2)
                                                    for kind in (" class token", "")]
    assert [grid.label for grid in second.grids][-2:] == ["tile 2,0", "padding tile 3"]
    assert first.grids[1].boxes[0].tolist() == [0, 0, 1000 / 896 * 14, 700 / 627 * 14]  # resized to 896 x 627
