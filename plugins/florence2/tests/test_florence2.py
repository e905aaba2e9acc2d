"""What Florence-2 adds to the names: the encoder, the image entering it, generation."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.testing.conformance import image

CHECKPOINT = "florence2"


def test_the_task_token_is_the_prompt(model):
    encoding = model.processor(text="<CAPTION>", images=[image(40, 30)], return_tensors="pt")
    text = model.tokenizer.decode(encoding["input_ids"][0][~(encoding["input_ids"][0] == model.processor.image_token_id)])
    assert text == "<s>What does the image describe?</s>"


def test_the_image_enters_the_encoder_and_the_decoder_reads_it(model):
    with model.trace("<CAPTION>", images=[image(40, 30)]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        entering = model.encoder.input_embeddings.save()
        encoded = model.encoder.encoder_output.save()
        keys = model.layers[0].cross_attn.attention_keys.save()
    assert torch.equal(entering[mask], features)
    assert keys.shape[2] == encoded.shape[1] == mask.shape[1]
    with model.trace("<CAPTION>", images=[image(40, 30)]):
        model.encoder.encoder_output[:] = 0
        zeroed = model.layers[0].cross_attn.attention_keys.save()
    bias = model.layers[0].cross_attn.k_proj.bias
    torch.testing.assert_close(zeroed[0, :, 0].flatten(), bias.detach().flatten())


def test_vision_layers_are_refused_by_name(model):
    with pytest.raises(AttributeError, match="DaViT"):
        model.vision.layers


def test_generate_serves_the_image_and_the_encoder_at_the_first_step(model):
    prompt, images = "<CAPTION>", [image(40, 30)]
    with model.generate(prompt, images=images, max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
        features = model.vision.image_features.save()
        entering = model.encoder.input_embeddings.save()
        plain = tracer.result.save()
    with model.trace(prompt, images=images):
        mask = model.vision.image_token_mask.save()
        expected = model.vision.image_features.save()
    torch.testing.assert_close(features, expected)
    assert entering.shape[:2] == mask.shape and plain.shape[-1] >= 3
    with model.generate(prompt, images=images, max_new_tokens=3, min_new_tokens=3, do_sample=False):
        model.vision.image_features[:] = 0
        ablated = model.encoder.input_embeddings.save()
    assert ablated[mask].abs().max() == 0 and torch.equal(ablated[~mask], entering[~mask])


def test_encoder_values_are_refused_after_the_first_step(model):
    with pytest.raises(Unavailable, match="encoder runs once"):
        with model.generate("<CAPTION>", images=[image(40, 30)], max_new_tokens=2, min_new_tokens=2,
                            do_sample=False) as tracer:
            for _ in tracer.iter[1:2]:
                model.encoder.encoder_output.save()
    steps = []
    with model.generate("<CAPTION>", images=[image(40, 30)], max_new_tokens=2, min_new_tokens=2,
                        do_sample=False) as tracer:
        for _ in tracer.iter[:2]:
            steps.append(model.layers[-1].layer_output.save())
    assert [step.shape[1] for step in steps] == [1, 1]
