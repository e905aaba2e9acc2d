"""Mistral 3 at the sizes transformers' defaults give (Mistral Small 3.1's: a 40-block
Mistral text model 5120 wide with 32 heads of 128 over 8 key/value heads, a 24-block
Pixtral tower 1024 wide with 16 heads and 14-pixel patches, merged 2 x 2), built on the
meta device (no weights): the names, sizes and support table such a checkpoint gets,
and what ``vlreg inspect`` prints of it."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoProcessor, Mistral3Config

from vlreg import StandardizedTransformer, Unavailable
from vlreg.cli import main
from vlreg.testing import build


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The default config, with the tiny checkpoint's processor (nothing is processed on meta)."""
    folder = tmp_path_factory.mktemp("mistral3")
    Mistral3Config().save_pretrained(folder)
    AutoProcessor.from_pretrained(build("mistral3")).save_pretrained(folder)
    return str(folder)


def test_the_default_widths_at_full_depth(folder):
    model = StandardizedTransformer(folder, task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "mistral3"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (40, 5120, 32, 8, 128)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.patch_size) == (24, 1024, 16, 64, 14)
    assert tuple(model.projector.patch_merger.merging_layer.weight.shape) == (1024, 1024 * 2**2)  # 2 x 2 patches a token
    with pytest.raises(Unavailable, match=r"image_sizes"):
        vision.image_size
    rows = model.support()
    assert all(why is None for why in rows.values()), {row: why for row, why in rows.items() if why}
    # the projector reads the last block's stream out of the hidden states (vision_feature_layer=-1)
    assert "edit vision.layers[23].layer_output" in model.read_only()["vision.tower_output"]
    assert "vision.layer_output" not in model.read_only()


def test_inspect_reads_the_default_config(folder, capsys):
    assert main(["inspect", folder, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "mistral3" and report["class"] == "Mistral3ForConditionalGeneration"
    assert report["parts"]["vision"]["model_type"] == "pixtral" and "vlreg-mistral3" in report["parts"]["vision"]["plugin"]
    assert "vlreg-llava" in report["parts"]["text"]["plugin"] and report["no_images"] is None
    assert report["vision sizes"]["vision_hidden_size"] == 1024 and report["sizes"]["num_layers"] == 40


def test_inspect_reads_the_bare_default_config(tmp_path, capsys):
    Mistral3Config().save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "family 'mistral3'" in shown and "holds no processor" in shown and "vision.image_features" in shown


#: (width, height) -> (rows, columns) of tokens at the default 1024-pixel longest edge and
#: 28-pixel tokens (14-pixel patches merged 2 x 2), by hand: a side past 1024 shrinks with
#: the aspect (floored), then each side is rounded up to whole tokens.
DEFAULT_GRIDS = {(1024, 768): (28, 37), (2048, 1536): (28, 37), (28, 28): (1, 1), (29, 28): (1, 2), (500, 200): (8, 18),
                 (200, 500): (18, 8), (3000, 100): (2, 37)}


def test_geometry_at_the_default_processors_resolution(tmp_path):
    """Pixtral's default image processor (longest edge 1024) with Mistral 3's 14-pixel
    patches merged 2 x 2: each image a raster of 28-pixel tokens, rows ended by breaks."""
    from transformers import PixtralImageProcessor, PixtralProcessor

    from vlreg.testing import tokenizer
    from vlreg_mistral3.checkpoints import CHAT_TEMPLATE, SPECIAL_TOKENS

    tok = tokenizer(SPECIAL_TOKENS, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    PixtralProcessor(image_processor=PixtralImageProcessor(), tokenizer=tok, patch_size=14, spatial_merge_size=2,
                     chat_template=CHAT_TEMPLATE).save_pretrained(tmp_path)
    Mistral3Config(image_token_index=tok.convert_tokens_to_ids("[IMG]"),
                   text_config={"num_hidden_layers": 1, "vocab_size": len(tok)}).save_pretrained(tmp_path)
    model = StandardizedTransformer(str(tmp_path), task="image-text-to-text", dispatch=False)
    prompt = "<s>[INST][IMG]What is in this image?[/INST]"
    from vlreg.testing.conformance import image

    for size, (rows, columns) in DEFAULT_GRIDS.items():
        if model.vision.image_refusal(*size):  # a side scaled to nothing, or too few tokens: refused first
            with pytest.raises(ValueError, match="too small or too thin"):
                model.vision.geometry(prompt, [image(*size)])
            continue
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks the tokens against the encoding
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, grid.fold) == (rows, columns, 2), size
        assert torch.allclose(grid.boxes[-1, 2:], torch.tensor(size, dtype=torch.float64)), size
