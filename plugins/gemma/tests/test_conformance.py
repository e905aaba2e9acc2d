"""The Gemma families against vlreg's conformance suite."""

import math

import torch

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

TEXT = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.norm",
    "lm_head": "lm_head",
}
SIGLIP = "model.vision_tower"
SIGLIP_NAMES = {
    **TEXT,
    "vision": SIGLIP,
    "projector": "model.multi_modal_projector",
    "vision.layers": f"{SIGLIP}.encoder.layers",
    "vision.patch_embed": f"{SIGLIP}.embeddings.patch_embedding",
    "vision.norm": f"{SIGLIP}.post_layernorm",
    "vision.layers.0.input_layernorm": f"{SIGLIP}.encoder.layers.0.layer_norm1",
    "vision.layers.0.post_attention_layernorm": f"{SIGLIP}.encoder.layers.0.layer_norm2",
}


class TestGemma3(AnalysisConformance, VisionConformance):
    """Sandwich-normed text blocks, whose attention and MLP outputs are read after their
    post-norms, so the plain sum holds; a SigLIP tower served by vlreg-llava."""

    checkpoint = "gemma3"
    native = SIGLIP_NAMES


class TestPaliGemma(AnalysisConformance, VisionConformance):
    """A plain Gemma text model; the processor takes no prompt without an image, and the
    prompt is a prefix attended bidirectionally."""

    checkpoint = "paligemma"
    native = SIGLIP_NAMES
    text_images = 1
    bidirectional_prefix = True
    analysis_refuses = {"compare_streams": "no prompt without an image"}


class TestPaliGemma2(TestPaliGemma):
    """PaliGemma 2: the same wrapper on a sandwich-normed Gemma 2 text model, whose
    softcapped attention transformers runs only eager."""

    checkpoint = "paligemma2"
    supports_sdpa = False
    # a cap the tiny model's logits reach, so softmax(capped) and softmax(lm_head's output)
    # differ past float error (30, the real one, bites only at trained-model logit sizes)
    build_options = {"text_config": {"final_logit_softcapping": 1.0}}


class TestGemma4(AnalysisConformance, VisionConformance):
    """Sandwich-normed blocks with per-layer inputs and a learned layer scalar (no plain
    sum); the Gemma 4 tower's blocks are sandwich-normed too, read at their post-norms."""

    checkpoint = "gemma4"
    native = {
        **TEXT,
        "vision": "model.vision_tower",
        "projector": "model.embed_vision",
        "vision.layers": "model.vision_tower.encoder.layers",
        "vision.patch_embed": "model.vision_tower.patch_embedder.input_proj",
    }
    plain_sum = False
    # block 1 of the tiny Gemma 4 stores the keys and values block 3 reuses
    analysis_refuses = {"skip_layers": r"layers \[3\] reuse its keys and values"}


class TestGemma4Unified(AnalysisConformance, VisionConformance):
    """No tower: the vision part is the embedder, with no blocks. Its projector runs on
    each image's row padded to the budget; the padding is dropped before the scatter."""

    checkpoint = "gemma4_unified"
    native = {**TEXT, "vision": "model.embed_vision", "projector": "model.embed_vision.multimodal_embedder"}
    plain_sum = False
    projector_output_is_features = False
    tower_blocks = False
    analysis_refuses = {"tower_patterns": "has no blocks"}


class TestGemma3n(AnalysisConformance, VisionConformance):
    """Blocks of several streams (AltUp): ``input`` and ``layer_output`` are the active one,
    the plain sum does not hold (the block's own identity replaces it), and the final norm
    reads every stream combined, so the lens check reads its input. A MobileNetV5 tower with
    no standard blocks, its stem the patch embedding; the projector embeds the prompt's ids,
    then the tower's grid (its second call is the features)."""

    checkpoint = "gemma3n"
    #: transformers' own forward fails with the tower on disk (it moves the pixels to a tower
    #: weight's device, the meta device when offloaded), and the tower has no standard blocks:
    #: the text blocks go there.
    on_disk = "layers"
    native = {**TEXT, "vision": "model.vision_tower", "projector": "model.embed_vision",
              "vision.patch_embed": "model.vision_tower.timm_model.conv_stem"}
    plain_sum = False
    last_block_is_read_out = False
    tower_blocks = False
    projector_feature_calls = slice(1, None)
    image_sizes = ((40, 30),)
    # block 1 of the tiny Gemma 3n stores the keys and values block 3 reuses
    analysis_refuses = {"tower_patterns": "no standard block's shape",
                        "skip_layers": r"layers \[3\] reuse its keys and values"}

    def test_block_identity(self, model):
        """AltUp around the sublayers and the laurel: ``activated == (predicted +
        attention_output + laurel_output) / sqrt(2) + mlp_output``; the active stream leaving
        the block is the prediction moved along ``activated - predicted`` by a scalar per
        token; the per-layer input is added to every other stream AltUp corrected."""
        rows = []
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            for block in model.layers:
                rows.append([value.save() for value in (
                    block.predicted, block.laurel_output, block.self_attn.attention_output, block.mlp.mlp_output,
                    block.activated, block.source.self_altup_correct_0.output.clone(), block.per_layer_output,
                    block.layer_output, block.layer_streams)])
        active = model.layers[0].active_stream
        for predicted, laurel, attention, mlp, activated, corrected, per_layer, out, streams in rows:
            torch.testing.assert_close((predicted + attention + laurel) / math.sqrt(2) + mlp, activated)
            step, moved = activated - predicted, out - predicted
            scale = (moved * step).sum(-1, keepdim=True) / (step * step).sum(-1, keepdim=True)
            torch.testing.assert_close(moved, scale * step, atol=1e-5, rtol=1e-4)
            others = [k for k in range(streams.shape[0]) if k != active]
            assert torch.equal(out, corrected[active]) and per_layer.abs().max() > 0
            torch.testing.assert_close(streams[others], corrected[others] + per_layer)

    def test_features_are_what_block_0_receives_at_the_image_tokens(self, model):
        """As the suite's, but the vision range of the vocabulary (the end-of-image marker) is
        embedded by the projector's first call, not by ``embed_tokens``: block 0 receives the
        features at the mask, the projector's embedding of the ids in the vision range, and
        the token embeddings everywhere else."""
        config = model._module.config.vision_config
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            ids = model.input_ids.save()
            mask = model.vision.image_token_mask.save()
            embeddings = model.token_embeddings.save()
            by_id = model.projector.output[0].save()
            features = model.vision.image_features.save()
            first = self.entry(model).save()
        vision_range = (ids >= config.vocab_offset) & (ids < config.vocab_offset + config.vocab_size)
        assert int(mask.sum()) == features.shape[0] > 0 and (vision_range & ~mask).any()
        assert features.shape[1] == model.hidden_size
        assert torch.equal(first[mask], features)
        expected = torch.where(vision_range[..., None], by_id, embeddings)
        assert torch.equal(first[~mask], expected[~mask])


class TestShieldGemma2(AnalysisConformance, VisionConformance):
    """Gemma 3 under a ShieldGemma2Config, its weights found through a key mapping and its
    prompts encoded as given; a text-generation load would build its classifier, which does
    not generate, so it is refused."""

    checkpoint = "shieldgemma2"
    native = SIGLIP_NAMES
    text_generation_load = False
