"""GOT-OCR 2.0 and PP-Chart2Table at the published widths, built on the meta device (no weights).

``GotOcr2Config()`` and ``PPChart2TableConfig()`` are transformers 5.23's defaults (read from
the classes, not recalled): SAM's ViT-B tower (12 blocks, 768 wide, 12 heads, 16-pixel
patches of a 1024-pixel crop: 64 x 64 patches; 14 x 14 windows, global blocks 2, 5, 8 and
11; a 256-channel neck) on a Qwen2-0.5B text model (24 blocks, 1024 wide), as the published
checkpoints. The processor is the tiny checkpoint's tokenizer over the published 1024-pixel
image processor: 256 tokens a crop, the count GOT's processor writes by default.
"""

import pytest
import transformers

from vlreg.testing import build, chat
from vlreg.testing.conformance import PublishedWidths, image

INTERIOR = ("attention_queries", "attention_keys", "attention_values", "attention_scores", "attention_probabilities",
            "attention_head_outputs")
#: The blocks that attend within windows: every one but the global blocks 2, 5, 8 and 11.
WINDOWED = (0, 1, 3, 4, 6, 7, 9, 10)


class TestGotOcr2(PublishedWidths):
    config = transformers.GotOcr2Config
    processor_class = transformers.GotOcr2Processor
    image_processor_class = transformers.GotOcr2ImageProcessor
    checkpoint = "got_ocr2"
    family = "got_ocr2"
    parts = {"text": ("qwen2", "vlreg-llava"), "vision": ("got_ocr2_vision", "vlreg-got-ocr2")}
    published = {
        "num_layers": 24, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 16, "head_dim": 64,
        "vision.num_layers": 12, "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.head_dim": 64,
        "vision.intermediate_size": 3072, "vision.patch_size": 16, "vision.window_size": 14,
        "vision.global_layers": [2, 5, 8, 11], "vision.output_channels": 256,
    }
    refused = {f"vision.layers.{block}.self_attn.{name}": "attends within 14 x 14-patch windows"
               for block in WINDOWED for name in INTERIOR}

    def published_config(self, tokenizer=None):
        """The defaults name the image token by its published id: the tiny tokenizer's ``<imgpad>``."""
        token = {"image_token_index": tokenizer.convert_tokens_to_ids("<imgpad>")} if tokenizer is not None else {}
        return self.config(**token)

    def published_processor(self, tokenizer):
        """The published image processor (1024-pixel crops) and a template writing 256 tokens a crop."""
        tiny = transformers.AutoProcessor.from_pretrained(build(self.checkpoint))
        images = self.image_processor_class(size={"height": 1024, "width": 1024})
        return self.processor_class(image_processor=images, tokenizer=tiny.tokenizer,
                                    chat_template=tiny.chat_template.replace("<imgpad>" * 16, "<imgpad>" * 256))

    def test_the_processor_writes_the_towers_count(self, model):
        assert getattr(model.processor, "num_image_tokens", 256) == 256

    def test_a_crop_is_16_x_16_tokens(self, model):
        (geometry,) = model.vision.geometry(chat(model, text="OCR: "), [image(1280, 720)])
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, grid.fold, geometry.tokens) == (16, 16, 4, 256)
        assert grid.boxes[0].tolist() == pytest.approx([0.0, 0.0, 2.5 * 16 * 1280 / 1024, 2.5 * 16 * 720 / 1024])


class TestPPChart2Table(TestGotOcr2):
    config = transformers.PPChart2TableConfig
    processor_class = transformers.PPChart2TableProcessor
    image_processor_class = transformers.PPChart2TableImageProcessor
    checkpoint = "pp_chart2table"
    parts = {"text": ("qwen2", "vlreg-llava"), "vision": ("pp_chart2table_vision", "vlreg-got-ocr2")}
