"""Base language models against the text conformance suite."""

from vlreg.testing.conformance import ExpertsConformance, TextConformance

BASE = {"layers": "model.layers", "embed_tokens": "model.embed_tokens", "norm": "model.norm", "lm_head": "lm_head"}




class TestQwen2Base(TextConformance):
    checkpoint = "qwen2_base"
    native = BASE
    load_options = {"task": None}


class TestQwen3Base(TestQwen2Base):
    checkpoint = "qwen3_base"


class TestLlamaBase(TestQwen2Base):
    checkpoint = "llama_base"


class TestMistralBase(TestQwen2Base):
    checkpoint = "mistral_base"


class TestDeepseekV3Base(ExpertsConformance, TestQwen2Base):
    """DeepSeek-V3: latent attention, a dense first block, then DeepSeek's group-routed experts."""

    checkpoint = "deepseek_v3_base"
    renormalized = False  # sigmoid scores within the best groups, renormalized and scaled (GroupRoutedMoe.route)
