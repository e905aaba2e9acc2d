"""The Qwen3 line against the conformance suite the core ships."""

import pytest
import torch

from vlreg.testing import build, chat, forget, shared_checkpoint
from vlreg.testing.conformance import (
    AnalysisConformance,
    ExpertsConformance,
    LinearAttentionConformance,
    VisionConformance,
    image,
    no_patterns,
)
from vlreg.testing.conformance.native import QWEN_VIT, composite

PER_CALL = "once per image"
QWEN = composite(QWEN_VIT, vision="model.visual", projector="model.visual.merger")


class TestQwen3VL(AnalysisConformance, VisionConformance):
    checkpoint = "qwen3_vl"
    native = QWEN
    unavailable = no_patterns(PER_CALL) | {"layers.2.deepstack_output": "feed layers[0] to layers[1] only"}
    image_sizes = ((112, 84), (64, 128))


REAL = shared_checkpoint("Qwen3-VL-4B-Instruct")


@pytest.mark.heavy
@pytest.mark.skipif(
    REAL is None,
    reason="../shared/checkpoints/Qwen3-VL-4B-Instruct is absent: the real checkpoints' metadata lives beside the repository",
)
class TestQwen3VLRealGeometry(TestQwen3VL):
    """The whole suite at Qwen3-VL-4B's widths, token ids and template (3 text blocks, a
    3-block tower tapped after each, the DeepStack taps moved inside it), in bfloat16; the
    checkpoint (1.6 GB) is built once for the class and removed after it."""

    build_options = {"source": str(REAL)} if REAL is not None else {}
    image_sizes = ((256, 256),)
    # occlusion at these widths (a 151k-token readout per copy of the prompt) takes about a
    # minute; every analysis helper runs on the tiny checkpoint above
    test_every_analysis_helper_runs_or_says_why_not = None
    unavailable = no_patterns(PER_CALL)

    @pytest.fixture(scope="class")
    @classmethod
    def path(cls):
        folder = build(cls.checkpoint, **cls.build_options)
        yield str(folder)
        forget(folder)

    def test_the_real_sizes_and_the_taps_kept_inside_the_reduced_tower(self, model):
        assert (model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (2560, 32, 8, 128)
        vision = model.vision
        assert (vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.patch_size) == (1024, 16, 64, 16)
        assert vision.deepstack_visual_indexes == (0, 1, 2) and vision.num_layers == model.num_layers == 3
        assert model.embed_tokens.weight is model.lm_head.weight

    def test_a_448_image_through_the_real_template_is_196_tokens_with_deepstack(self, model):
        prompt = chat(model)
        assert prompt.startswith("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>")
        rows = []
        with model.trace(prompt, images=[image(448, 448)]):
            mask = model.vision.image_token_mask.save()
            patches = model.vision.patch_embeddings.save()
            positions = model.vision.position_embeddings.save()
            first_tower = model.vision.layers[0].input.save()
            features = model.vision.image_features.save()
            first = model.layers[0].input.save()
            for k in range(3):
                rows.append((model.layers[k].layer_output.save(), model.layers[k].deepstack_output.save(),
                             model.layers[k + 1].input.save() if k < 2 else model.norm.input.save()))
        assert int(mask.sum()) == 196 and patches.shape == (1, 784, 1024)
        assert torch.equal(first_tower, (patches + positions)[0])
        assert torch.equal(first[mask], features) and features.shape == (196, 2560)
        for out, added, after in rows:
            assert added.shape == (196, 2560)
            assert torch.equal(after[mask], out[mask] + added)


class TestQwen3VLMoe(ExpertsConformance, TestQwen3VL):
    """Qwen3-VL with every text MLP routing each token to 2 of 4 experts."""

    checkpoint = "qwen3_vl_moe"
    unavailable = {**TestQwen3VL.unavailable, "mlp.shared_expert_output": "no shared expert"}


class TestQwen3_5(LinearAttentionConformance, TestQwen3VL):
    """Linear, full, linear text blocks; a tower with learned positions and no DeepStack."""

    checkpoint = "qwen3_5"
    unavailable = no_patterns(PER_CALL) | {"vision.deepstack_features": "no DeepStack taps"}


class TestQwen3_5Moe(ExpertsConformance, TestQwen3_5):
    """Qwen3.5 whose MLPs route each token to 2 of 4 experts beside a gated shared expert."""

    checkpoint = "qwen3_5_moe"


class TestCosmos3Omni(TestQwen3VL):
    """Cosmos3 Omni: Qwen3-VL's model classes under another wrapper (DeepStack included),
    its checkpoint saving a Qwen3VLProcessor (transformers maps none to cosmos3_omni)."""

    checkpoint = "cosmos3_omni"


class TestCohereCompass(TestQwen3VL):
    """Cohere's North: Qwen3-VL's classes under other names (DeepStack included), parallel
    Cohere2 text blocks (a global block with no positions), logits scaled by ``logit_scale``."""

    checkpoint = "cohere_compass"


class TestQwen4Exp(TestQwen3_5Moe):
    """Qwen4-Exp: Qwen3.5-MoE's tower and blocks under two hyper-connection streams that mix
    (its own block identity), n-gram embeddings on block 0, a sparse indexer on block 1, a
    readout with no final norm."""

    checkpoint = "qwen4_exp"
    native = {name: path for name, path in QWEN.items() if name != "norm"}  # the text model has no final norm
    unavailable = {**TestQwen3_5Moe.unavailable, "layers.1.self_attn.indexer_scores": "keeps no tensor of them",
                   **{f"layers.{k}.per_layer_{name}": "only layers [0] add n-gram embeddings"
                      for k in (1, 2) for name in ("ids", "embeddings", "output")}}
    # each writes (or estimates writing) layer_output, the streams' collapse, which takes no write
    analysis_refuses = {helper: "the collapse of every stream" for helper in ("steer", "patch_image",
                                                                                 "attribution_patching")}
