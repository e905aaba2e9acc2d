"""Ovis 2.5 (transformers 5.25) against the conformance suite, and what it cannot say:

* each image's geometry counts the image tokens at the mask's positions, window after window,
  each window a raster of the merge blocks of ``image_grid_thw`` it holds;
* ``vision.visual_words`` is each token's distribution over the visual words, and the features
  are the table's rows weighted by it;
* ``vision.tower_output`` is what the projector reads, so an edit of it reaches the features;
* a video's geometry runs frame by frame, each frame window by window.
"""

import pytest
import torch

pytest.importorskip("transformers.models.ovis2_5", reason="ovis2_5: not in this transformers release (5.25 adds it)")

from vlreg.testing import chat  # noqa: E402
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, image, no_patterns  # noqa: E402
from vlreg.testing.conformance.native import composite  # noqa: E402

CHECKPOINT = "ovis2_5"
PER_CALL = "once per image"
PICTURES = (image(112, 168), image(84, 56, seed=1))


class TestOvis2_5(AnalysisConformance, VisionConformance):
    checkpoint = CHECKPOINT
    native = composite({"layers": "layers", "patch_embed": "embeddings.patch_embedding", "norm": "post_layernorm",
                        "layers.0.self_attn": "layers.0.self_attn", "layers.0.mlp": "layers.0.mlp",
                        "layers.0.input_layernorm": "layers.0.layer_norm1",
                        "layers.0.post_attention_layernorm": "layers.0.layer_norm2"})
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 168), (168, 112))
    rewritten_tokens = ("image_start_token_id", "image_end_token_id")
    analysis_refuses = {"tower_patterns": "run window by window"}


def test_the_geometry_counts_the_masks_tokens_window_by_window(model):
    prompt = chat(model, images=2)
    geometries = model.vision.geometry(prompt, list(PICTURES))
    encoding = model.processor(text=prompt, images=list(PICTURES), return_tensors="pt")
    with model.trace(prompt, images=list(PICTURES)):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
    side = model.vision.window_size // model.vision.patch_size // 2
    for geometry, (_, rows, columns) in zip(geometries, encoding["image_grid_thw"].tolist()):
        assert geometry.tokens == rows * columns // 4 and len(geometry.grids) > 1
        assert all(grid.rows <= side and grid.columns <= side and grid.fold == 2 for grid in geometry.grids)


def test_the_features_are_the_tables_rows_weighted_by_the_visual_words(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        words = model.vision.visual_words.save()
        features = model.vision.image_features.save()
    table = model.projector._module.visual_embeddings_table.weight
    indicators = model.config.vision_config.num_visual_indicator_tokens
    assert words.shape[-1] == table.shape[1]
    torch.testing.assert_close(words[0, :, :-indicators].sum(-1), torch.ones(words.shape[1]))
    assert not words[0, :, -indicators:].any()
    torch.testing.assert_close(features, words[0] @ table.T)


def test_an_edit_of_the_tower_output_reaches_the_features(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        before = model.vision.image_features.save()
    with model.trace(chat(model), images=[PICTURES[0]]):
        model.vision.tower_output[:] = 0
        after = model.vision.image_features.save()
    assert not torch.allclose(before, after)
    assert torch.allclose(after, after[:1].expand_as(after))  # every token's patches alike: one row


def test_a_videos_geometry_runs_frame_by_frame_and_window_by_window(model):
    """Each frame is a temporal patch of its own, its tokens window after window as an image's:
    the video's positions are the mask's, every frame spans several windows here, and the
    features have a row a token."""
    video = [image(112, 168, seed=k) for k in range(2)]
    prompt = chat(model, "video", text="What changes?")
    (geometry,) = model.vision.geometry(prompt, videos=[video])
    (slices, rows, columns), = model.processor(text=prompt, videos=[video], return_tensors="pt")["video_grid_thw"].tolist()
    with model.trace(prompt, videos=[video]):
        mask = model.vision.video_token_mask.save()
        features = model.vision.video_features.save()
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
    assert slices == 2 and features.shape[0] == geometry.tokens == 2 * rows * columns // 4
    per_frame = [sum(grid.tokens for grid in geometry.grids if grid.frames == (k, k)) for k in range(2)]
    assert per_frame == [rows * columns // 4] * 2 and len(geometry.grids) > 2
