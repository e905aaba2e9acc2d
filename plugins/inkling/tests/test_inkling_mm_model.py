"""Inkling 1 (``inkling_mm_model``) against the conformance suite, and what it cannot say: a
tower of folding layers (no blocks: ``vision.layers`` refused by name, as FastVLM's), audio
refused by name, each sublayer's output read after its short convolution (the blocks plain
sums), a readout that divides the normed stream before ``lm_head``."""

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, image
from vlreg.testing.conformance.native import composite


class TestInklingMmModel(AnalysisConformance, VisionConformance):
    checkpoint = "inkling_mm_model"
    native = {key: path for key, path in composite(projector="").items() if key != "projector"}
    tower_blocks = False
    has_projector = False
    supports_sdpa = False
    unavailable = {"vision.patch_embeddings": "embeds no patch whole"}
    analysis_refuses = {"tower_patterns": "has no blocks"}
    image_sizes = ((16, 12), (9, 20))

    def test_the_geometry_counts_the_masks_tokens(self, model):
        """The grids give the mask's tokens, as the processor cuts the image and where it
        first scales it (``rescale_image_frac``, a processor option)."""
        pictures = [image(16, 12), image(9, 20, seed=1)]
        prompt = chat(model, images=2)
        for options in ({"rescale_image_frac": 1.5}, {}):
            geometries = model.vision.geometry(prompt, pictures, **options)
            with model.trace(prompt, images=pictures, **options):
                mask = model.vision.image_token_mask.save()
            assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
        side = model.processor.image_processor.size["height"]
        for geometry, picture in zip(geometries, pictures):
            (grid,) = geometry.grids
            width, height = picture.size
            assert (grid.rows, grid.columns) == (-(-height // side), width // side + 1)

    def test_the_lens_of_the_last_block_is_the_logits(self, model):
        from vlreg import analysis

        with model.trace(chat(model), images=[image(16, 12)]):
            last = model.layers[-1].layer_output.save()
            logits = model.logits.save()
        torch.testing.assert_close(analysis.project_on_vocab(model, last[0, -1]), logits[0, -1])
