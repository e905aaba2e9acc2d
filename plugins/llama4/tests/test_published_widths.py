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

from transformers import Llama4Config

from vlreg.plugin import Mlp
from vlreg.testing import load
from vlreg.testing.conformance import PublishedWidths
from vlreg_llama4.text import Llama4Moe


SCOUT = {
    "num_layers": 48, "hidden_size": 5120, "num_heads": 40, "num_kv_heads": 8, "head_dim": 128,
    "layers.0.mlp.num_experts": 16, "layers.0.mlp.top_k": 1, "layers.0.mlp.intermediate_size": 8192,
    "layers.0.mlp.path": "model.language_model.model.layers.0.feed_forward",
    "vision.num_layers": 34, "vision.vision_hidden_size": 768, "vision.num_heads": 16, "vision.patch_size": 14,
    "vision.image_size": 448,
}


class TestScout(PublishedWidths):
    """Every block routes to 1 of 16 experts beside the shared one."""

    config = Llama4Config
    checkpoint = "llama4"
    family = "llama4"
    parts = {"vision": ("llama4_vision_model", "vlreg-llama4"), "text": ("llama4_text", "vlreg-llama4")}
    published = SCOUT
    refused = {"mlp.expert_outputs": "no slot's output is held apart"}

    def test_the_features_are_written_at_the_root_and_every_block_routes(self, model):
        assert model.family.entry.host == ""
        assert all(isinstance(block.mlp, Llama4Moe) for block in model.layers)


class TestMaverick(PublishedWidths):
    """Scout's config with Maverick's interleaving: a dense block, then one of 128 experts."""

    config = Llama4Config
    fields = {"text_config": {"interleave_moe_layer_step": 2, "num_local_experts": 128}}
    checkpoint = "llama4"
    family = "llama4"
    parts = TestScout.parts
    published = {"num_layers": 48, "layers.0.mlp.intermediate_size": 16384, "layers.1.mlp.num_experts": 128}
    odd = ",".join(str(i) for i in range(1, 48, 2))
    refused = {f"layers.{odd}.mlp.expert_outputs": "no slot's output is held apart"}

    def test_dense_blocks_interleave_with_routed_ones(self, model):
        assert [type(block.mlp) for block in model.layers] == [Mlp, Llama4Moe] * 24


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
    model = load(tmp_path, dispatch=False)
    prompt = f"{BEGIN}<|image|>What is in this image?"
    for size, (rows, columns) in DEFAULT_TILES.items():
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks the tokens against the encoding
        labels = [grid.label for grid in geometry.grids]
        if rows * columns == 1:
            assert labels == ["image"], size
        else:
            assert labels == [f"tile {r},{c}" for r in range(rows) for c in range(columns)] + ["global"], size
        assert all((grid.rows, grid.columns, grid.fold) == (12, 12, 2) for grid in geometry.grids), size
