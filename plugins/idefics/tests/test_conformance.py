"""Idefics2, Idefics3 and SmolVLM against the conformance suite the core ships.

The default image (112 x 84) is cut into 2 x 2 tiles and a global image on the tiny
Idefics3 and SmolVLM checkpoints: 5 frames of 2 x 2 tokens each, so every test runs
through the tiles. On the tiny Idefics2 it is cut into 4 crops and the whole image, each
frame resampled to 4 latents; the crops are smaller than the whole image, so the tower
runs on padded frames.
"""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
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
