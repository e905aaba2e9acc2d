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

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image

CONFIGS = {"got_ocr2": (transformers.GotOcr2Config, transformers.GotOcr2Processor, transformers.GotOcr2ImageProcessor),
           "pp_chart2table": (transformers.PPChart2TableConfig, transformers.PPChart2TableProcessor,
                              transformers.PPChart2TableImageProcessor)}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def published(request, tmp_path_factory):
    name, folder = request.param, tmp_path_factory.mktemp(request.param)
    config_class, processor_class, images_class = CONFIGS[name]
    tiny = transformers.AutoProcessor.from_pretrained(build(name))
    processor_class(image_processor=images_class(size={"height": 1024, "width": 1024}), tokenizer=tiny.tokenizer,
                    chat_template=tiny.chat_template.replace("<imgpad>" * 16, "<imgpad>" * 256)).save_pretrained(folder)
    config_class(image_token_index=tiny.tokenizer.convert_tokens_to_ids("<imgpad>")).save_pretrained(folder)
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, processor=str(folder))
    return name, model


def test_the_published_widths_on_meta(published):
    name, model = published
    assert not model.dispatched and model.family.name == "got_ocr2"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (24, 1024, 16, 16, 64)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size) == (
        12, 768, 12, 64, 3072)
    assert (vision.patch_size, vision.window_size, vision.global_layers, vision.output_channels) == (16, 14, [2, 5, 8, 11], 256)
    rows = model.support()
    windowed = sorted({int(row.split(".")[2]) for row, why in rows.items() if why and row.startswith("vision.layers.")})
    assert windowed == [0, 1, 3, 4, 6, 7, 9, 10]
    assert getattr(model.processor, "num_image_tokens", 256) == 256  # the tower's count is the processor's own


def test_a_crop_is_16_x_16_tokens(published):
    name, model = published
    content = [{"type": "image"}, {"type": "text", "text": "OCR: "}]
    prompt = model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                 tokenize=False)
    (geometry,) = model.vision.geometry(prompt, [image(1280, 720)])
    (grid,) = geometry.grids
    assert (grid.rows, grid.columns, grid.fold, geometry.tokens) == (16, 16, 4, 256)
    assert grid.boxes[0].tolist() == pytest.approx([0.0, 0.0, 2.5 * 16 * 1280 / 1024, 2.5 * 16 * 720 / 1024])
