"""Idefics3 and SmolVLM at the sizes transformers' defaults give, on the meta device (no
weights): the names, sizes and support table such a checkpoint gets, what ``vlreg
inspect`` prints of it, and the geometry at the default processors' resolution.

The defaults are only partly a published checkpoint's, and the tests say which parts they
rely on: the text model is 4096 wide with 32 heads of 128 over 32 blocks (Llama-3-8B's
width and depth, not its 8 key/value heads or MLP); the tower is SigLIP-so400m's 1152
wide with 16 heads (over 12 blocks of 224-pixel images cut into 32-pixel patches, not a
published tower's depth or resolution). Both families' default processors cut frames of
364 pixels from images resized to a longest edge of 1456 and write 169 tokens a frame,
Idefics3-8B's resolution: with the pixel shuffle's default factor of 2 that is 13 x 13
tokens of 2 x 2 patches, so 14-pixel patches, which the geometry test gives the tower.
"""

from __future__ import annotations

import json
import re

import pytest
import transformers
from transformers import AutoProcessor

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build
from vlreg.testing.conformance import image

CONFIGS = {"idefics3": "Idefics3Config", "smolvlm": "SmolVLMConfig"}
PROCESSORS = {"idefics3": ("Idefics3Processor", "Idefics3ImageProcessor"),
              "smolvlm": ("SmolVLMProcessor", "SmolVLMImageProcessor")}


def defaults(family: str, folder, **fields) -> str:
    """A folder with the family's default config (``fields`` over it) and the tiny
    checkpoint's processor (nothing is processed on meta)."""
    getattr(transformers, CONFIGS[family])(**fields).save_pretrained(folder)
    AutoProcessor.from_pretrained(build(family)).save_pretrained(folder)
    return str(folder)


def lazy(folder: str) -> StandardizedTransformer:
    return StandardizedTransformer(folder, task="image-text-to-text", dispatch=False, attn_implementation="eager")


@pytest.mark.parametrize("family", CONFIGS)
def test_the_default_widths_at_full_depth(family, tmp_path):
    model = lazy(defaults(family, tmp_path))
    assert not model.dispatched and model.family.name == "idefics"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (32, 4096, 32, 32, 128)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (12, 1152, 16, 72)
    assert tuple(model.projector.modality_projection.proj.weight.shape) == (4096, 1152 * 2**2)  # 2 x 2 patches a token
    assert model.vision.layers[0].self_attn.path == "model.model.vision_model.encoder.layers.0.self_attn"
    rows = model.support()
    assert all(reason is None for reason in rows.values()), {row: why for row, why in rows.items() if why}
    # every tower value takes a write: the connector reads the tower's output itself
    assert [row for row in model.read_only() if row.startswith("vision.")] == ["vision.image_token_mask"]


@pytest.mark.parametrize("family", CONFIGS)
def test_inspect_reads_the_default_config_with_and_without_a_processor(family, tmp_path, capsys):
    assert main(["inspect", defaults(family, tmp_path / "with"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "idefics" and report["class"] == f"{CONFIGS[family][:-6]}ForConditionalGeneration"
    assert report["parts"]["vision"]["model_type"] == f"{family}_vision" and "vlreg-idefics" in report["parts"]["vision"]["plugin"]
    assert "vlreg-llava" in report["parts"]["text"]["plugin"] and report["no_images"] is None
    assert report["vision sizes"]["vision_hidden_size"] == 1152 and report["sizes"]["num_layers"] == 32
    assert report["aliases"]["vision.layers[0]"] == {"input_layernorm": "layer_norm1", "post_attention_layernorm": "layer_norm2"}
    getattr(transformers, CONFIGS[family])().save_pretrained(tmp_path / "bare")
    assert main(["inspect", str(tmp_path / "bare")]) == 0
    shown = capsys.readouterr().out
    assert "family 'idefics'" in shown and "holds no processor" in shown and "vision.image_features" in shown


#: (width, height) -> (tile rows, tile columns) at the default 1456 / 364 pixels, worked out
#: by hand: the longest edge goes to 1456 (a small image is enlarged), the other follows
#: the aspect (made even), and each side is rounded up to whole tiles.
SPLITS = {(1456, 1092): (3, 4), (1092, 1456): (4, 3), (56, 56): (4, 4), (200, 100): (2, 4), (3000, 500): (1, 4),
          (500, 3000): (4, 1), (640, 480): (3, 4), (800, 801): (4, 4), (1000, 20): (1, 4), (77, 300): (4, 2)}


@pytest.mark.parametrize("family", CONFIGS)
def test_geometry_at_the_default_processors_resolution(family, tmp_path):
    """Frames of 364 pixels, 13 x 13 tokens of 2 x 2 patches of 14 pixels; each image
    resized to a longest edge of 1456 and cut into up to 4 x 4 tiles."""
    from vlreg.testing import tokenizer
    from vlreg_idefics.checkpoints import FAKE, GLOBAL, IMAGE, TILE_TAGS

    folder = tmp_path / "checkpoint"
    tok = tokenizer(("<|endoftext|>", FAKE, IMAGE, "<end_of_utterance>", GLOBAL, *TILE_TAGS), eos_token="<end_of_utterance>")
    processor_class, images_class = PROCESSORS[family]
    images = getattr(transformers, images_class)()
    options = {"video_processor": transformers.SmolVLMVideoProcessor()} if family == "smolvlm" else {}
    template = "{% for m in messages %}{% for p in m['content'] %}{% if p['type'] == 'image' %}<image>{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endfor %}"
    getattr(transformers, processor_class)(image_processor=images, tokenizer=tok, chat_template=template, **options).save_pretrained(folder)
    getattr(transformers, CONFIGS[family])(
        image_token_id=tok.convert_tokens_to_ids(IMAGE), vision_config={"image_size": 364, "patch_size": 14},
        text_config={"num_hidden_layers": 1, "vocab_size": len(tok)},
    ).save_pretrained(folder)
    model = lazy(str(folder))
    assert model.processor.image_seq_len == 169 and images.max_image_size["longest_edge"] == 364
    prompt = "<image>What is in this image?"
    for size, (rows, columns) in SPLITS.items():
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks 169 tokens a grid against the encoding
        tags = [t for t in tok.convert_ids_to_tokens(model.processor(text=prompt, images=[image(*size)])["input_ids"][0])
                if re.fullmatch(r"<row_\d+_col_\d+>", t)]
        assert [g.label for g in geometry.grids[:-1]] == [t[1:-1] for t in tags] and len(tags) == rows * columns, size
        assert all((g.rows, g.columns, g.fold) == (13, 13, 2) for g in geometry.grids)
    (geometry,) = model.vision.geometry(prompt, [image(1456, 1092)])
    first, last = geometry.grids[0].boxes, geometry.grids[-2].boxes  # tiles (1, 1) and (3, 4): 28-pixel squares
    assert first[0].tolist() == [0, 0, 28, 28] and last[-1].tolist() == [1428, 1064, 1456, 1092]
    assert geometry.grids[-1].boxes[0].tolist() == [0, 0, 28 * 4, 28 * 3]  # the global image: the whole image in one frame
