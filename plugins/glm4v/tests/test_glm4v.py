"""What the GLM-V line adds over the Qwen ViT and a plain pre-norm block: its sandwich
norms under names of its own, the tower's downsampling convolution and learned positions,
the sigmoid group router, and parts served by their model types."""

from __future__ import annotations

import pytest
import torch

from vlreg.plugin import GroupRoutedMoe, Mlp, MoeMlp
from vlreg.testing import chat, load
from vlreg.testing.conformance import image, sampled_frames_land_in_merge_blocks
from vlreg_glm4v.checkpoints import MOE
from vlreg_glm4v.text import SandwichAttention, SandwichMlp

CHECKPOINT = "glm4v"


PICTURES = [image(112, 84)]


def test_each_sublayer_adds_what_its_post_norm_returns(model):
    """``post_attention_layernorm`` is GLM's norm *before* the MLP: it reads the stream
    after the attention's addition. What each sublayer adds is its post-norm's output."""
    block = model.layers[1]
    with model.trace(chat(model), images=PICTURES):
        x = block.input.save()
        attention = block.self_attn.output[0].save()
        attention_normed = block.post_self_attn_layernorm.output.save()
        added = block.self_attn.attention_output.save()
        pre_mlp = block.post_attention_layernorm.input.save()
        pre_mlp_out = block.post_attention_layernorm.output.save()
        mlp_in = block.mlp.input.save()
        mlp = block.mlp.output.save()
        mlp_added = block.mlp.mlp_output.save()
        out = block.layer_output.save()
    norm = block.post_self_attn_layernorm._module
    assert torch.equal(added, attention_normed) and torch.equal(added, norm(attention))
    assert torch.equal(pre_mlp, x + added)
    assert torch.equal(mlp_in, pre_mlp_out)
    assert torch.equal(mlp_added, block.post_mlp_layernorm._module(mlp))
    assert torch.equal(out, x + added + mlp_added)
    assert isinstance(block.self_attn, SandwichAttention) and isinstance(block.mlp, SandwichMlp)


def test_the_tower_output_is_the_normed_stream_before_the_downsampling_convolution(model):
    vision = model.vision
    with model.trace(chat(model), images=PICTURES):
        last = vision.layers[-1].layer_output.save()
        out = vision.tower_output.save()
        merged = model.projector.input.save()
        returned = vision.output.last_hidden_state.save()
        features = vision.image_features.save()
    assert torch.equal(out, vision.post_layernorm._module(last))
    # what the tower returns as its last hidden state is the convolution's output, one row a token
    assert returned.shape == (features.shape[0], model._module.config.vision_config.out_hidden_size)
    assert torch.equal(merged, returned)
    with model.trace(chat(model), images=PICTURES):
        vision.tower_output[:] = 0
        zeroed = vision.image_features.save()
    conv_bias = vision.downsample._module.bias
    assert not torch.equal(zeroed, features)
    torch.testing.assert_close(model.projector._module(conv_bias.expand_as(returned)), zeroed)


def test_sizes_are_read_off_the_modules(model):
    config = model._module.config.vision_config
    assert model.vision.intermediate_size == config.out_hidden_size == 64 != config.intermediate_size
    assert model.vision.vision_hidden_size == 32 and model.vision.head_dim * model.vision.num_heads == 32
    assert model.intermediate_size == model.layers[0].mlp._module.down_proj.in_features == 128
    assert model.layers[0].mlp._module.gate_up_proj.out_features == 2 * model.intermediate_size


def test_block_0_receives_the_normed_patch_embeddings_plus_the_resampled_positions(model):
    pictures = [image(112, 84), image(56, 112, seed=1)]
    with model.trace(chat(model, images=2), images=pictures):
        conv = model.vision.patch_embed.output.save()
        patches = model.vision.patch_embeddings.save()
        positions = model.vision.position_embeddings.save()
        first = model.vision.layers[0].input.save()
    assert patches.shape == positions.shape == (1, first.shape[0], model.vision.vision_hidden_size)
    assert torch.equal(patches[0], model.vision.post_conv_layernorm._module(conv))
    assert torch.equal(first, (patches + positions)[0])
    with model.trace(chat(model, images=2), images=pictures):
        model.vision.position_embeddings[:] = 0
        unplaced = model.vision.layers[0].input.save()
    assert torch.equal(unplaced, patches[0])


def test_glm_ocr_has_no_learned_positions():
    ocr = load("glm_ocr")
    assert "position_embeddings" not in type(ocr.vision).values()
    with ocr.trace(chat(ocr), images=PICTURES):
        patches = ocr.vision.patch_embeddings.save()
        first = ocr.vision.layers[0].input.save()
    assert torch.equal(first, patches[0])
    assert isinstance(ocr.layers[0].mlp, SandwichMlp)


def test_the_router_chooses_by_the_biased_sigmoid_and_weighs_by_the_plain_one():
    """``e_score_correction_bias`` moves the choice, not the weights: biased toward expert 3
    (so toward its group, experts 2 and 3), every token takes experts 2 and 3, weighted by
    their unbiased sigmoids renormalized and scaled."""
    moe = load("glm4v_moe")
    dense, routed = moe.layers[0].mlp, moe.layers[1].mlp
    assert type(dense) is Mlp and isinstance(routed, GroupRoutedMoe) and isinstance(routed, MoeMlp)
    assert (routed.num_experts, routed.top_k, routed.n_group, routed.topk_group) == (4, 2, 2, 1)
    assert routed.routed_scaling_factor == 2.5 and routed.intermediate_size == MOE["moe_intermediate_size"]
    routed.gate._module.e_score_correction_bias[3] = 100.0
    with moe.trace(chat(moe), images=PICTURES):
        logits = routed.router_logits.save()
        weights = routed.expert_weights.save()
        indices = routed.expert_indices.save()
    assert (indices.sort(-1).values == torch.tensor([2, 3])).all()
    chosen = logits.sigmoid().gather(1, indices)
    torch.testing.assert_close(weights, chosen / chosen.sum(-1, keepdim=True) * 2.5)


def test_a_glm46v_checkpoint_with_the_moe_text_model_serves_it():
    """GLM-4.6V's config takes its parts by model type: with ``glm4v_moe_text`` (as the
    published GLM-4.6V pairs it with GLM-4.1V's tower) the blocks are GLM-4.5V's, plain
    pre-norm and routed, while the tower stays GLM-4.1V's."""
    text = {"model_type": "glm4v_moe_text", **MOE}
    glm46v = load("glm46v", {"text_config": text})
    parts = glm46v.family.parts
    assert (parts["text"].model_type, parts["vision"].model_type) == ("glm4v_moe_text", "glm4v_vision")
    assert type(glm46v.layers[0].mlp) is Mlp and isinstance(glm46v.layers[1].mlp, GroupRoutedMoe)
    assert not isinstance(glm46v.layers[0].self_attn, SandwichAttention)
    rows = []  # made outside the trace
    with glm46v.trace(chat(glm46v), images=PICTURES):
        position = glm46v.vision.position_embeddings.save()
        for block in glm46v.layers:
            rows.append((block.input.save(), block.self_attn.attention_output.save(), block.mlp.mlp_output.save(),
                         block.layer_output.save()))
    for x, attention, mlp, out in rows:
        torch.testing.assert_close(x + attention + mlp, out)
    assert position.shape[-1] == glm46v.vision.vision_hidden_size


def test_a_videos_tokens_are_told_from_an_images_by_the_processors_token_types(model):
    """GLM writes a video's frames with the image's placeholder: the masks follow the
    processor's ``mm_token_type_ids`` (1 an image's token, 2 a video's), so on a video
    prompt the image mask is empty and the video mask is every placeholder, and a trace
    holding both is refused before the model runs (GLM's forward cannot take both)."""
    frames = [image(56, 56, seed=index) for index in range(4)]
    prompt = chat(model, "video")
    encoding = model.processor(text=[prompt], videos=[frames], return_tensors="pt")
    placeholders = encoding["input_ids"] == model.image_token_id
    with model.trace(prompt, videos=[frames]):
        images = model.vision.image_token_mask.save()
        videos = model.vision.video_token_mask.save()
    assert not images.any() and torch.equal(videos, placeholders)
    assert torch.equal(videos, encoding["mm_token_type_ids"] == 2)
    with pytest.raises(ValueError, match="images and videos in one trace.*mm_token_type_ids"):
        with model.trace(chat(model, "video", "image"), images=PICTURES, videos=[frames]):
            model.logits.save()


def test_a_lit_pixel_in_a_kept_frame_lands_in_its_temporal_patch_in_the_token_whose_box_holds_it(model):
    """At 2 frames a second of a 4-a-second clip of 10 frames (3 seconds to GLM, which counts
    the last frame's second whole), GLM's processor keeps 6 (0, 2, 4, 6, 8, 9), folds them 2 at a
    time and writes the whole second of each patch's first frame after it: each grid covers
    its patch's kept frames, at that second."""
    sampled = {"do_sample_frames": True, "fps": 2, "video_metadata": [{"fps": 4, "total_num_frames": 10}]}
    geometry = sampled_frames_land_in_merge_blocks(model, 10, **sampled)
    assert [grid.frames for grid in geometry.grids] == [(0, 2), (4, 6), (8, 9)]
    assert [grid.seconds for grid in geometry.grids] == [0, 1, 2]
