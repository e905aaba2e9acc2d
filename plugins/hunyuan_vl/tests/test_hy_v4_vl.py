"""HY-V4-VL (transformers 5.25) against the conformance suite, and what it cannot say:

* each image's geometry counts the image tokens at the mask's positions: the rows of 2 x 2
  patch blocks each ended by a newline (over no pixels), no begin or end token;
* ``layer_output`` is the streams as the readout's ``hc_head`` collapses them: the last block's,
  normed and projected, is the model's logits.
"""

import pytest
import torch

pytest.importorskip("transformers.models.hy_v4_vl", reason="hy_v4_vl: not in this transformers release (5.25 adds it)")

from vlreg.testing import chat  # noqa: E402
from vlreg.testing.conformance import (AnalysisConformance, VisionConformance, geometry_beside_grid_thw,  # noqa: E402
                                       image, no_patterns)
from vlreg.testing.conformance.native import composite  # noqa: E402

CHECKPOINT = "hy_v4_vl"
PER_CALL = "once per image"
PICTURES = (image(112, 84), image(64, 96, seed=1))


class TestHyV4VL(AnalysisConformance, VisionConformance):
    checkpoint = CHECKPOINT
    native = composite({"layers": "layers", "patch_embed": "embeddings.patch_embedding",
                        "layers.0.self_attn": "layers.0.self_attn", "layers.0.mlp": "layers.0.mlp",
                        "layers.0.input_layernorm": "layers.0.layer_norm1",
                        "layers.0.post_attention_layernorm": "layers.0.layer_norm2"},
                       projector="model.vision_tower.patch_merger")
    unavailable = {**no_patterns(PER_CALL), "layers.1.self_attn.indexer_scores": "reuses block 0's selection"}
    image_sizes = ((112, 84), (64, 96))
    on_disk = "vision.layers"
    # each of the last three writes (or estimates writing) layer_output, the streams' collapse, which takes no write
    analysis_refuses = {"tower_patterns": "tokens over no patches",
                        **dict.fromkeys(("steer", "patch_image", "attribution_patching"), "the collapse of every stream")}
    supports_sdpa = False  # transformers runs the text model eager only (sinks and the indexer)


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (_, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns) == (rows // 2, columns // 2 + 1)
        assert geometry.tokens == rows // 2 * (columns // 2 + 1)
        boxes = grid.boxes.reshape(grid.rows, grid.columns, 4)
        assert boxes[:, -1].isnan().all() and not boxes[:, :-1].isnan().any()


def test_the_last_blocks_collapse_is_what_the_readout_reads(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        last = model.layers[-1].layer_output.save()
        logits = model.logits.save()
    torch.testing.assert_close(model.lm_head._module(model.norm._module(last).float()), logits)
