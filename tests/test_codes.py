"""An image read as discrete codes (`vlreg.plugin.ImageCodes`), on tiny Emu3 and Chameleon
checkpoints (vlreg-chameleon): the vision part a ``vq_config`` makes, ``vision.image_codes``
(`CodesVision`) against the quantizer and the embedding, what an edit of the codes and of
the features each changes, the embedding served per call (`CodeEmbedding`), the forward
order in words, and torch images handed to an image processor that takes none.

The checkpoints are built on disk and loaded through ``from_pretrained``."""

from __future__ import annotations

import pytest
import torch
import transformers

from vlreg import OutOfOrder, Unavailable
from vlreg.core.host.family import parts_of
from vlreg.core.images.processing import for_processor
from vlreg.plugin import ImageCodes
from vlreg.testing import load
from vlreg.testing.conformance import image

CHECKPOINTS = ("emu3", "chameleon")

PICTURE = image(112, 84)


def prompt(model) -> str:
    if model.processor.chat_template is None:  # Chameleon's: text with <image> where the image goes
        return "What is in this image?<image>"
    content = [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                               tokenize=False)


def clean(model) -> dict:
    found = {}
    with model.trace(prompt(model), images=[PICTURE]):
        found["mask"] = model.vision.image_token_mask.save()
        found["codes"] = model.vision.image_codes.save()
        found["features"] = model.vision.image_features.save()
        found["logits"] = model.logits.save()
    return found


def test_a_vq_config_is_the_vision_part_where_there_is_no_vision_config():
    emu3 = transformers.Emu3Config()
    assert {kind: part.model_type for kind, part in parts_of(emu3).items()} == {
        "wrapper": "emu3", "text": "emu3_text_model", "vision": "emu3_vqgan"}
    chameleon = transformers.ChameleonConfig()  # flat: the wrapper is its own text part
    assert parts_of(chameleon)["vision"].model_type == "chameleon_vqgan"
    janus = transformers.JanusConfig()  # a VQ model for image generation beside its tower
    assert parts_of(janus)["vision"].config is janus.vision_config


def test_the_codes_are_what_the_embedding_reads_and_the_features_their_embeddings(model):
    entry = model.family.entry
    assert isinstance(entry, ImageCodes) and entry.codes_call == 1
    found = clean(model)
    codes, features = found["codes"], found["features"]
    assert codes.dim() == 1 and codes.numel() == int(found["mask"].sum()) == features.shape[0]
    assert torch.equal(model.embed_tokens.weight[codes.long()], features)
    assert len(set(codes.tolist())) > 1, "random latents should not all be one code"


def test_the_embedding_serves_the_prompts_call_and_the_codes(model):
    found = clean(model)
    with model.trace(prompt(model), images=[PICTURE]):
        inputs = model.embed_tokens.input.save()
    with model.trace(prompt(model), images=[PICTURE]):
        tokens = model.token_embeddings.save()
        calls = model.embed_tokens.output.save()
    assert isinstance(calls, list) and len(calls) == 2 and torch.equal(calls[0], tokens)
    assert torch.equal(calls[1].reshape(found["features"].shape), found["features"])
    assert torch.equal(inputs[1].reshape(-1), found["codes"])
    with model.trace("Hello"):
        alone = model.embed_tokens.output.save()
    assert len(alone) == 1


def test_an_edit_of_the_codes_is_embedded(model):
    """A code assigned or edited in place is what the embedding reads: the features and
    the stream entering block 0 follow it, and the logits move."""
    plain = clean(model)
    other = int(plain["codes"][0]) + 1
    for way in ("assign", "in place"):
        with model.trace(prompt(model), images=[PICTURE]):
            codes = model.vision.image_codes
            if way == "assign":
                changed = codes.clone()
                changed[0] = other
                model.vision.image_codes = changed
            else:
                codes[0] = other
            features = model.vision.image_features.save()
            first = model.layers[0].input.save()
            logits = model.logits.save()
        assert torch.equal(features[0], model.embed_tokens.weight[other]), way
        assert torch.equal(features[1:], plain["features"][1:]), way
        assert torch.equal(first[plain["mask"]], features), way
        assert not torch.equal(logits, plain["logits"]), way


@pytest.mark.parametrize("new, message", [
    (lambda codes: codes.float(), "integer ids"),
    (lambda codes: codes[:-1], "ids \\(one per image token\\)"),
    (lambda codes: codes + 10_000, "ids of the text vocabulary"),
])
def test_codes_that_are_not_the_vocabularys_ids_are_refused_before_they_are_embedded(model, new, message):
    embedded = []
    hook = model.embed_tokens._module.register_forward_hook(lambda *_: embedded.append(1))
    try:
        with pytest.raises(ValueError, match=message):
            with model.trace(prompt(model), images=[PICTURE]):
                model.vision.image_codes = new(model.vision.image_codes.clone())
                model.logits.save()
    finally:
        hook.remove()
    assert len(embedded) == 1, "only the prompt was embedded"


def test_an_edit_of_the_features_reaches_the_stream_and_leaves_the_codes(model):
    plain = clean(model)
    half = plain["features"].shape[0] // 2
    with model.trace(prompt(model), images=[PICTURE]):
        codes = model.vision.image_codes.save()
        model.vision.image_features[:half] = 0
        first = model.layers[0].input.save()
    assert torch.equal(codes, plain["codes"])
    assert first[plain["mask"]][:half].abs().max() == 0
    assert torch.equal(first[plain["mask"]][half:], plain["features"][half:])


def test_the_codes_are_told_between_the_projector_and_the_features(model):
    told = r"model\.projector, then vision\.image_codes \(the ids the text model's embedding reads\), then vision\.image_features"
    assert "vision.image_codes (the ids" in model.forward_order()
    with pytest.raises(OutOfOrder, match=told):
        with model.trace(prompt(model), images=[PICTURE]):
            model.vision.image_features.save()
            model.vision.image_codes.save()
    rows = list(model.support())
    assert rows.index("vision.tower_output") < rows.index("vision.image_codes") < rows.index("vision.image_features")


def test_the_codes_at_a_later_generation_step_are_refused(model):
    calls = []  # made outside the trace: names first bound inside one do not leave it
    with model.generate(prompt(model), images=[PICTURE], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        for _ in tracer.iter[1:2]:
            calls.append(model.embed_tokens.output.save())
    assert len(calls[0]) == 1, "a later step embeds its new token only"
    with pytest.raises(Unavailable, match="generation step after the first"):
        with model.generate(prompt(model), images=[PICTURE], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
            for _ in tracer.iter[1:2]:
                model.vision.image_codes.save()


def test_a_torch_image_reaches_an_image_processor_that_takes_none():
    """Emu3's image processor (transformers' older kind, with no torchvision or PIL backend)
    fails deep inside on a torch tensor: it is handed the numpy array of the same pixels."""
    emu3, chameleon = load("emu3"), load("chameleon")
    tensor = torch.from_numpy(__import__("numpy").asarray(PICTURE)).permute(2, 0, 1).contiguous()
    (handed,) = for_processor([tensor], emu3.processor)
    assert not isinstance(handed, torch.Tensor) and (handed == tensor.numpy()).all()
    assert for_processor([tensor], chameleon.processor)[0] is tensor  # a backend image processor takes it
    with emu3.trace(prompt(emu3), images=[tensor]):
        from_tensor = emu3.vision.image_codes.save()
    with emu3.trace(prompt(emu3), images=[PICTURE]):
        from_pil = emu3.vision.image_codes.save()
    assert torch.equal(from_tensor, from_pil)
