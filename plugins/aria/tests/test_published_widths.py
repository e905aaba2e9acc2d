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

from vlreg.testing import build, chat, load
from vlreg.testing.conformance import PublishedWidths, image


class TestAriaDefaults(PublishedWidths):
    config = transformers.AriaConfig
    checkpoint = "aria"
    family = "aria"
    parts = {"vision": ("idefics3_vision", "vlreg-idefics"), "text": ("aria_text", "vlreg-aria")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "layers.0.mlp.num_experts": 8, "layers.0.mlp.top_k": 2, "layers.0.mlp.intermediate_size": 4096,
        "layers.0.mlp.experts.down_proj.shape": (8, 4096, 4096),
        "layers.0.mlp.shared_experts.gate_proj.weight.shape": (2 * 4096, 4096),
        "vision.num_layers": 12, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "projector.query.shape": (256, 1152),  # the most queries a frame takes
        "projector.feed_forward.linear_out.weight.shape": (4096, 4096),
    }

    def test_the_projector_reads_the_last_blocks_stream(self, model):
        """``vision_feature_layer=-1``: the last block's stream before post_layernorm."""
        assert [row for row in model.read_only() if row.startswith("vision.")] == ["vision.image_token_mask", "vision.tower_output"]


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
    model = load(folder, dispatch=False)
    (geometry,) = model.vision.geometry(chat(model), [image(width, height)], **options)  # checks the tokens against the encoding
    queries = 128 if options.get("max_image_size") == 490 else 256
    assert all(g.resampled and g.tokens == queries for g in geometry.grids)
    assert [g.boxes[0].tolist() for g in geometry.grids] == CROPS[key]
