"""`vlreg.testing.shrink` cuts a config so the small model still runs as the real one does."""

import transformers

from vlreg.testing import shrink


def test_a_hybrid_model_keeps_a_block_of_each_kind():
    text = shrink(transformers.Qwen3_5Config()).get_text_config()
    assert text.num_hidden_layers == 2
    assert text.layer_types == ["linear_attention", "full_attention"]


def test_a_list_per_block_is_cut_with_the_blocks_and_shared_keys_and_values_are_dropped():
    # Gemma 3n: an MLP width and an activation sparsity per block; its last 15 of 35 blocks
    # reuse earlier blocks' keys and values, which a cut to a block of each kind cannot keep
    text = shrink(transformers.Gemma3nTextConfig())
    assert text.layer_types == ["sliding_attention", "full_attention"]
    assert text.intermediate_size == [128, 128] and text.activation_sparsity_pattern == [0.95, 0.95]
    assert text.num_kv_shared_layers == 0 and text.kv_sharing_modes == [None, None]
    again = transformers.Gemma3nTextConfig.from_dict(text.to_dict())  # validated again, as a load does
    assert again.intermediate_size == [128, 128]


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


def test_widths_given_per_stage_or_per_bank_stay_lists():
    # Florence-2's DaViT gives each of its four stages a width, heads and a depth
    florence = shrink(transformers.Florence2Config())
    vision, text = florence.vision_config, florence.get_text_config()
    assert list(vision.embed_dim) == [32] * 4 and list(vision.num_heads) == [2] * 4
    assert list(vision.depths) == [1, 1, 2, 1], "a stage's blocks are cut, never added"
    assert vision.projection_dim == text.hidden_size, "what the tower hands the text model follows its width"
    assert text.encoder_layers == text.decoder_layers == 2  # BART's decoder is cut too
    # ERNIE-4.5-VL gives its expert banks (text, vision) each a width
    ernie = shrink(transformers.Ernie4_5_VLMoeConfig()).get_text_config()
    assert ernie.moe_intermediate_size == [32, 32]


def test_the_configs_other_parts_are_cut_and_follow_the_widths_they_read():
    blip = shrink(transformers.Blip2Config())
    assert blip.qformer_config.num_hidden_layers == 2
    assert blip.qformer_config.encoder_hidden_size == blip.vision_config.hidden_size == 32
    idefics = shrink(transformers.Idefics2Config())
    assert idefics.perceiver_config.hidden_size == idefics.get_text_config().hidden_size == 64
    assert idefics.perceiver_config.resampler_depth == 2
    omni = shrink(transformers.Qwen2_5OmniThinkerConfig())
    assert omni.audio_config.encoder_layers == 2
    assert omni.audio_config.output_dim == omni.get_text_config().hidden_size
    emu3 = shrink(transformers.Emu3Config(vocabulary_map={"<image>": 5}))
    vq = emu3.vq_config
    assert (vq.base_channels, vq.num_res_blocks) == (32, 1)
    assert vq.hidden_size == vq.base_channels * vq.channel_multiplier[-1], "its attention is as wide as its last level"
    assert vq.codebook_size == 32768, "the codes are the tokenizer's: never cut"


def blip2_folder(path):
    """A BLIP-2 checkpoint folder with its real processor (a tiny tokenizer, 56-pixel
    images) and the published config's tower, whose initializer range is 1e-10."""
    from transformers import Blip2Config, Blip2Processor, BlipImageProcessor

    from vlreg.testing import tokenizer

    tok = tokenizer(["<pad>", "</s>", "<image>"], pad_token="<pad>", eos_token="</s>")
    pad, eos, image = tok.convert_tokens_to_ids(["<pad>", "</s>", "<image>"])
    Blip2Processor(image_processor=BlipImageProcessor(size={"height": 56, "width": 56}), tokenizer=tok,
                   num_query_tokens=4).save_pretrained(path)
    Blip2Config(num_query_tokens=4, image_token_index=image, vision_config={"image_size": 56},
                text_config={"vocab_size": len(tok), "pad_token_id": pad, "eos_token_id": eos, "bos_token_id": eos},
                ).save_pretrained(path)
    return path


def test_a_small_copy_of_a_family_with_a_qformer_runs_and_its_tower_computes(tmp_path):
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vlreg.testing import small_copy

    source = blip2_folder(tmp_path / "source")
    assert transformers.AutoConfig.from_pretrained(source).vision_config.initializer_range == 1e-10
    path = small_copy(source, tmp_path / "copy")
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    assert len(model.qformer.encoder.layer) == 2
    processor = AutoProcessor.from_pretrained(path)
    inputs = processor(images=Image.new("RGB", (56, 56), "red"), text="a photo", return_tensors="pt")
    with torch.no_grad():
        embedded = model.vision_model.embeddings(inputs["pixel_values"])
        after = model.vision_model.encoder.layers[0](embedded)
        logits = model(**inputs).logits
    # with the published 1e-10 the embeddings are ~1e-9 and a block adds exactly nothing
    assert embedded.std() > 0.1 and (after - embedded).abs().max() > 1e-3
    assert logits.shape[1] == inputs["input_ids"].shape[1] and torch.isfinite(logits).all()
