"""Aria at the sizes transformers' defaults give, on the meta device (no weights): the
names, sizes and support table such a checkpoint gets, what ``vlreg inspect`` prints of
it, and the geometry at the default processor's resolution.

AriaConfig()'s defaults are only partly Aria's (rhymes-ai/Aria), and the tests say which
parts they rely on: the text model is 4096 wide, 32 blocks of 32 heads of 128 (as many
key/value heads), each MLP 8 experts of 4096 (2 a token) beside 2 shared ones; the tower is
Idefics3VisionConfig's default, 1152 wide with 16 heads (SigLIP-so400m's width, Aria's),
over 12 blocks of 32-pixel patches (Aria's is 27 blocks of 14-pixel patches over 980
pixels); the projector's queries are Aria's: 128 for a 490-pixel frame of 35 x 35
patches, 256 for a 980-pixel one of 70 x 70, which the geometry test gives the tower.
"""

from __future__ import annotations

import json

import pytest
import transformers
from transformers import AutoProcessor

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build
from vlreg.testing.conformance import image


def defaults(folder, **fields) -> str:
    """A folder with Aria's default config (``fields`` over it) and the tiny checkpoint's
    processor (nothing is processed on meta)."""
    transformers.AriaConfig(**fields).save_pretrained(folder)
    AutoProcessor.from_pretrained(build("aria")).save_pretrained(folder)
    return str(folder)


def lazy(folder: str) -> StandardizedTransformer:
    return StandardizedTransformer(folder, task="image-text-to-text", dispatch=False, attn_implementation="eager")


def test_the_default_widths_at_full_depth(tmp_path):
    model = lazy(defaults(tmp_path))
    assert not model.dispatched and model.family.name == "aria"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (32, 4096, 32, 32, 128)
    mlp = model.layers[0].mlp
    assert (mlp.num_experts, mlp.top_k, mlp.intermediate_size) == (8, 2, 4096)
    assert tuple(mlp.experts.down_proj.shape) == (8, 4096, 4096) and tuple(mlp.shared_experts.gate_proj.weight.shape) == (
        2 * 4096, 4096)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (12, 1152, 16, 72)
    assert tuple(model.projector.query.shape) == (256, 1152)  # the most queries a frame takes
    assert tuple(model.projector.feed_forward.linear_out.weight.shape) == (4096, 4096)
    rows = model.support()
    assert all(reason is None for reason in rows.values()), {row: why for row, why in rows.items() if why}
    # the projector reads the last block's stream before post_layernorm (vision_feature_layer=-1)
    assert [row for row in model.read_only() if row.startswith("vision.")] == ["vision.image_token_mask", "vision.tower_output"]


def test_inspect_reads_the_default_config(tmp_path, capsys):
    assert main(["inspect", defaults(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "aria" and report["class"] == "AriaForConditionalGeneration"
    assert report["parts"]["vision"]["model_type"] == "idefics3_vision" and "vlreg-idefics" in report["parts"]["vision"]["plugin"]
    assert report["parts"]["text"]["model_type"] == "aria_text" and "vlreg-aria" in report["parts"]["text"]["plugin"]
    assert report["vision sizes"]["vision_hidden_size"] == 1152 and report["sizes"]["num_layers"] == 32


#: (width, height, processor options) -> the crops' boxes, worked out by hand: unsplit, the
#: image is one frame; split at 980, 1960 x 980 fits the 980 x 1960 canvas exactly, two
#: crops; at 490, 1000 x 1000 fits a 980 x 980 canvas, four crops of 500 x 500.
CROPS = {
    (1456, 1092, "{}"): [[0, 0, 1456, 1092]],
    (1960, 980, '{"split_image": true}'): [[0, 0, 980, 980], [980, 0, 1960, 980]],
    (1000, 1000, '{"split_image": true, "max_image_size": 490}'): [[0, 0, 500, 500], [500, 0, 1000, 500],
                                                                   [0, 500, 500, 1000], [500, 500, 1000, 1000]],
}


@pytest.mark.parametrize("key", CROPS)
def test_geometry_at_the_default_processors_resolution(tmp_path, key):
    """Aria's 14-pixel patches and queries: 256 a 980-pixel frame, 128 a 490-pixel one."""
    width, height, options = key
    options = json.loads(options)
    folder = tmp_path / "checkpoint"
    AutoProcessor.from_pretrained(build("aria")).save_pretrained(folder)
    processor = transformers.AriaProcessor.from_pretrained(folder, size_conversion={490: 128, 980: 256})
    processor.save_pretrained(folder)
    transformers.AriaConfig(
        image_token_index=processor.image_token_id, vision_config={"image_size": 980, "patch_size": 14},
        text_config={"num_hidden_layers": 1, "vocab_size": len(processor.tokenizer)},
    ).save_pretrained(folder)
    model = lazy(str(folder))
    content = [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]
    prompt = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)
    (geometry,) = model.vision.geometry(prompt, [image(width, height)], **options)  # checks the tokens against the encoding
    queries = 128 if options.get("max_image_size") == 490 else 256
    assert all(g.resampled and g.tokens == queries for g in geometry.grids)
    assert [g.boxes[0].tolist() for g in geometry.grids] == CROPS[key]
