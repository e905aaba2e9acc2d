"""A NemotronH language model on its own, under the same names: the text conformance
suite, and the Omni's text model beside it block by block."""

import torch

from vlreg import StandardizedTransformer, analysis
from vlreg.testing import build
from vlreg.testing.conformance import ExpertsConformance, MambaConformance, TextConformance

from .test_conformance import INSIDE_THE_SCAN


class TestNemotronHBase(MambaConformance, ExpertsConformance, TextConformance):
    checkpoint = "nemotron_h_base"
    native = {"layers": "model.layers", "embed_tokens": "model.embeddings", "norm": "model.norm_f",
              "lm_head": "lm_head", "layers.0.mamba": "model.layers.0.mixer"}
    load_options = {"task": None}
    unavailable = INSIDE_THE_SCAN
    one_sublayer = True
    renormalized = False


def test_the_omnis_text_model_is_a_base_nemotron_h_block_by_block(tmp_path):
    """The Omni checkpoint's language model saved as a plain NemotronH causal LM loads
    under the same names, and on text its stream is the same at every block."""
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    source = build("nemotron_h_omni")
    AutoModelForImageTextToText.from_pretrained(source).language_model.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(source).save_pretrained(tmp_path)
    omni = StandardizedTransformer(str(source), task="image-text-to-text", dispatch=True, device="cpu")
    base = StandardizedTransformer(str(tmp_path), dispatch=True, device="cpu")
    assert base.family.name == omni.family.name == "nemotron"
    assert [sorted(set(block.__dict__) & {"mamba", "self_attn", "mlp"}) for block in base.layers] == [
        sorted(set(block.__dict__) & {"mamba", "self_attn", "mlp"}) for block in omni.layers]
    similarity = analysis.compare_streams(omni, base, "The Eiffel Tower is in Paris.")
    torch.testing.assert_close(similarity, torch.ones(omni.num_layers, dtype=torch.float64))
