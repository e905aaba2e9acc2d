"""What is particular to Gemma 3n, beyond the conformance suite (whose Gemma 3n class
checks the AltUp block's own identity): AltUp's values reaching what the block computes,
the MobileNetV5 tower's values, the embedder called twice, the processor's markers, the
tower cache against a wrapper that scales the tower's output in place, and audio refused.
(Blocks of several streams in general: tests/test_streams.py.)"""

import numpy
import pytest
import torch

from vlreg import Unavailable
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

CHECKPOINT = "gemma3n"

PICTURE = image(40, 30)


def test_the_processor_writes_the_images_soft_tokens_between_its_markers(model):
    prompt = chat(model, {"type": "image"})
    assert prompt == ("<bos><start_of_turn>user\n<image_soft_token>What is in this image?<end_of_turn>\n"
                      "<start_of_turn>model\n")
    ids = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")["input_ids"][0].tolist()
    tokens = model.tokenizer.convert_ids_to_tokens(ids)
    start = tokens.index("<start_of_image>")
    assert tokens[start + 1:start + 6] == ["<image_soft_token>"] * 4 + ["<end_of_image>"]
    config = model._module.config
    assert config.vision_config.vocab_offset == ids[start + 5] < config.audio_config.vocab_offset  # the vision range


def test_predicted_and_activated_are_what_the_block_computes_with(model):
    """An edit of ``predicted`` reaches the sublayers (their queries move); one of
    ``activated`` reaches what AltUp's correction hands every stream."""
    prompt = chat(model, {"type": "image"})
    with model.trace(prompt, images=[PICTURE]):
        queries = model.layers[1].self_attn.attention_queries.save()
        streams = model.layers[1].layer_streams.save()
    with model.trace(prompt, images=[PICTURE]):
        model.layers[1].predicted[:] = 0
        zeroed = model.layers[1].self_attn.attention_queries.save()
    with model.trace(prompt, images=[PICTURE]):
        model.layers[1].activated[:] = 0
        corrected = model.layers[1].layer_streams.save()
    assert not torch.equal(queries, zeroed)
    assert all(not torch.equal(corrected[k], streams[k]) for k in range(streams.shape[0]))


def test_the_tower_serves_its_stem_and_its_grid(model):
    config = model._module.config
    with model.trace(chat(model, {"type": "image"}), images=[PICTURE]):
        stem = model.vision.patch_embeddings.save()
        grid = model.vision.tower_output.save()
        features = model.vision.image_features.save()
    side = model.vision.image_size // 2  # the stem's stride-2 convolution over the processor's square
    assert stem.shape == (1, side * side, model.vision.patch_embedding_size)
    pixels = model.processor(text=chat(model, {"type": "image"}), images=[PICTURE], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        returned = model._module.model.vision_tower(pixel_values=pixels, do_pooling=False).last_hidden_state
        projected = model._module.model.embed_vision(inputs_embeds=grid * config.vision_config.hidden_size ** 0.5)
    # a token a row, as the tower returned it: the wrapper scales its own tensor in place after
    assert grid.shape == (1, config.vision_soft_tokens_per_image, model.vision.vision_hidden_size)
    torch.testing.assert_close(grid, returned.flatten(2).transpose(1, 2))
    torch.testing.assert_close(projected.reshape(features.shape), features)
    with pytest.raises(AttributeError, match="vision.layers is not served: .* MobileNetV5"):
        with model.trace(chat(model, {"type": "image"}), images=[PICTURE]):
            model.vision.layers[0].layer_output.save()
    with pytest.raises(Unavailable, match="MobileNetV5"):
        model.vision.num_heads


def test_an_edit_of_the_grid_reaches_the_features(model):
    prompt = chat(model, {"type": "image"})
    with model.trace(prompt, images=[PICTURE]):
        model.vision.tower_output[:, 0] = 0
        features = model.vision.image_features.save()
    with torch.no_grad():
        zero = model._module.model.embed_vision(inputs_embeds=torch.zeros(1, 1, model.vision.vision_hidden_size))
    torch.testing.assert_close(features[0], zero.reshape(-1))


def test_the_projector_embeds_the_ids_then_the_image(model):
    """``embed_vision`` is called on the prompt's ids (every position; the forward keeps the
    vision range's rows), then on the tower's grid: with no image, on the ids alone."""
    with model.trace(chat(model, {"type": "image"}), images=[PICTURE]):
        calls = model.projector.output.save()
        features = model.vision.image_features.save()
    by_id, by_image = calls
    assert by_id.shape[:2] == model.processor(text=chat(model, {"type": "image"}), images=[PICTURE],
                                              return_tensors="pt")["input_ids"].shape
    assert torch.equal(by_image.reshape(features.shape), features)
    with model.trace(chat(model, images=0)):
        alone = model.projector.output.save()
    assert len(alone) == 1


def test_a_replay_leaves_the_tower_cache_as_the_tower_returned_it(model):
    """The wrapper scales the tower's output in place (by sqrt(hidden_size)): each replay
    is handed its own copy, so the cache still holds what the tower returned. (The
    embedder's norm hides one scaling from the logits; a sweep of replays would compound
    them until the grid overflows.)"""
    prompt = chat(model, {"type": "image"})
    cache = model.vision.cache(prompt, [PICTURE])
    returned = cache.output.last_hidden_state.clone()
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        expected = model.logits.save()
    for _ in range(2):
        with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
            cache.replay()
            logits = model.logits.save()
        assert torch.equal(cache.output.last_hidden_state, returned)
        torch.testing.assert_close(logits, expected)


def test_audio_given_to_a_trace_is_refused_before_the_model_runs(model):
    assert "audio tower" in model.support()["audio"] and model.family.unserved == {"audio_config": "gemma3n_audio"}
    with pytest.raises(TypeError, match="'audio' given to the trace"):
        with model.trace(chat(model, {"type": "audio"}), audio=[numpy.ones(16000, numpy.float32)]):
            model.logits.save()


def test_a_gemma3n_whose_tower_is_no_mobilenet_is_refused_by_name(tmp_path):
    """transformers' own tests build Gemma 3n on a timm ViT: served as a MobileNetV5 it would
    list values it has not and give the tower's output transposed; it is refused at load,
    before any weight is read, naming the tower."""
    import json
    import shutil

    from vlreg import NoFamily, StandardizedTransformer

    folder = tmp_path / "gemma3n_vit"
    shutil.copytree(build("gemma3n"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["vision_config"]["architecture"] = "vit_small_patch16_224"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(NoFamily, match=r"timm's 'vit_small_patch16_224', not a MobileNetV5"):
        StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False)
