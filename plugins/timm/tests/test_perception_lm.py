"""What Perception LM adds to the names, on the tiny checkpoint: the Perception Encoder
through timm, the pooling projector, the thumbnail before the tiles, a video's frames."""

import numpy
import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build, chat
from vlreg.testing.conformance import image
from vlreg_timm.checkpoints import PLM_SYSTEM

CHECKPOINT = "perception_lm"


def test_the_template_writes_the_default_system_turn_and_the_image_before_the_text(model):
    prompt = chat(model, text="  What is in this image?  ")
    assert prompt == (
        f"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{PLM_SYSTEM}<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\n<|image|>What is in this image?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    system = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}]
    assert model.processor.apply_chat_template(system, tokenize=False).startswith(
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>")


def test_the_tower_is_the_perception_encoder_its_sizes_off_the_timm_model(model):
    from timm.models.eva import Eva

    vision, timm = model.vision, model.vision.timm_model
    assert isinstance(timm._module, Eva) and model.family.served_by("vision") == "timm"
    assert (vision.class_tokens, vision.patch_size, vision.image_size) == (1, 7, 56)
    assert (vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size) == (32, 2, 16, 64)
    assert vision.num_layers == len(timm.blocks) == 2


def test_the_pooling_projector_averages_2_x_2_patches_and_hands_the_scatter_a_transposed_view(model):
    pictures, prompt = [image(112, 84)], chat(model)
    with model.trace(prompt, images=pictures):
        tower = model.vision.tower_output.save()
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    assert tower.shape == (5, 1 + 64, 32)  # the thumbnail and 4 tiles, a class token and 8 x 8 patches each
    assert projected.shape == (5, 16, 64) and not projected.is_contiguous()
    torch.testing.assert_close(projected.reshape(-1, 64), features)
    projector = model.projector._module
    mapped = projector.linear_2(projector.gelu(projector.linear_1(tower[:, 1:])))  # the class token dropped
    grid = mapped.view(5, 8, 8, 64)
    pooled = grid.view(5, 4, 2, 4, 2, 64).mean((2, 4)).reshape(5, 16, 64)
    torch.testing.assert_close(pooled, projected)


def test_an_edit_of_some_features_in_place_lands_at_their_tokens(model):
    pictures, prompt = [image(112, 84)], chat(model)
    with model.trace(prompt, images=pictures):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    with model.trace(prompt, images=pictures):
        model.vision.image_features[16:20] *= 2
        edited = model.layers[0].input.save()
    rows, before = edited[mask], first[mask]
    torch.testing.assert_close(rows[16:20], 2 * features[16:20])
    assert torch.equal(rows[:16], before[:16]) and torch.equal(rows[20:], before[20:])


def test_the_class_token_reaches_nothing(model):
    """The wrapper drops the tower's class token (``vision_use_cls_token``): an edit of its
    row of ``tower_output`` changes no feature; an edit of a patch's row does."""
    pictures, prompt = [image(112, 84)], chat(model)
    with model.trace(prompt, images=pictures):
        clean = model.vision.image_features.save()
    for row, moves in ((0, False), (1, True)):
        with model.trace(prompt, images=pictures):
            model.vision.tower_output[:, row] += 1
            features = model.vision.image_features.save()
        assert (not torch.equal(features, clean)) == moves


def test_the_sublayers_are_read_after_the_layer_scale(model):
    block = model.vision.layers[0]
    gamma = block._module.gamma_1
    assert gamma is not None and not torch.equal(gamma, torch.ones_like(gamma))
    with model.trace(chat(model), images=[image(112, 84)]):
        attention = block.self_attn.output.save()
        added = block.self_attn.attention_output.save()
    torch.testing.assert_close(added, gamma * attention)


def test_the_fused_path_serves_queries_keys_and_values_and_refuses_the_pattern(model):
    attention = model.vision.layers[1].self_attn
    assert attention._module.fused_attn  # timm's default
    with model.trace(chat(model), images=[image(112, 84)]):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        values = attention.attention_values.save()
        heads = attention.attention_head_outputs.save()
        output = attention.output.save()
    crops, patches = 5, 65
    assert queries.shape == keys.shape == values.shape == (crops, 2, patches, 16)
    pattern = (queries @ keys.transpose(-1, -2) * 16**-0.5).softmax(-1)
    torch.testing.assert_close((pattern @ values).transpose(1, 2), heads)
    torch.testing.assert_close(attention.proj._module(heads.reshape(crops, patches, 32)), output)
    reason = model.support()["vision.self_attn.attention_probabilities"]
    assert "forms no pattern" in reason and "attention_queries and attention_keys" in reason
    with pytest.raises(Unavailable, match="forms no pattern"):
        with model.trace(chat(model), images=[image(112, 84)]):
            attention.attention_scores.save()


def test_the_explicit_path_serves_the_pattern_and_refuses_queries_keys_and_values():
    """timm's explicit path (``fused_attn`` off) forms the scores and the pattern: the same
    pattern the fused path's queries and keys give."""
    model = StandardizedTransformer(str(build("perception_lm")), task="image-text-to-text", dispatch=True, device="cpu")
    prompt, pictures = chat(model), [image(112, 84)]
    attention = model.vision.layers[1].self_attn
    with model.trace(prompt, images=pictures):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
    for block in model.vision.layers:
        block.self_attn._module.fused_attn = False
    with model.trace(prompt, images=pictures):
        scores = attention.attention_scores.save()
        pattern = attention.attention_probabilities.save()
        heads = attention.attention_head_outputs.save()
    torch.testing.assert_close(scores, queries @ keys.transpose(-1, -2) * 16**-0.5)
    torch.testing.assert_close(pattern, scores.softmax(-1))
    assert heads.shape == (5, 65, 2, 16)
    assert "explicit path" in model.support()["vision.self_attn.attention_queries"]
    with model.trace(prompt, images=pictures):
        attention.attention_probabilities[:] = 0
        zeroed = attention.attention_head_outputs.save()
    assert zeroed.abs().max() == 0


def test_a_videos_frames_run_through_the_images_tower(model):
    """A video's frames run through the tower in a call of their own, its features written at
    the second scatter: on a trace of the video alone the tower's values are that call's, and
    the image's values refuse."""
    assert "the video's call's" in model.support()["videos"]
    video = [numpy.random.default_rng(0).integers(0, 255, (4, 56, 56, 3), dtype=numpy.uint8)]
    with pytest.raises(Unavailable, match="no images, only videos"):
        with model.trace(chat(model, "video"), videos=video):
            model.vision.image_features.save()
    with model.trace(chat(model, "video"), videos=video):
        patches = model.vision.layers[0].input.save()
        features = model.vision.video_features.save()
    assert patches.shape[0] == 4 and features.shape[0] % 4 == 0  # a batch row a frame, as many tokens each


def test_images_of_different_tile_counts_are_refused_in_one_call_and_collected_apart(model, tmp_path):
    """The processor stacks each image's tiles into one tensor and fails on images of
    different tile counts: one prompt of both, or two invokes (one processor call), is
    refused naming the counts before the processor runs; collect groups them and stores
    each image's own trace."""
    from vlreg.collect import collect, open_store

    square, wide = image(56, 56), image(112, 56, seed=1)
    with pytest.raises(ValueError, match=r"different numbers \(56 x 56: 5, 112 x 56: 3\)"):
        with model.trace(chat(model, text="Compare them.").replace("<|image|>", "<|image|><|image|>", 1),
                         images=[square, wide]):
            model.logits.save()
    with pytest.raises(ValueError, match=r"the invokes' images cannot go through the processor together"):
        with model.trace() as tracer:
            with tracer.invoke(chat(model), images=[square]):
                pass
            with tracer.invoke(chat(model), images=[wide]):
                model.logits.save()
    summary = collect(model, ["vision.image_features"], {"square": square, "wide": wide}, tmp_path / "store",
                      prompt="What is in this image?", batch=2, progress=False)
    assert any("groups of images of one pixel shape" in note for note in summary.notes)
    store = open_store(tmp_path / "store")
    for name, picture in (("square", square), ("wide", wide)):
        with model.trace(chat(model), images=[picture]):
            features = model.vision.image_features.save()
        assert torch.equal(store["vision.image_features"][store.index.rows(name)], features)
