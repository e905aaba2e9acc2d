"""What Qwen3-VL adds over the Qwen ViT: learned tower positions and DeepStack."""

import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build, chat
from vlreg.testing.conformance import image, sampled_frames_land_in_merge_blocks

CHECKPOINT = "qwen3_vl"


PICTURES = [image(112, 84), image(64, 128, seed=1)]


def test_block_0_receives_the_patch_embeddings_plus_the_resampled_positions(model):
    with model.trace(chat(model, {"type": "image"}, {"type": "image"}), images=PICTURES):
        patches = model.vision.patch_embeddings.save()
        positions = model.vision.position_embeddings.save()
        first = model.vision.layers[0].input.save()
    assert positions.shape == patches.shape == (1, first.shape[0], model.vision.vision_hidden_size)
    assert torch.equal(first, (patches + positions)[0])


def test_deepstack_adds_each_tap_after_its_block_at_the_image_tokens(model):
    taps = len(model.vision.deepstack_visual_indexes)
    assert taps == 2 < model.num_layers
    rows = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(chat(model, {"type": "image"}, {"type": "image"}), images=PICTURES):
        mask = model.vision.image_token_mask.save()
        features = model.vision.deepstack_features.save()
        for k in range(taps):
            rows.append((model.layers[k].layer_output.save(), model.layers[k].deepstack_output.save(),
                         model.layers[k + 1].input.save()))
    for k, (out, added, after) in enumerate(rows):
        assert added.shape == (int(mask.sum()), model.hidden_size)
        assert torch.equal(added, features[k])  # tap k feeds block k
        assert torch.equal(after[mask], out[mask] + added)
        assert torch.equal(after[~mask], out[~mask])


def test_editing_a_deepstack_addition_lands_in_the_next_block(model):
    with model.trace(chat(model, {"type": "image"}), images=PICTURES[:1]):
        mask = model.vision.image_token_mask.save()
        out = model.layers[0].layer_output.save()
        model.layers[0].deepstack_output[:] = 0
        after = model.layers[1].input.save()
    assert torch.equal(after, out)


def test_deepstack_is_absent_where_it_cannot_be(model):
    assert "feed layers[0] to layers[1] only" in model.support()["layers.2.deepstack_output"]
    text = model.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": "What is this?"}]}], add_generation_prompt=True, tokenize=False
    )
    with pytest.raises(Unavailable, match="layers\\[0\\].deepstack_output is unavailable: this trace's input carries no images"):
        with model.trace(text):
            model.layers[0].deepstack_output.save()


def test_qwen3_5_moe_adds_the_gated_shared_expert_to_the_routed_output():
    model = StandardizedTransformer(
        str(build("qwen3_5_moe")), task="image-text-to-text", dispatch=True, device="cpu", attn_implementation="eager"
    )
    mlp = model.layers[0].mlp
    with model.trace(chat(model, {"type": "image"}), images=PICTURES[:1]):
        shared = mlp.shared_expert_output.save()
        routed = mlp.routed_output.save()
        gate = mlp.shared_expert_gate.output.save()
        out = mlp.mlp_output.save()
    assert torch.equal(out, (routed + torch.sigmoid(gate) * shared).reshape(out.shape))
    assert "layers.0,2.linear_attn.attention_output" in model.support()
    assert "layers.1.self_attn.attention_probabilities" in model.support()


def test_a_moe_model_with_dense_blocks_serves_both_kinds():
    """Qwen3-VL-MoE's ``mlp_only_layers`` keep a dense MLP: those blocks' ``mlp`` is a plain
    `Mlp`, the others' a `MoeMlp`, and `support()` says which blocks route."""
    from vlreg.plugin import MoeMlp

    model = StandardizedTransformer(str(build("qwen3_vl_moe", text_config={"mlp_only_layers": [1]})),
                                    task="image-text-to-text", dispatch=True, device="cpu")
    kinds = [isinstance(block.mlp, MoeMlp) for block in model.layers]
    assert kinds == [True, False, True]
    assert model.support()["layers.0,2.mlp.router_logits"] is None
    with model.trace(chat(model, {"type": "image"}), images=PICTURES[:1]):
        routed = model.layers[0].mlp.router_logits.save()
        dense = model.layers[1].mlp.mlp_output.save()
    assert routed.shape[-1] == model.layers[0].mlp.num_experts and dense.shape[-1] == model.hidden_size


def test_a_part_is_served_by_its_own_model_type_whatever_wrapper_hosts_it():
    """The text and vision envoys follow the part's ``model_type``, not the checkpoint's:
    a Qwen3.5 text model under a wrapper this plugin has never heard of gets Qwen3.5's
    blocks (linear and full attention), and Cosmos3 Omni's parts get Qwen3-VL's."""
    import transformers
    from transformers.models.qwen3_5 import modeling_qwen3_5 as qwen3_5
    from transformers.models.qwen3_vl import modeling_qwen3_vl as qwen3_vl

    from vlreg.plugin import Part
    from vlreg.plugin import LinearAttention
    from vlreg_qwen3_vl import plugin

    foreign = transformers.PretrainedConfig()
    foreign.model_type = "someone_elses_wrapper"
    text = transformers.Qwen3_5Config().text_config
    found = plugin.vlreg_envoys(Part("text", text.model_type, text, foreign))
    assert found[qwen3_5.Qwen3_5GatedDeltaNet] is LinearAttention
    assert qwen3_5.Qwen3_5DecoderLayer in found and qwen3_5.Qwen3_5Attention in found

    cosmos = transformers.Cosmos3OmniConfig()
    for kind, config in (("text", cosmos.text_config), ("vision", cosmos.vision_config)):
        found = plugin.vlreg_envoys(Part(kind, config.model_type, config, cosmos))
        assert all(cls.__module__ == qwen3_vl.__name__ for cls in found), kind
    assert plugin.vlreg_envoys(Part("wrapper", "cosmos3_omni", cosmos, cosmos)) is None


def test_a_lit_pixel_in_a_kept_frame_lands_in_its_temporal_patch_in_the_token_whose_box_holds_it(model):
    """At 2 frames a second of a 4-a-second clip of 10 frames, Qwen3-VL's processor keeps 5
    (evenly: 0, 2, 4, 7, 9), folds them 2 at a time (the last patch its last frame twice) and
    writes each patch's mean time: each grid covers its patch's kept frames, at that time."""
    sampled = {"do_sample_frames": True, "fps": 2, "video_metadata": [{"fps": 4, "total_num_frames": 10}]}
    geometry = sampled_frames_land_in_merge_blocks(model, 10, **sampled)
    assert [grid.frames for grid in geometry.grids] == [(0, 2), (4, 7), (9, 9)]
    assert [grid.seconds for grid in geometry.grids] == [0.2, 1.4, 2.2]  # (0 + 2) / 2 / 4 s, as it rounds
