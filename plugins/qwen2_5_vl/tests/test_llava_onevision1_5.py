"""LLaVA-OneVision-1.5 (transformers 5.25) against the conformance suite, and what it cannot say:
the geometry counts the mask's tokens, and the tower's stream holds one class row before each
image's patches, which the merger never reads."""

import pytest

pytest.importorskip("transformers.models.llava_onevision1_5",
                    reason="llava_onevision1_5 is transformers 5.25's: this release has no such model type")

from vlreg.testing import chat  # noqa: E402
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, geometry_beside_grid_thw, image, no_patterns  # noqa: E402
from vlreg.testing.conformance.native import QWEN_VIT, composite  # noqa: E402

CHECKPOINT = "llava_onevision1_5"
PER_CALL = "once per image"
PICTURES = (image(112, 168), image(84, 56, seed=1))


class TestLlavaOnevision15(AnalysisConformance, VisionConformance):
    checkpoint = CHECKPOINT
    native = composite(QWEN_VIT, vision="model.visual", projector="model.visual.merger")
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 168), (168, 112))


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows // 2, columns // 2, frames * rows * columns // 4)


def test_the_towers_stream_holds_a_class_row_before_each_images_patches(model):
    encoding = model.processor(text=chat(model, images=2), images=list(PICTURES), return_tensors="pt")
    patches = [t * h * w for t, h, w in encoding["image_grid_thw"].tolist()]
    with model.trace(chat(model, images=2), images=list(PICTURES)):
        stream = model.vision.layers[-1].layer_output.save()
    assert model.vision.class_tokens == 1 and stream.shape[1] == sum(patches) + len(patches)


def test_each_frame_of_a_video_is_a_grid_of_its_own(model):
    """The processor folds no frames (``temporal_patch_size`` 1): each video token covers one
    frame, one grid a frame, as many tokens a frame as the processor's grid says."""
    video = [image(56, 84, seed=k) for k in range(3)]
    prompt = chat(model, "video", text="What changes?")
    (geometry,) = model.vision.geometry(prompt, videos=[video])
    (slices, rows, columns), = model.processor(text=[prompt], videos=[video], return_tensors="pt")["video_grid_thw"].tolist()
    assert slices == 3 and [grid.frames for grid in geometry.grids] == [(0, 0), (1, 1), (2, 2)]
    assert all((grid.rows, grid.columns) == (rows // 2, columns // 2) for grid in geometry.grids)
    with model.trace(prompt, videos=[video]):
        features = model.vision.video_features.save()
    assert features.shape[0] == geometry.tokens == 3 * rows * columns // 4
