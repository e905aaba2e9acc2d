"""VipLLaVA at the published widths and full depth, built on the meta device (no weights).

``VipLlavaConfig()`` is transformers' default, vip-llava-7b's (read from the class, not
recalled): CLIP ViT-L/14 at 336 pixels (24 blocks, 1024 wide, 16 heads), the projector
reading blocks -2, -5, -8, -11 and 6 (``vision_feature_layer``), on a Llama-7B text model
(32 blocks, 4096 wide). The processor is the tiny checkpoint's tokenizer over CLIP's image
processor at 336 pixels, 576 image tokens an image, as published; it only runs on the prompt.
The other LLaVA lines' real widths are checked in ``test_real_geometry.py``.
"""

import pytest
from transformers import AutoProcessor, CLIPImageProcessor, LlavaProcessor, VipLlavaConfig

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def vipllava(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vip-llava-7b")
    tiny = AutoProcessor.from_pretrained(build("vipllava"))
    images = CLIPImageProcessor(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    LlavaProcessor(image_processor=images, tokenizer=tiny.tokenizer, patch_size=14, vision_feature_select_strategy="default",
                   num_additional_image_tokens=1, chat_template=tiny.chat_template).save_pretrained(folder)
    VipLlavaConfig(image_token_index=tiny.tokenizer.convert_tokens_to_ids("<image>")).save_pretrained(folder)
    return StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, processor=str(folder))


def test_vip_llava_7b_on_meta(vipllava):
    model = vipllava
    assert not model.dispatched
    assert (model.num_layers, model.hidden_size, model.num_heads, model.head_dim) == (32, 4096, 32, 128)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.patch_size) == (24, 1024, 16, 14)
    read_only = model.read_only()
    assert "edit vision.layers[22].layer_output" in read_only["vision.tower_output"]  # block -2 is the last read
    assert "vision.layers.23.layer_output" in read_only and "vision.layers.22.layer_output" not in read_only


def test_an_image_is_576_tokens_over_the_336_pixel_crop(vipllava):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}]
    prompt = vipllava.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    (geometry,) = vipllava.vision.geometry(prompt, [image(640, 480)])
    (grid,) = geometry.grids
    assert (grid.rows, grid.columns, geometry.tokens) == (24, 24, 576)
    assert grid.boxes[0].tolist() == pytest.approx([80.0, 0.0, 80 + 14 * 480 / 336, 14 * 480 / 336])
