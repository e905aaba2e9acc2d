"""GOT-OCR 2.0, served by vlreg-got-ocr2: what the suite (`test_conformance.TestGotOcr2`) cannot say.

* the logits a trace reads are transformers' own: its processor (told the tower's count of
  tokens a crop, which it does not save) and its class, loaded apart, on the same prompt and
  image; vlreg's processor writes the tower's count unless a call says otherwise;
* the tower's values as the tower computes them: the first block's input is the patch
  embedding plus the learned positions, the neck's output is ``tower_output``, and a
  windowed block's attention output is read where the block puts the windows back together
  (the block identity holds on it, and a write there lands).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForImageTextToText, GotOcr2Processor

from vlreg import Unavailable
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

TOKENS = 16  # 16 x 16 patches halved twice: 4 x 4


CHECKPOINT = "got_ocr2"


def test_the_logits_are_transformers_own(model):
    path = build("got_ocr2")
    picture = image(80, 60)
    own = GotOcr2Processor.from_pretrained(path)
    assert own.num_image_tokens == 256 and model.processor.num_image_tokens == TOKENS  # the published crop's count
    inputs = own(text=chat(model, text="OCR: "), images=[picture], num_image_tokens=TOKENS, return_tensors="pt")
    assert torch.equal(inputs["input_ids"], model.processor(text=chat(model, text="OCR: "), images=[picture], return_tensors="pt")["input_ids"])
    with model.trace(chat(model, text="OCR: "), images=[picture]):
        logits = model.logits.save()
    transformers_model = AutoModelForImageTextToText.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = transformers_model(**inputs).logits
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match="does not match|do not match"):  # a call's count still wins
        with model.trace(chat(model, text="OCR: "), images=[picture], num_image_tokens=4):
            model.logits.save()


def test_the_tower_values_are_the_towers_own(model):
    with model.trace(chat(model, text="OCR: "), images=[image(80, 60)]):
        patches = model.vision.patch_embeddings.save()
        first = model.vision.layers[0].input.save()
        last = model.vision.layers[-1].layer_output.save()
        neck = model.vision.tower_output.save()
    tower = model.vision._module
    torch.testing.assert_close(first, patches + tower.pos_embed.flatten(1, 2))
    grid = last.reshape(1, 16, 16, -1)
    torch.testing.assert_close(neck, tower.neck(grid).flatten(2).transpose(1, 2))
    assert neck.shape[-1] == model.vision.output_channels == 16


def test_a_windowed_blocks_attention_output_is_read_over_the_grid(model):
    """Block 0 attends within 6 x 6 windows of the grid padded to 18 x 18: what it adds is read
    after the windows are put back together, a row per patch of the image, and a write there
    reaches the next block; its interior is refused, naming the global block."""
    assert model.vision.global_layers == [1] and model.vision.window_size == 6
    prompt, pictures = chat(model, text="OCR: "), [image(80, 60)]
    with model.trace(prompt, images=pictures):
        added = model.vision.layers[0].self_attn.attention_output.save()
    assert tuple(added.shape) == (1, 256, 32)
    with model.trace(prompt, images=pictures):
        x = model.vision.layers[0].input.save()
        model.vision.layers[0].self_attn.attention_output[:] = 0
        mlp = model.vision.layers[0].mlp.mlp_output.save()
        out = model.vision.layers[0].layer_output.save()
    torch.testing.assert_close(x + mlp, out)
    with pytest.raises(Unavailable, match=r"block 0 attends within 6 x 6-patch windows.*vision.global_layers: \[1\]"):
        with model.trace(prompt, images=pictures):
            model.vision.layers[0].self_attn.attention_probabilities.save()
