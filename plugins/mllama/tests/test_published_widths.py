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

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build

CROSS = [3, 8, 13, 18, 23, 28, 33, 38]


def defaults(folder) -> str:
    """A folder with the default config and the tiny checkpoint's processor (nothing is
    processed on meta)."""
    MllamaConfig().save_pretrained(folder)
    AutoProcessor.from_pretrained(build("mllama")).save_pretrained(folder)
    return str(folder)


def test_the_default_widths_at_full_depth(tmp_path):
    model = StandardizedTransformer(defaults(tmp_path), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "mllama"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (40, 4096, 32, 8, 128)
    assert model.cross_attention_layers == CROSS
    assert tuple(model.embed_tokens.weight.shape) == (128256 + 8, 4096) and model.vocab_size == 128256
    vision = model.vision
    assert (vision.num_layers, vision.num_global_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (32, 8, 1280, 16, 80)
    assert (vision.image_size, vision.patch_size, vision.max_num_tiles, vision.vision_output_dim) == (448, 14, 4, 7680)
    assert tuple(model.projector.weight.shape) == (4096, 7680)
    assert model.layers[3].cross_attn.path == "model.model.language_model.layers.3.cross_attn"
    assert model.layers[3].cross_attn.num_kv_heads == 8 and "self_attn" in model.layers[4].__dict__
    rows = model.support()
    assert all(reason is None for reason in rows.values()), {row: why for row, why in rows.items() if why}
    spans = "3,8,13,18,23,28,33,38"
    assert f"layers.{spans}.cross_attn.attention_probabilities" in rows and f"layers.{spans}.text_row_mask" in rows
    assert "vision.global_layers.self_attn.attention_probabilities" in rows
    assert sorted(model.read_only()) == ["layers.3,8,13,18,23,28,33,38.text_row_mask", "vision.image_token_mask"]


def test_inspect_reads_the_default_config_with_and_without_a_processor(tmp_path, capsys):
    assert main(["inspect", defaults(tmp_path / "with"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "mllama" and report["class"] == "MllamaForConditionalGeneration"
    assert {kind: part["model_type"] for kind, part in report["parts"].items()} == {
        "wrapper": "mllama", "text": "mllama_text_model", "vision": "mllama_vision_model"}
    assert report["no_images"] is None and report["cross_attention_layers"] == CROSS
    assert report["vision sizes"]["vision_hidden_size"] == 1280 and report["sizes"]["num_layers"] == 40
    MllamaConfig().save_pretrained(tmp_path / "bare")
    assert main(["inspect", str(tmp_path / "bare")]) == 0
    shown = capsys.readouterr().out
    assert "family 'mllama'" in shown and "holds no processor" in shown and "vision.image_features" in shown
    assert "cross-attention blocks (the image reaches only these): [3, 8, 13, 18, 23, 28, 33, 38]" in shown


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
    model = StandardizedTransformer(str(tmp_path), task="image-text-to-text", dispatch=False)
    first, second = model.vision.geometry("<|image|><|image|>What is in these images?", [image(1000, 700), image(300, 900)])
    assert first.tokens == second.tokens == 4 * (32 * 32 + 1) and second.offset == 4100
    assert [grid.label for grid in first.grids] == [f"tile {r},{c}{kind}" for r in range(2) for c in range(2)
                                                    for kind in (" class token", "")]
    assert [grid.label for grid in second.grids][-2:] == ["tile 2,0", "padding tile 3"]
    assert first.grids[1].boxes[0].tolist() == [0, 0, 1000 / 896 * 14, 700 / 627 * 14]  # resized to 896 x 627
