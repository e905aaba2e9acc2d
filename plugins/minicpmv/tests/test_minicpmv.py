"""What the suite cannot say of the MiniCPM-V tower: its grid halves mid-tower, and its
learned positions.

* block 0 runs on every patch, block 1 (after the ``vit_merger``) on a quarter of the rows,
  each 2 x 2 patches (`Vision.layer_fold`); MiniCPM-OCR's ``"4x"`` mode skips the merger, so
  both run on the patches;
* `tower_patterns` folds each block's pattern onto the source image's tokens by that block's
  rows: per token, its rows' queries averaged and keys summed, checked against the per-call
  pattern reshaped by hand;
* ``vision.layers[0].input == patch_embeddings + position_embeddings``, and an edit of the
  positions is what block 0 receives.
"""

from __future__ import annotations

import pytest
import torch

from vlreg.analysis import tower_patterns
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINTS = ("minicpmv4_6", "minicpm_ocr")
SIZE = (112, 84)  # a source image and 2 x 2 slices


def merged(model) -> bool:
    return model.config.downsample_mode != "4x"


def test_blocks_after_the_merger_run_on_a_quarter_of_the_rows(model):
    prompt = chat(model, text="Read it.")
    (geometry,) = model.vision.geometry(prompt, [image(*SIZE)])
    patches = sum(grid.tokens * grid.fold**2 for grid in geometry.grids)
    with model.trace(prompt, images=[image(*SIZE)]):
        before = model.vision.layers[0].layer_output.save()
        after = model.vision.layers[1].input.save()
        output = model.vision.layers[1].layer_output.save()
    quarter = 4 if merged(model) else 1
    assert [model.vision.layer_fold(block) for block in (0, 1)] == [1, 2 if merged(model) else 1]
    assert before.shape[:2] == (1, patches) and after.shape[1] == output.shape[1] == patches // quarter
    if not merged(model):
        assert torch.equal(before, after)


@pytest.mark.parametrize("layer", [0, 1])
def test_tower_patterns_fold_each_blocks_rows_onto_the_tokens(model, layer):
    prompt, pictures = chat(model, text="Read it."), [image(*SIZE)]
    found = tower_patterns(model, prompt, pictures, layer=layer)
    source = found.geometry[0].grids[0]
    side = source.fold // model.vision.layer_fold(layer)
    attention = model.vision.layers[layer].self_attn
    with model.trace(prompt, images=pictures):
        bounds = attention.inputs[1]["cu_seqlens"].save()
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
    call = attention.patterns(queries.float(), keys.float(), bounds)[0]  # the source image's call
    heads, rows, columns = call.shape[0], source.rows, source.columns
    by_hand = call.reshape(heads, rows, side, columns, side, rows, side, columns, side).sum((6, 8)).mean((2, 4))
    assert found.grids == [0] and found.patterns[0].shape == (heads, source.tokens, source.tokens)
    assert torch.allclose(found.patterns[0], by_hand.reshape(heads, source.tokens, source.tokens), atol=1e-6)
    assert torch.allclose(found.patterns[0].sum(-1), torch.ones(heads, source.tokens), atol=1e-5)


def test_the_positions_are_what_block_0_adds_to_the_patches(model):
    prompt, pictures = chat(model, text="Read it."), [image(*SIZE)]
    with model.trace(prompt, images=pictures):
        patches = model.vision.patch_embeddings.save()
        positions = model.vision.position_embeddings.save()
        received = model.vision.layers[0].input.save()
    assert positions.shape == patches.shape and torch.allclose(received, patches + positions)
    with model.trace(prompt, images=pictures):
        model.vision.position_embeddings[:] = 0
        edited = model.vision.layers[0].input.save()
    assert torch.equal(edited, patches)


def test_minicpm_ocrs_adaptive_upsize_is_refused_where_opencv_is_absent(loaded):
    from transformers.utils import is_cv2_available

    if is_cv2_available():
        pytest.skip("OpenCV is installed here: small_image_upsize='adaptive' runs")
    model = loaded("minicpm_ocr")
    prompt, pictures = chat(model, text="Read it."), [image(30, 20)]
    with pytest.raises(ValueError, match="small_image_upsize='adaptive' measures each image's glyphs with OpenCV"):
        model.vision.geometry(prompt, pictures, small_image_upsize="adaptive")
    with pytest.raises(ValueError, match="pass small_image_upsize='always'"):
        with model.trace(prompt, images=pictures, small_image_upsize="adaptive"):
            model.logits.save()
    with model.trace(prompt, images=pictures, small_image_upsize="never"):
        logits = model.logits.save()
    assert logits.isfinite().all()
