"""BLIP-2, InstructBLIP and InstructBLIP-Video against the conformance suite the core ships.

What the suite is told, and why:

* prompts come from the tokenizer's chat template: transformers 5.23's ``Blip2Processor``
  and ``InstructBlipProcessor`` drop the ``chat_template`` they are given when they are
  built, so a loaded processor has none, while its tokenizer keeps the checkpoint's;
* the processor writes each image's placeholders itself, before the prompt
  (`Vision.writes_placeholders`), so a prompt of several images holds the placeholders past
  the first, which vlreg refuses (as on Florence-2);
* the wrapper's forward needs an image on every call (`Scatter.needs_images`): every text
  prompt carries one (``text_images``), a prompt without one is refused, and a
  text-generation load is refused before loading;
* the forward runs the tower, the Q-Former and the projector before it embeds the tokens
  (`QueryTokens.order`);
* OPT adds learned position embeddings before its first block, so the features are checked
  where the text model is called (`StandardizedTransformer.prompt_entry`);
* ``tower_patterns`` refuses: an image token is a query that reads every patch, no patch;
* InstructBLIP-Video's images are a clip's frames, its placeholder ``<video>``: the suite's
  image is a clip of one frame (`vlreg_blip.wrappers.per_frame`), and a prompt of two images,
  which no template writes, holds one ``<video>`` placeholder too many.
"""

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, image

TOWER = {
    "vision": "vision_model",
    "projector": "language_projection",
    "lm_head": "language_model.lm_head",
    "vision.layers": "vision_model.encoder.layers",
    "vision.patch_embed": "vision_model.embeddings.patch_embedding",
    "vision.norm": "vision_model.post_layernorm",
    "vision.layers.0.input_layernorm": "vision_model.encoder.layers.0.layer_norm1",
    "vision.layers.0.post_attention_layernorm": "vision_model.encoder.layers.0.layer_norm2",
    "vision.layers.0.self_attn": "vision_model.encoder.layers.0.self_attn",
    "vision.layers.0.mlp": "vision_model.encoder.layers.0.mlp",
    "vision.qformer": "qformer",
    "vision.qformer.layers": "qformer.encoder.layer",
}
OPT = "language_model.model.decoder"
LLAMA = "language_model.model"


class BlipConformance(AnalysisConformance, VisionConformance):
    text_images = 1
    analysis_refuses = {"tower_patterns": "learned queries",
                        "compare_streams": "no prompt without an image"}

    def image_prompt(self, model, images=1, question=None):
        return model.processor.image_token.content * (images - 1) + chat(model, text=question or self.question)

    def text_prompt(self, model, text=None, generation=True):
        prompt = chat(model, text=text or self.text, generation=generation)
        return dict(model.processor(text=prompt, images=[image(56, 56)], return_tensors="pt"))

    def test_vision_values_are_in_forward_order(self, model):
        """The tower, the Q-Former and the projector run before the tokens are embedded; the
        features are written in after."""
        assert model.vision.values()[0] == "image_token_mask"
        rows = list(model.support())
        assert rows[:4] == ["input_ids", "attention_mask", "vision.image_token_mask", "vision.patch_embeddings"]
        order = ["vision.tower_output", "vision.qformer.layer_output", "vision.qformer.query_output", "token_embeddings",
                 "vision.image_features", "input"]
        assert [rows.index(row) for row in order] == sorted(rows.index(row) for row in order)
        assert rows[-1] == "logits"

    def test_text_only_load_has_no_images(self, path, model):
        """Refused before loading: the wrapper runs its tower on every forward, and a
        text-generation load has no processor to give it pixels."""
        with pytest.raises(ValueError, match="task='image-text-to-text'"):
            self.load(path, task=None)

    def test_the_features_are_the_projected_queries(self, model):
        """``image_features`` is the projector's output over ``query_output``, the Q-Former's
        stream at its queries: ``num_query_tokens`` rows an image."""
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            queries = model.vision.qformer.query_output.save()
            features = model.vision.image_features.save()
        qformer = model.vision.qformer
        assert tuple(queries.shape) == (1, qformer.num_query_tokens, qformer.qformer_hidden_size)
        torch.testing.assert_close(model.projector._module(queries).reshape(features.shape), features)

    def test_editing_a_qformer_block_reaches_the_features(self, model):
        """A Q-Former block's ``layer_output`` takes edits: the next block reads them, and the
        features move."""
        prompt, images = self.image_prompt(model), self.images()[:1]
        with model.trace(prompt, images=images):
            clean = model.vision.image_features.save()
        with model.trace(prompt, images=images):
            model.vision.qformer.layers[0].layer_output[:] = 0
            after = model.vision.qformer.layers[1].input.save()
            features = model.vision.image_features.save()
        assert after.abs().max() == 0 and not torch.equal(features, clean)

    def test_a_text_prompt_is_refused_before_the_model_runs(self, model):
        ran = []
        hook = model._module.register_forward_pre_hook(lambda *_: ran.append(1))
        try:
            with pytest.raises(ValueError, match="every prompt needs an image"):
                with model.trace(chat(model, text=self.text)):
                    model.logits.save()
        finally:
            hook.remove()
        assert not ran


class TestBlip2(BlipConformance):
    """The BLIP tower and Q-Former on OPT: its MLP is served at ``fc2``, its attention
    projects its heads through ``out_proj``."""

    checkpoint = "blip-2"
    native = {
        **TOWER,
        "layers": f"{OPT}.layers",
        "embed_tokens": f"{OPT}.embed_tokens",
        "norm": f"{OPT}.final_layer_norm",
        "layers.0.mlp": f"{OPT}.layers.0.fc2",
        "layers.0.input_layernorm": f"{OPT}.layers.0.self_attn_layer_norm",
        "layers.0.post_attention_layernorm": f"{OPT}.layers.0.final_layer_norm",
    }
    o_proj = "out_proj"


class TestInstructBlip(BlipConformance):
    """The same tower; a Q-Former that also reads the instruction (its tokens after the
    queries); a Llama text model, served by vlreg-llava."""

    checkpoint = "instructblip"
    native = {
        **TOWER,
        "layers": f"{LLAMA}.layers",
        "embed_tokens": f"{LLAMA}.embed_tokens",
        "norm": f"{LLAMA}.norm",
    }

    def test_the_qformer_reads_the_instruction(self, model):
        """The Q-Former's blocks run over the queries and the instruction's tokens after
        them (the processor's ``qformer_input_ids``); ``query_output`` is the queries' rows,
        and the instruction changes the features."""
        images = self.images()[:1]
        encoding = model.processor(text=self.image_prompt(model), images=images, return_tensors="pt")
        with model.trace(self.image_prompt(model), images=images):
            block = model.vision.qformer.layers[-1].layer_output.save()
            queries = model.vision.qformer.query_output.save()
            features = model.vision.image_features.save()
        instruction = encoding["qformer_input_ids"].shape[1]
        assert block.shape[1] == model.vision.qformer.num_query_tokens + instruction
        assert torch.equal(queries, block[:, : model.vision.qformer.num_query_tokens])
        with model.trace(self.image_prompt(model, question="Describe the picture."), images=images):
            other = model.vision.image_features.save()
        assert not torch.equal(features, other)


class TestInstructBlipVideo(TestInstructBlip):
    """InstructBLIP on a clip: the suite's image is a clip of one frame, its query tokens
    written at ``<video>`` (the config's ``video_token_id``); the same tower, Q-Former and
    Llama text model as InstructBLIP's."""

    checkpoint = "instructblipvideo"

    def image_prompt(self, model, images=1, question=None):
        return model.processor.video_token.content * (images - 1) + chat(model, text=question or self.question)
