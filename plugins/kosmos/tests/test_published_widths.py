"""Kosmos-2 at the published widths (``Kosmos2Config()``: microsoft/kosmos-2-patch14-224's),
built on the meta device (no weights): a text model of 24 blocks, 2048 wide, 32 heads of 64,
its MLP 8192 wide; a CLIP-like tower of 24 blocks, 1024 wide, 16 heads, 14-pixel patches of a
224-pixel image (256 patches and a class token); 64 latent queries an image, each box the whole
image. The widths are read from the config class, not recalled."""

import transformers

from vlreg.testing.conformance import PublishedWidths, image


class TestKosmos2Patch14(PublishedWidths):
    config = transformers.Kosmos2Config
    checkpoint = "kosmos-2"
    family = "kosmos"
    parts = {"text": ("kosmos_2_text_model", "vlreg-kosmos"), "vision": ("kosmos_2_vision_model", "vlreg-kosmos")}
    published = {
        "num_layers": 24, "hidden_size": 2048, "num_heads": 32, "num_kv_heads": 32, "head_dim": 64,
        "intermediate_size": 8192, "vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 16,
        "vision.head_dim": 64, "vision.intermediate_size": 4096, "vision.image_size": 224, "vision.patch_size": 14,
        "vision.class_tokens": 1, "projector.dense.weight.shape": (2048, 1024),
        "_module.image_to_text_projection.latent_query.shape": (64, 2048),
    }
    aliases = {"model": {"projector": "image_to_text_projection", "vision": "vision_model.model",
                         "norm": "text_model.model.layer_norm", "lm_head": "text_model.lm_head"}}

    def test_64_latent_query_tokens_an_image_each_box_the_whole_image(self, model):
        for size in ((1024, 768), (224, 224)):
            (geometry,) = model.vision.geometry("What is this?", [image(*size)])
            (grid,) = geometry.grids
            assert (grid.rows, grid.columns) == (1, 64) and grid.boxes.tolist() == [[0.0, 0.0, *size]] * 64
