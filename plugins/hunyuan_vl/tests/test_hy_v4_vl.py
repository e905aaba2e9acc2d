"""HY-V4-VL (transformers 5.25) against the conformance suite, and what it cannot say:

* each image's geometry counts the image tokens at the mask's positions: the rows of 2 x 2
  patch blocks each ended by a newline (over no pixels), no begin or end token;
* ``layer_output`` is the streams as the readout's ``hc_head`` collapses them: the last block's,
  normed and projected, is the model's logits;
* each head's sink (``attention_sinks``, random in the tiny checkpoint) takes the share of each
  query's softmax that ``attention_probabilities`` lack.

What the suite is told: transformers runs the text model eager only; block 1 reuses block 0's
indexer selection, so its ``indexer_scores`` are refused, naming block 0's; the helpers that
write ``layer_output`` (a collapse with no inverse) refuse, naming every stream; a video's
frames end each row with a newline, as an image's.
"""

import pytest
import torch

pytest.importorskip("transformers.models.hy_v4_vl", reason="hy_v4_vl: not in this transformers release (5.24 adds it)")

from vlreg.testing import chat  # noqa: E402
from vlreg.testing.conformance import (AnalysisConformance, VisionConformance, geometry_beside_grid_thw,  # noqa: E402
                                       image, no_patterns)
from vlreg.testing.conformance.native import composite  # noqa: E402

from .test_conformance import TOWER  # noqa: E402

CHECKPOINT = "hy_v4_vl"
PER_CALL = "once per image"
PICTURES = (image(112, 84), image(64, 96, seed=1))


class TestHyV4VL(AnalysisConformance, VisionConformance):
    checkpoint = CHECKPOINT
    native = composite(TOWER, projector="model.vision_tower.patch_merger")
    unavailable = {**no_patterns(PER_CALL), "layers.1.self_attn.indexer_scores": "reuses block 0's selection"}
    image_sizes = ((112, 84), (64, 96))
    on_disk = "vision.layers"
    # each of the last four writes (or estimates writing) layer_output, the streams' collapse, which takes no write
    analysis_refuses = {"tower_patterns": "tokens over no patches",
                        **dict.fromkeys(("steer", "patch_image", "patch_frame", "attribution_patching"),
                                        "the collapse of every stream")}
    video_row_newlines = True
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


def test_each_heads_sink_takes_what_the_probabilities_lack(model):
    attention = model.layers[0].self_attn
    with model.trace(chat(model), images=[PICTURES[0]]):
        scores, sinks = attention.attention_scores.save(), attention.attention_sinks.save()
        probabilities = attention.attention_probabilities.save()
    assert sinks[0, :, 0, 0].unique().numel() == sinks.shape[1], "each head has its own sink"
    taken = torch.softmax(torch.cat([scores, sinks], dim=-1), dim=-1)[..., -1]
    torch.testing.assert_close(1 - probabilities.sum(-1), taken)


def test_a_lit_pixel_in_a_kept_frame_lands_in_its_frame_in_the_token_whose_box_holds_it(model):
    """At 2 frames a second of a 4-a-second clip of 10 frames, HY-V4-VL's video processor keeps
    5 (evenly: 0, 2, 4, 7, 9) and reads each alone as an image, patches row by row: each grid is
    one kept frame, a trace's video mask counts the geometry's tokens, and a white pixel at a
    token's box's centre in a kept frame lands in that frame's patches, in one of the token's."""
    import numpy

    sampled = {"do_sample_frames": True, "fps": 2, "video_metadata": [{"fps": 4, "total_num_frames": 10}]}
    width, height, merge = 100, 60, model.processor.video_processor.merge_size
    prompt, clip = chat(model, "video", text=None), numpy.zeros((10, height, width, 3), dtype=numpy.uint8)
    (geometry,) = model.vision.geometry(prompt, videos=[clip], **sampled)
    kept = model.processor(text=prompt, videos=[clip], return_metadata=True, **sampled)["video_metadata"][0]
    assert [grid.frames for grid in geometry.grids] == [(k, k) for k in kept.frames_indices] == [
        (0, 0), (2, 2), (4, 4), (7, 7), (9, 9)]
    with model.trace(prompt, videos=[clip], **sampled):
        mask = model.vision.video_token_mask.save()
    assert int(mask.sum()) == geometry.tokens
    for index, grid in enumerate(geometry.grids):
        (frame, _) = grid.frames
        for token in range(0, grid.tokens, 2):
            if grid.covered[token]:  # not a row's newline
                x0, y0, x1, y1 = grid.boxes[token].tolist()
                shot = clip.copy()
                shot[frame, int((y0 + y1) / 2), int((x0 + x1) / 2)] = 255
                encoding = model.processor(text=prompt, videos=[shot], return_tensors="pt", **sampled)
                _, rows, columns = encoding["video_grid_thw"][0].tolist()
                pixels = encoding["pixel_values_videos"]  # a row a patch, frame after frame, row by row
                at = int(pixels.argmax()) // pixels.shape[1]
                row, column = divmod(at % (rows * columns), columns)
                assert at // (rows * columns) == index and (row // merge) * grid.columns + column // merge == token
