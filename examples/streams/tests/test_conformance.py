"""Qwen4-Exp, served by this outside plugin, against vlreg's whole conformance suite: no test
of the suite is overridden or set aside (the remote ones included: installed, the plugin's
envoy classes travel by reference, as on a server where it is installed)."""

from vlreg.testing.conformance import (AnalysisConformance, ExpertsConformance, LinearAttentionConformance,
                                       VisionConformance, no_patterns)
from vlreg.testing.conformance.native import QWEN_VIT, composite
from vlreg_streams import LENS, MeanStreams, plugin


class TestQwen4ExpServedAsTheStreamsMean(AnalysisConformance, ExpertsConformance, LinearAttentionConformance,
                                         VisionConformance):
    checkpoint = "qwen4_exp"
    native = {name: path for name, path in composite(QWEN_VIT, vision="model.visual",
                                                     projector="model.visual.merger").items() if name != "norm"}
    unavailable = no_patterns("once per image") | {f"layers.{k}.per_layer_output": "adds no n-gram" for k in (1, 2)}
    analysis_refuses = {"logit_lens": LENS, "project_on_vocab": LENS, "attribution_patching": "no gradient reaches it"}

    def test_this_plugin_serves_every_part(self, model):
        assert set(model.family.plugins.values()) == {plugin} and isinstance(model.layers[0], MeanStreams)
