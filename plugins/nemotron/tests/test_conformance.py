"""NemotronH Omni against the conformance suite the core ships."""

import torch
from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

from vlreg.core.envoys.mamba import scan_in_one_call
from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, MambaConformance, VisionConformance

#: What transformers 5.25 forms inside mamba2_scan_forward, which nnsight cannot open (`Mamba.one_call`).
INSIDE_THE_SCAN = {f"layers.0.mamba.{name}": "mamba2_scan_forward" for name in ("time_steps", "decays", "state_output")
                   } if scan_in_one_call(NemotronHMamba2Mixer) else {}


class TestNemotronHOmni(AnalysisConformance, MambaConformance, ExpertsConformance, VisionConformance):
    """Mamba-2, experts, attention and MLP blocks, one sublayer each; the RADIO tower; the
    features written in by the wrapper's own forward (the model root)."""

    checkpoint = "nemotron_h_omni"
    native = {
        "layers": "language_model.model.layers",
        "embed_tokens": "language_model.model.embeddings",
        "norm": "language_model.model.norm_f",
        "lm_head": "language_model.lm_head",
        "layers.0.mamba": "language_model.model.layers.0.mixer",
        "layers.1.mlp": "language_model.model.layers.1.mixer",
        "layers.2.self_attn": "language_model.model.layers.2.mixer",
        "layers.3.mlp": "language_model.model.layers.3.mixer",
        "vision": "vision_model",
        "vision.patch_embed": "vision_model.embeddings",
        "vision.layers": "vision_model.encoder.layer",
        "vision.layers.0.self_attn": "vision_model.encoder.layer.0.attention",
        "projector": "multi_modal_projector",
    }
    unavailable = INSIDE_THE_SCAN
    one_sublayer = True
    renormalized = False  # a sigmoid router: the top-k sigmoid scores, renormalized


class TestNemotronHOmniBfloat16(TestNemotronHOmni):
    """The same in bfloat16, the published checkpoint's dtype (the Mamba scan runs in
    float32 inside, and its values are checked at bfloat16's tolerance)."""

    load_options = {"dtype": torch.bfloat16}
