"""Base language models against the text conformance suite."""

from vlreg.testing.conformance import TextConformance

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
