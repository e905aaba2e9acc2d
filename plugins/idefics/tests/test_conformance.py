"""Idefics2, Idefics3 and SmolVLM against the conformance suite the core ships.

The default image (112 x 84) is cut into 2 x 2 tiles and a global image on the tiny
Idefics3 and SmolVLM checkpoints: 5 frames of 2 x 2 tokens each, so every test runs
through the tiles. On the tiny Idefics2 it is cut into 4 crops and the whole image, each
frame resampled to 4 latents; the crops are smaller than the whole image, so the tower
runs on padded frames. IDEFICS (1) reads its image by cross-attention (`TestIdefics`).
"""

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, image
from vlreg.testing.conformance.cross import CrossAttentionConformance
from vlreg.testing.conformance.native import SIGLIP, composite

NATIVE = composite(SIGLIP, text="model.text_model", vision="model.vision_model", projector="model.connector")


class TestIdefics3(AnalysisConformance, VisionConformance):
    """The features reach the embeddings through ``self.inputs_merger(..., image_hidden_states=)``."""

    checkpoint = "idefics3"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = NATIVE
    processor_options = {"do_image_splitting": False}  # the global image only: fewer image tokens


class TestSmolVLM(AnalysisConformance, VisionConformance):
    """The features reach the embeddings through ``inputs_embeds.masked_scatter``."""

    checkpoint = "smolvlm"
    native = NATIVE


class TestIdefics2(AnalysisConformance, VisionConformance):
    """The features are the perceiver's latents, written through ``self.inputs_merger``."""

    checkpoint = "idefics2"
    native = NATIVE
    # smaller frames, the same tokens: transformers' own Idefics2Processor call with
    # do_image_splitting=False writes a split image's tokens for one frame (test_idefics2)
    processor_options = {"size": {"shortest_edge": 16, "longest_edge": 32}}
    analysis_refuses = {"tower_patterns": "resampler"}


IDEFICS_NATIVE = {
    "vision": "model.vision_model",
    "projector": "model.perceiver_resampler",
    "embed_tokens": "model.embed_tokens",
    "norm": "model.norm",
    "vision.layers": "model.vision_model.encoder.layers",
    "vision.patch_embed": "model.vision_model.embeddings.patch_embedding",
    "layers.0": "model.gated_cross_attn_layers.0",
    "layers.1": "model.layers.0",
    "layers.2": "model.gated_cross_attn_layers.1",
    "layers.3": "model.layers.1",
    "layers.2.cross_attn": "model.gated_cross_attn_layers.1.cross_attn",
    "layers.3.self_attn": "model.layers.1.self_attn",
}


class TestIdefics(CrossAttentionConformance):
    """IDEFICS (1) against the cross-attention conformance suite the core ships.

    The tiny checkpoint's text model has 2 blocks, each after a gated cross-attention block
    (``cross_layer_interval`` 1), so ``layers`` is cross 0, self 0, cross 1, self 1. Its
    processor stretches every image to 28 pixels (a class token and 2 x 2 patches of 14) and
    the perceiver resamples it to 4 latents: the states hold 4 positions an image.

    What the suite is told, and why:

    * the processor writes each image's placeholders itself, after the BOS and before the
      prompt (`Vision.writes_placeholders`), and its template is the tokenizer's;
    * the text model's forward needs an image on every call (`CrossAttention.needs_images`):
      every text prompt carries one (``text_images``), one without is refused, and so is a
      text-generation load.
    """

    checkpoint = "idefics"
    native = IDEFICS_NATIVE
    text_images = 1
    #: refused before loading: the forward needs an image on every call
    text_generation_load = False

    def image_prompt(self, model, images=1, question=None):
        """The processor writes the first image's placeholders itself: a prompt of more
        images holds the rest, which vlreg refuses (`Vision.writes_placeholders`)."""
        return "<image>" * (images - 1) + chat(model, text=question or self.question)

    # -- what IDEFICS adds -------------------------------------------------------

    def test_layers_run_the_cross_attention_block_before_each_block(self, model):
        """``layers`` is cross 0, self 0, cross 1, self 1: each entry the envoy of its own
        module, each block's output what the next one takes."""
        text = model.model
        assert all(block is own for block, own in zip(model.layers, (text.gated_cross_attn_layers[0], text.layers[0],
                                                                  text.gated_cross_attn_layers[1], text.layers[1])))
        assert model.cross_attention_layers == [0, 2] and model.num_layers == 4
        reads = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            for block in model.layers:
                reads.append((block.input.save(), block.layer_output.save()))
        for (_, output), (following, _) in zip(reads, reads[1:]):
            assert torch.equal(output, following)

    def test_each_images_latents_are_its_own_over_the_whole_image(self, model):
        """Two prompts of an image each: an image's positions are its row's 4 latents, each
        over the whole image (the processor stretches it to the tower's square), and a
        change to one image's pixels changes its own latents only."""
        prompt = self.image_prompt(model)
        pictures = [image(56, 42, 0), image(20, 90, 1)]
        first, second = model.vision.geometry([prompt, prompt], pictures)
        assert (first.row, second.row) == (0, 1) and first.positions.tolist() == second.positions.tolist() == [0, 1, 2, 3]
        assert second.boxes.tolist() == [[0, 0, 20, 90]] * 4 and all(grid.resampled for grid in second.grids)
        assert tuple(model.processor(text=prompt, images=[pictures[1]], return_tensors="pt")["pixel_values"].shape[-2:]) == (28, 28)
        with model.trace([prompt, prompt], images=pictures):
            plain = model.vision.image_features.save()
        changed = pictures[1].copy()
        changed.putpixel((3, 80), (255, 255, 255))
        with model.trace([prompt, prompt], images=[pictures[0], changed]):
            edited = model.vision.image_features.save()
        assert torch.equal(plain[0, first.positions], edited[0, first.positions])
        assert not torch.equal(plain[1, second.positions], edited[1, second.positions])

    def test_an_operation_the_forward_lacks_is_refused_by_name(self, model):
        from vlreg.plugin import CrossAttention

        with pytest.raises(TypeError, match="no operation image_states_view_0 or image_states_view_1"):
            CrossAttention(host="model", operation=("image_states_view_0", "image_states_view_1")).features_at(model.vision)
