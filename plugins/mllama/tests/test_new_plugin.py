"""`vlreg new-plugin` on Mllama: the survey finds no scatter but the text model's
``cross_attention_states``, and maps the cross-attention blocks; a small copy keeps a
cross-attention block and a tower whose output fits its projector."""

from __future__ import annotations

import torch
from transformers import MllamaConfig

from vlreg import StandardizedTransformer
from vlreg.template.survey import survey
from vlreg.testing import build, shrink, small_copy
from vlreg.testing.conformance import image


def test_the_survey_declares_cross_attention(tmp_path):
    MllamaConfig().save_pretrained(tmp_path)
    found = survey(tmp_path)
    assert found.scatter is None and found.cross == ("model.language_model", "cross_attention_states")
    assert {cls.__name__: standard for cls, standard in found.text_envoys.items()} == {
        "MllamaSelfAttentionDecoderLayer": "Layer", "MllamaTextSelfAttention": "Attention", "MllamaTextMLP": "Mlp",
        "MllamaCrossAttentionDecoderLayer": "CrossAttentionLayer", "MllamaTextCrossAttention": "CrossAttentionMixer"}
    assert not any(line.startswith("no call in the forward") for line in found.notes["wrapper"])


def test_a_cut_keeps_a_cross_attention_block_and_the_towers_output_width():
    config = shrink(MllamaConfig())
    text, vision = config.text_config, config.vision_config
    assert (text.num_hidden_layers, text.cross_attention_layers) == (2, [1])
    assert (vision.num_hidden_layers, vision.num_global_layers, vision.intermediate_layers_indices) == (2, 1, [1])
    assert vision.vision_output_dim == vision.hidden_size * 2


def test_a_small_copy_reads_the_image_in_its_cross_attention_block(tmp_path):
    path = small_copy(build("mllama"), tmp_path / "copy")
    model = StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True, attn_implementation="eager", device="cpu")
    assert model.cross_attention_layers == [1]
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with model.trace(prompt, images=[image(112, 84)]):
        states = model.vision.image_features.save()
        keys = model.layers[1].cross_attn.attention_keys.save()
    assert states.shape == (1, 20, model.hidden_size)
    torch.testing.assert_close(keys, model.layers[1].cross_attn.project(states)[0])
