"""The toy model: trained here on scenes whose answer sits at one image token, so vlreg's
analysis helpers are checked to find that token, not only to run.

Each scene's answer is the colour of the named shape, and the shape lies inside one
token's cell: ablating, occluding or patching that token must move the answer, and the
same edits elsewhere must not. The figures are over `N` held-out scenes, on the toy
shipped with vlreg (`toy.build`); the helpers' over `SAMPLE` of them a run, drawn from the
run's seed (`vlreg.testing.sampling`; their margins hold on any such sample of these).
"""

from __future__ import annotations

import random

import pytest
import torch

from vlreg import analysis
from vlreg.testing import toy, toy_training
from vlreg.testing.sampling import repeat, sample

pytestmark = pytest.mark.heavy  # the helpers over many scenes: started first under make test

N = 100
#: Scenes a run the helpers are checked on (each costs a few traces).
SAMPLE = 25
CHECKPOINT = toy.build()  # the shipped toy's folder


@pytest.fixture(scope="module")
def held_out():
    return toy.scenes(N)


@pytest.fixture(scope="module")
def sampled(held_out):
    """`SAMPLE` of the held-out scenes, with their places among them."""
    return sample(list(enumerate(held_out)), SAMPLE, "toy scenes")


def covering(geometry, box, margin: float = 0.0) -> list[int]:
    """The image tokens whose boxes overlap ``box`` grown by ``margin`` pixels."""
    x0, y0, x1, y1 = box
    b = geometry.boxes
    hit = (b[:, 0] < x1 + margin) & (x0 - margin < b[:, 2]) & (b[:, 1] < y1 + margin) & (y0 - margin < b[:, 3])
    return hit.nonzero()[:, 0].tolist()


def away(geometry, scene, count: int, seed: int) -> list[int]:
    """``count`` tokens at least a cell away from every shape."""
    near = {t for _, box in scene.shapes.values() for t in covering(geometry, box, margin=toy.CELL)}
    return random.Random(seed).sample([t for t in range(geometry.tokens) if t not in near], count)


def word(model, token: int) -> str:
    return model.tokenizer.decode(int(token))


def test_training_sees_what_the_processor_makes(model, held_out):
    """Training makes its pixel values by hand, in a batch: they must be the processor's."""
    pictures = [scene.image for scene in held_out[:8]]
    made = model.processor.image_processor(images=pictures, return_tensors="pt")["pixel_values"]
    torch.testing.assert_close(toy_training.pixels(pictures, model.processor.image_processor), made)


def test_scenes_are_fixed_and_each_target_sits_in_one_token(model, held_out):
    again = toy.scenes(3)
    assert [s.prompt for s in again] == [s.prompt for s in held_out[:3]]
    messages = [{"role": "user", "content": [{"type": "text", "text": f"What color is the {held_out[0].shape}?"},
                                             {"type": "image"}]}]
    assert held_out[0].prompt == model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert all(a.image.tobytes() == b.image.tobytes() for a, b in zip(again, held_out))
    assert toy.scenes(3, seed=1)[0].image.tobytes() != held_out[0].image.tobytes()
    for scene in held_out:
        (geometry,) = model.vision.geometry(scene.prompt, [scene.image])
        assert len(covering(geometry, scene.target_box)) == 1
        assert scene.answer == scene.shapes[scene.shape][0] and len(model.tokenizer.encode(scene.answer)) == 1


def test_the_toy_loads_like_any_checkpoint_and_answers(model, held_out):
    with torch.no_grad(), model.trace([s.prompt for s in held_out], images=[s.image for s in held_out]):
        answers = model.logits[:, -1].argmax(-1).save()
    accuracy = sum(word(model, a) == s.answer for a, s in zip(answers, held_out)) / N
    print(f"held-out accuracy {accuracy:.2f}")
    assert accuracy >= 0.95


def test_build_is_the_shipped_checkpoint_and_copies(tmp_path, monkeypatch):
    """`RECIPE`'s toy is the one in the package: nothing is trained or cached."""
    monkeypatch.setenv("VLREG_CACHE", str(tmp_path / "cache"))
    assert toy.build() == toy.SHIPPED and toy.shipped_report()["key"] == toy.key()
    copy = toy.build(tmp_path / "toy")
    assert (copy / "model.safetensors").read_bytes() == (toy.SHIPPED / "model.safetensors").read_bytes()
    assert not (tmp_path / "cache").exists()


def test_ablating_the_target_token_removes_the_answer(model, sampled):
    """After Neo et al. (2024): object tokens removed, object identification fails."""
    right = {"clean": 0, "target": 0, "away": 0}
    for i, scene in sampled:
        (geometry,) = model.vision.geometry(scene.prompt, [scene.image])
        target = covering(geometry, scene.target_box)
        for where, tokens in (("target", target), ("away", away(geometry, scene, len(target), i))):
            ablation = analysis.ablate_image(model, scene.prompt, [scene.image], mode="mean", tokens=tokens)
            right[where] += word(model, ablation.ablated.argmax()) == scene.answer
        right["clean"] += word(model, ablation.clean.argmax()) == scene.answer
    accuracy = {where: count / len(sampled) for where, count in right.items()}
    print(f"accuracy with the tokens mean-ablated: {accuracy}")
    assert accuracy["clean"] - accuracy["target"] >= 0.5, (accuracy, repeat())
    assert accuracy["clean"] - accuracy["away"] <= 0.1, (accuracy, repeat())


def test_occlusion_puts_the_target_on_top(model, sampled):
    precision = 0.0
    for _, scene in sampled:
        found = analysis.occlusion(model, scene.prompt, [scene.image], target=scene.answer, batch=36)
        target = covering(found.geometry[0], scene.target_box)
        top = found.scores.topk(len(target)).indices.tolist()
        precision += len(set(top) & set(target)) / len(target) / len(sampled)
    print(f"occlusion precision at k = target tokens: {precision:.2f}")
    assert precision >= 0.8, (precision, repeat())


def test_patching_the_target_with_another_shapes_colour_flips_the_answer(model, sampled):
    """Patch the target's tokens from the same scene with its colour swapped for another
    shape's: at some block the answer becomes that colour, and `patch_image`'s effects
    on that colour's logit are largest there."""
    flips = torch.zeros(model.num_layers)
    effects = torch.zeros(model.num_layers)
    for i, scene in sampled:
        other = random.Random(i).choice(sorted(set(scene.shapes) - {scene.shape}))
        colour = scene.shapes[other][0]
        source = scene.recoloured(colour)
        (geometry,) = model.vision.geometry(scene.prompt, [scene.image])
        patched = analysis.patch_image(model, scene.prompt, [scene.image], [source.image], target=colour,
                                       tokens=covering(geometry, scene.target_box))
        flips += (patched.patched.argmax(-1) == patched.target).float() / len(sampled)
        effects += patched.effects / len(sampled)
    print(f"flip rate per block {flips.tolist()}, mean effect per block {effects.tolist()}")
    best = int(flips.argmax())
    assert flips[best] >= 0.8, (flips.tolist(), repeat())
    assert int(effects.argmax()) == best, (effects.tolist(), repeat())


def test_the_last_token_attends_to_the_target(model, sampled):
    """The question's answer is read from the target's token: at some block the last
    position's attention to the image lands there far above chance (1/36)."""
    share = torch.zeros(model.num_layers)
    for _, scene in sampled:
        seen = analysis.attention_to_images(model, scene.prompt, [scene.image])
        weights = seen.weights[0].mean(1)
        target = covering(seen.geometry[0], scene.target_box)
        share += weights[:, target].sum(-1) / weights.sum(-1) / len(sampled)
    print(f"attention share on the target per block {share.tolist()}")
    assert share.max() >= 0.25, (share.tolist(), repeat())
