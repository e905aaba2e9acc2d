"""What people do once their model loads: read and edit the prompt's ids, steer, skip
blocks, read the vocabulary projection anywhere, and generate with interventions — on a
Qwen2-VL and a LLaVA checkpoint."""

from __future__ import annotations

import torch

from vlreg import analysis
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINTS = ("qwen2_vl", "llava_interleave")
PICTURE = image(112, 84)


def logits(model, prompt, images=(PICTURE,)):
    with torch.no_grad(), model.trace(prompt, images=list(images)):
        out = model.logits.save()
    return out


def test_input_ids_are_the_prompts_and_assigning_others_runs_them(model):
    prompt = chat(model)
    encoding = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")
    ids = encoding["input_ids"]
    word = next(i for i in range(ids.shape[1]) if ids[0, i] not in model.tokenizer.all_special_ids)
    others = ids.clone()
    others[0, word] = model.tokenizer.encode(" Paris", add_special_tokens=False)[0]  # another plain token
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        read = model.input_ids.save()
        mask = model.attention_mask.save()
        model.input_ids = others
        edited = model.logits.save()
    assert torch.equal(read, ids) and bool(mask.all())
    with torch.no_grad(), model.trace({**encoding, "input_ids": others}):
        expected = model.logits.save()
    torch.testing.assert_close(edited, expected)
    assert not torch.equal(edited, logits(model, prompt))


def test_steering_adds_the_vector_where_asked(model):
    prompt = chat(model)
    vector = torch.randn(model.hidden_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        clean = model.layers[0].layer_output.save()
    for positions in ("image", "text", "all"):
        with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
            mask = model.vision.image_token_mask.save()
            analysis.steer(model, 0, vector, positions=positions, scale=2.0)
            after = model.layers[1].input.save()
        chosen = {"image": mask, "text": ~mask, "all": torch.ones_like(mask)}[positions]
        torch.testing.assert_close(after[chosen], clean[chosen] + 2.0 * vector)
        assert torch.equal(after[~chosen], clean[~chosen])


def test_steering_one_image_of_two_touches_only_its_tokens(model):
    prompt, pictures = chat(model, images=2), [PICTURE, image(56, 112, seed=3)]
    second = model.vision.geometry(prompt, pictures)[1]
    vector = torch.ones(model.hidden_size)
    with torch.no_grad(), model.trace(prompt, images=pictures):
        clean = model.layers[0].layer_output.save()
    with torch.no_grad(), model.trace(prompt, images=pictures):
        analysis.steer(model, [0], vector, positions=second)
        after = model.layers[1].input.save()
    changed = (after != clean).any(-1)[second.row]
    assert changed.nonzero()[:, 0].tolist() == second.positions.tolist()


def test_skipped_blocks_pass_their_input_through(model):
    prompt = chat(model)
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        entered = model.layers[0].input.save()
        analysis.skip_layers(model, 0, 0)
        passed = model.layers[1].input.save()
        skipped = model.logits.save()
    assert torch.equal(entered, passed)
    assert not torch.equal(skipped, logits(model, prompt))


def test_the_vocabulary_projection_of_the_last_block_is_the_logits(model):
    prompt = chat(model)
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        last = model.layers[-1].layer_output.save()
        out = model.logits.save()
    torch.testing.assert_close(analysis.project_on_vocab(model, last), out)
    probabilities = analysis.next_token_probs(model, prompt, images=[PICTURE])
    torch.testing.assert_close(probabilities, out[0, -1].float().softmax(-1))
    top = analysis.top_tokens(model, out[0, -1], k=3)
    assert [name for name, _ in top] == model.tokenizer.convert_ids_to_tokens(out[0, -1].topk(3).indices.tolist())
    assert top[0][1] >= top[1][1] >= top[2][1]


def test_greedy_generation_is_transformers_and_serves_the_image_at_prefill(model):
    prompt = chat(model)
    encoding = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")
    expected = model._module.generate(**encoding, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    steps = []
    with torch.no_grad(), model.generate(prompt, images=[PICTURE], max_new_tokens=4, min_new_tokens=4,
                                         do_sample=False) as tracer:
        features = model.vision.image_features.save()
        for step in tracer.iter[0:4]:
            steps.append(model.layers[0].layer_output.save())
    with torch.no_grad(), model.generate(prompt, images=[PICTURE], max_new_tokens=4, min_new_tokens=4,
                                         do_sample=False) as tracer:
        generated = tracer.result.save()
    assert torch.equal(generated, expected)
    mask = encoding["input_ids"] == model._module.config.image_token_id
    assert features.shape[0] == int(mask.sum())
    assert [s.shape[1] for s in steps] == [encoding["input_ids"].shape[1], 1, 1, 1]


def test_an_edit_of_the_image_at_prefill_reaches_every_later_step(model):
    prompt = chat(model)
    runs = {}
    for ablate in (False, True):
        steps = []
        with torch.no_grad(), model.generate(prompt, images=[PICTURE], max_new_tokens=3, min_new_tokens=3,
                                             do_sample=False) as tracer:
            if ablate:
                model.vision.image_features[:] = 0
            for step in tracer.iter[0:3]:
                steps.append(model.logits[:, -1].save())
        runs[ablate] = steps
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        model.vision.image_features[:] = 0
        ablated = model.logits[:, -1].save()
    torch.testing.assert_close(runs[True][0], ablated)
    for clean, edited in zip(runs[False], runs[True]):
        assert not torch.equal(clean, edited)
