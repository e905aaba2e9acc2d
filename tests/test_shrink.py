"""`vlreg.testing.shrink` cuts a config so the small model still runs as the real one does."""

import transformers

from vlreg.testing import shrink


def test_a_hybrid_model_keeps_a_block_of_each_kind():
    text = shrink(transformers.Qwen3_5Config()).get_text_config()
    assert text.num_hidden_layers == 2
    assert text.layer_types == ["linear_attention", "full_attention"]


def test_deepstack_taps_move_inside_the_cut_tower():
    vision = shrink(transformers.Qwen3VLConfig()).vision_config  # taps blocks 8, 16, 24 of 27
    assert vision.depth == 2
    assert vision.deepstack_visual_indexes == [0, 1]


def test_other_block_lists_keep_what_fits_else_the_last_block():
    vision = shrink(transformers.Qwen2_5_VLConfig()).vision_config  # full attention at 7, 15, 23, 31
    assert vision.fullatt_block_indexes == [1]


def test_what_the_tower_hands_the_text_model_follows_its_width():
    # Qwen2-VL's vision hidden_size is the merger's output, the text width (as in every
    # published config; transformers' defaults disagree)
    qwen2_vl = shrink(transformers.Qwen2VLConfig(text_config={"hidden_size": 3584}, vision_config={"hidden_size": 3584}))
    assert qwen2_vl.vision_config.hidden_size == qwen2_vl.get_text_config().hidden_size == 64
    assert qwen2_vl.vision_config.embed_dim == 32
    qwen3 = shrink(transformers.Qwen3VLMoeConfig())  # out_hidden_size, whatever the default says
    assert qwen3.vision_config.out_hidden_size == qwen3.get_text_config().hidden_size


def test_rotary_sections_follow_a_head_size_derived_from_the_width():
    config = transformers.Qwen2VLConfig(text_config={"rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24]}})
    text = shrink(config).get_text_config()
    assert sum(text.rope_parameters["mrope_section"]) == text.hidden_size // text.num_attention_heads // 2
    assert text.rope_parameters["mrope_section"] == [2, 3, 3]


def test_a_named_head_size_is_kept_with_its_rotary_settings():
    text = shrink(transformers.Qwen3_5Config()).get_text_config()
    assert text.head_dim == 256 and text.rope_parameters["partial_rotary_factor"] == 0.25
