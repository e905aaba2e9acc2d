"""Llama 4 at the sizes transformers' defaults give, built on the meta device (no
weights): the names, sizes and support table such a checkpoint gets, and what ``vlreg
inspect`` prints of it.

The default text model is Llama 4 Scout's: 48 blocks 5120 wide, 40 heads of 128 over 8
key/value heads, every block a mixture of 16 experts, one a token, beside a shared
expert. Maverick's interleaving (``interleave_moe_layer_step=2``, 128 experts) is the
same config with those two fields. The default tower (34 blocks, 16 heads, 14-pixel
patches of 448-pixel tiles) is 768 wide, not a published tower's width.
"""

from __future__ import annotations

import json

import pytest
from transformers import AutoProcessor, Llama4Config

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.plugin import Mlp
from vlreg.testing import build
from vlreg_llama4.text import Llama4Moe


def defaults(folder, **fields) -> str:
    """The default config (``fields`` over it), with the tiny checkpoint's processor
    (nothing is processed on meta)."""
    Llama4Config(**fields).save_pretrained(folder)
    AutoProcessor.from_pretrained(build("llama4")).save_pretrained(folder)
    return str(folder)


def lazy(folder: str) -> StandardizedTransformer:
    return StandardizedTransformer(folder, task="image-text-to-text", dispatch=False, attn_implementation="eager")


def test_scout_every_block_routes_to_1_of_16_experts(tmp_path):
    model = lazy(defaults(tmp_path))
    assert not model.dispatched and model.family.name == "llama4" and model.family.entry.host == ""
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (48, 5120, 40, 8, 128)
    assert all(isinstance(block.mlp, Llama4Moe) for block in model.layers)
    mlp = model.layers[0].mlp
    assert (mlp.num_experts, mlp.top_k, mlp.intermediate_size) == (16, 1, 8192)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.patch_size, vision.image_size) == (34, 768, 16, 14, 448)
    rows = model.support()
    assert {row for row, why in rows.items() if why} == {"mlp.expert_outputs"}
    assert model.layers[0].mlp.path == "model.language_model.model.layers.0.feed_forward"


def test_maverick_interleaves_dense_blocks(tmp_path):
    model = lazy(defaults(tmp_path, text_config={"interleave_moe_layer_step": 2, "num_local_experts": 128}))
    kinds = [type(block.mlp) for block in model.layers]
    assert kinds == [Mlp, Llama4Moe] * 24
    assert model.layers[0].mlp.intermediate_size == 16384 and model.layers[1].mlp.num_experts == 128
    assert "no slot's output is held apart" in model.support()["layers.1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47.mlp.expert_outputs"]


def test_inspect_reads_the_default_config(tmp_path, capsys):
    assert main(["inspect", defaults(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "llama4" and report["class"] == "Llama4ForConditionalGeneration"
    for kind, model_type in (("vision", "llama4_vision_model"), ("text", "llama4_text")):
        assert report["parts"][kind]["model_type"] == model_type and "vlreg-llama4" in report["parts"][kind]["plugin"]
    assert report["no_images"] is None and report["sizes"]["num_layers"] == 48


def test_inspect_reads_the_bare_default_config(tmp_path, capsys):
    Llama4Config().save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "family 'llama4'" in shown and "holds no processor" in shown and "vision.image_features" in shown


#: (width, height) -> tiles (rows, columns) at the default 336-pixel tiles, at most 16, by
#: hand: the canvas of tiles the image fits with the least enlarging (or, too large for
#: any, the least shrinking), without distortion.
DEFAULT_TILES = {(336, 336): (1, 1), (672, 336): (1, 2), (336, 1344): (4, 1), (1000, 1000): (3, 3), (100, 50): (1, 1),
                 (2000, 2000): (4, 4)}


def test_geometry_at_the_default_processors_resolution(tmp_path):
    """Llama 4's default image processor (336-pixel tiles, up to 16) with 14-pixel
    patches shuffled 2 x 2: 12 x 12 tokens a tile, and a global image past one tile."""
    from transformers import Llama4ImageProcessor, Llama4Processor

    from vlreg.testing import tokenizer
    from vlreg.testing.conformance import image
    from vlreg_llama4.checkpoints import BEGIN, CHAT_TEMPLATE, SPECIAL_TOKENS

    tok = tokenizer(SPECIAL_TOKENS, bos_token=BEGIN, eos_token="<|eot|>")
    Llama4Processor(image_processor=Llama4ImageProcessor(), tokenizer=tok, chat_template=CHAT_TEMPLATE).save_pretrained(tmp_path)
    Llama4Config(image_token_index=tok.convert_tokens_to_ids("<|patch|>"),
                 text_config={"num_hidden_layers": 1, "vocab_size": len(tok)}).save_pretrained(tmp_path)
    model = lazy(str(tmp_path))
    prompt = f"{BEGIN}<|image|>What is in this image?"
    for size, (rows, columns) in DEFAULT_TILES.items():
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks the tokens against the encoding
        labels = [grid.label for grid in geometry.grids]
        if rows * columns == 1:
            assert labels == ["image"], size
        else:
            assert labels == [f"tile {r},{c}" for r in range(rows) for c in range(columns)] + ["global"], size
        assert all((grid.rows, grid.columns, grid.fold) == (12, 12, 2) for grid in geometry.grids), size
