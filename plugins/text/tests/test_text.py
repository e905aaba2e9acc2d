"""A vision-language model's text model beside the base model it came from."""

import pytest
import torch

from vlreg import StandardizedTransformer, analysis
from vlreg.testing import build

TEXT = "The Eiffel Tower is in Paris."


def load(path, **options):
    return StandardizedTransformer(str(path), dispatch=True, device="cpu", **options)


def test_two_loads_of_the_same_weights_agree_and_a_perturbed_copy_departs_at_its_block(tmp_path):
    path = build("qwen2_base")
    a, b = load(path), load(path)
    torch.testing.assert_close(analysis.compare_streams(a, b, TEXT), torch.ones(2, dtype=torch.float64))
    with torch.no_grad():
        b.layers[1].mlp.down_proj.weight.add_(torch.randn_like(b.layers[1].mlp.down_proj.weight))
    similarity = analysis.compare_streams(a, b, TEXT)
    assert similarity[0] == pytest.approx(1.0) and similarity[1] < 0.99


def test_llava_interleaves_qwen2_is_a_base_qwen2_block_by_block(tmp_path):
    """The LLaVA checkpoint's language model saved as a plain Qwen2 causal LM loads under
    the same names, and on text its stream is the same at every block."""
    from transformers import AutoModelForImageTextToText, AutoTokenizer, Qwen2ForCausalLM

    source = build("llava_interleave")
    wrapper = AutoModelForImageTextToText.from_pretrained(source)
    base = Qwen2ForCausalLM(wrapper.config.text_config)
    base.model.load_state_dict(wrapper.model.language_model.state_dict())
    base.lm_head.load_state_dict(wrapper.lm_head.state_dict())
    base.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(source).save_pretrained(tmp_path)

    vlm = StandardizedTransformer(str(source), task="image-text-to-text", dispatch=True, device="cpu")
    qwen2 = load(tmp_path)
    assert qwen2.family.plugins["text"] is vlm.family.plugins["text"]  # the same Qwen2 text adapter
    similarity = analysis.compare_streams(vlm, qwen2, TEXT)
    torch.testing.assert_close(similarity, torch.ones(vlm.num_layers, dtype=torch.float64))
