"""What Apertus 1.5 promises beyond the conformance suite: its image expansion, the parts
and who serves them, each image's codes against the quantizer (offset into the vocabulary,
a call an image), the tower refused on a run of several images and cached a call an image,
and audio refused by name."""

import numpy
import pytest
import torch

pytest.importorskip("transformers.models.apertus1p5", reason="apertus1p5: not in this transformers release (5.24 adds it)")

import vlreg_apertus  # noqa: E402
from vlreg import Unavailable  # noqa: E402
from vlreg.testing import chat  # noqa: E402
from vlreg.testing.conformance import image  # noqa: E402
from vlreg_apertus.checkpoints import EOL, IMAGE, IMAGE_END, IMAGE_START, IMAGE_WRAPPER  # noqa: E402

CHECKPOINT = "apertus1p5"
PICTURES = (image(112, 84), image(40, 32, seed=1))  # resized to 72 x 48 (9 x 6 codes) and 40 x 32 (5 x 4)
GRIDS = ((6, 9), (4, 5))


def test_the_image_expansion(model):
    ids = model.processor(text=chat(model), images=[PICTURES[0]], return_tensors="pt")["input_ids"][0]
    tokens = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    start = tokens.index(IMAGE_START)
    assert model.tokenizer.decode(ids[start + 1 : start + 4]) == "6*9" and tokens[start + 4] == IMAGE_WRAPPER
    rows = tokens[start + 5 : tokens.index(IMAGE_END)]
    assert rows == ([IMAGE] * 9 + [EOL]) * 5 + [IMAGE] * 9  # no end-of-line after the last row


def test_the_parts_and_who_serves_them(model):
    assert model.family.name == "apertus" and model.family.plugins["wrapper"] is vlreg_apertus.plugin
    parts = {kind: part.model_type for kind, part in model.family.parts.items()}
    assert parts == {"wrapper": "apertus1p5", "text": "apertus1p5_text", "vision": "apertus1p5_vision_tokenizer"}
    assert (model.vision.num_layers, model.vision.patch_size, model.vision.codebook_size) == (0, 8, 64)
    assert model.projector._module is model._module.model.vision_tokenizer.quantize


def test_each_images_codes_are_the_quantizers_offset_into_the_vocabulary(model):
    with model.trace(chat(model, images=2), images=list(PICTURES)):
        codes = model.vision.image_codes.save()
        features = model.vision.image_features.save()
    assert [tuple(found.shape) for found in codes] == [(rows * columns,) for rows, columns in GRIDS]
    offset = model._module.config.image_token_offset
    for found, picture in zip(codes, PICTURES):
        with model.trace(chat(model), images=[picture]):
            quantized = model.projector.output.save()
        assert torch.equal(found, quantized.flatten() + offset)  # each image alone, cropped to its own size
    weight = model.embed_tokens._module.weight
    torch.testing.assert_close(features, weight[torch.cat(codes)])


def test_the_tower_is_refused_on_several_images_and_cached_a_call_an_image(model):
    prompt = chat(model, images=2)
    with pytest.raises(Unavailable, match="each image alone"):
        with model.trace(prompt, images=list(PICTURES)):
            model.vision.tower_output.save()
    with model.trace([prompt, prompt], images=[list(PICTURES)] * 2):
        expected = model.logits.save()
    cache = model.vision.cache(prompt, list(PICTURES))
    assert len(cache.output) == 2
    with model.trace([prompt, prompt], images=[list(PICTURES)] * 2):
        cache.replay(copies=2)
        logits = model.logits.save()
    torch.testing.assert_close(logits, expected)


def test_audio_given_to_a_trace_is_refused_before_the_model_runs(model):
    assert "audio tokenizer" in model.support()["audio"]
    with pytest.raises(TypeError, match="'audio' given to the trace"):
        with model.trace(chat(model, {"type": "audio"}), audio=[numpy.ones(24000, numpy.float32)]):
            model.logits.save()
