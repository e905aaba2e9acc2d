"""The image's entries (`vlreg.core.images.entries`): ``vision.image_features`` is an edit
that lands whatever layout the wrapper hands the scatter.

A scatter's features are served as ``[image_tokens, hidden]``, a view of what the model
holds. Where their layout does not allow one (Perception LM's pooling hands the scatter a
transposed tensor, so the reshape copies), the copy is written into the model first and
served as a view of that (`Entry.views_features`, `value.viewable`). Here Qwen2-VL's scatter
is handed such a tensor by the trace itself (its native call's inputs swapped), so the copy
case runs on the cheapest family, alone and in a batch of invokes."""

import torch

from vlreg.testing.conformance import image

CHECKPOINT = "qwen2_vl"

SCATTER = "inputs_embeds_masked_scatter_0"


def prompt(model):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def transposed(features: torch.Tensor) -> torch.Tensor:
    """The rows as a ``[2, tokens / 2, hidden]`` tensor not laid out for a flat view (the
    scatter reads it in its own order, which the served rows follow)."""
    return features.reshape(-1, 2, features.shape[-1]).transpose(0, 1)


def test_features_the_scatter_gets_transposed_are_served_as_a_view_of_a_copy_it_holds(model):
    pictures = [image(112, 84)]
    call = getattr(model.model.source, SCATTER)
    with model.trace(prompt(model), images=pictures):
        mask = model.vision.image_token_mask.save()
        (held, features), kwargs = call.inputs
        call.inputs = ((held, transposed(features)), kwargs)
        served = model.vision.image_features
        served[:2] = 0
        first = model.layers[0].input.save()
    assert first[mask][:2].abs().max() == 0 and first[mask][2:].abs().max() > 0


def test_in_a_batch_of_invokes_the_copy_is_held_whole_and_each_edits_its_rows(model):
    pictures = [image(112, 84)]
    call = getattr(model.model.source, SCATTER)
    with model.trace() as tracer:
        with tracer.invoke():  # the whole batch: the scatter gets every row transposed
            mask = model.vision.image_token_mask.save()
            (held, features), kwargs = call.inputs
            call.inputs = ((held, transposed(features)), kwargs)
            first = model.layers[0].input.save()
        with tracer.invoke(prompt(model), images=pictures):
            pass
        with tracer.invoke(prompt(model), images=pictures):
            model.vision.image_features[:2] = 0
    assert mask.shape[0] == 2
    assert first[1][mask[1]][:2].abs().max() == 0
    assert first[1][mask[1]][2:].abs().min() > 0 and first[0][mask[0]].abs().min() > 0


def test_features_laid_out_for_a_view_are_served_as_one(model):
    pictures = [image(112, 84)]
    views = []
    with model.trace(prompt(model), images=pictures):
        mask = model.vision.image_token_mask.save()
        served = model.vision.image_features
        views.append(served._base is not None)
        served[:2] = 0
        first = model.layers[0].input.save()
    assert views == [True]
    assert first[mask][:2].abs().max() == 0 and first[mask][2:].abs().max() > 0


def test_an_unedited_copy_writes_back_what_was_there(model):
    pictures = [image(112, 84)]
    call = getattr(model.model.source, SCATTER)
    runs = []
    for read in (False, True):
        with model.trace(prompt(model), images=pictures):
            (held, features), kwargs = call.inputs
            call.inputs = ((held, transposed(features)), kwargs)
            if read:
                model.vision.image_features.save()
            runs.append(model.logits.save())
    assert torch.equal(runs[0], runs[1])
