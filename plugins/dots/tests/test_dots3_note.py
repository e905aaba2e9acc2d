"""dots3.note's own values beyond the suite: the indexed block reads the keys its DSA indexer
selects, a write to the selection decides them, and the sliding-window block, which runs no
indexer, refuses the indexer's values by name; a tower block's experts make its MLP's output, and a write to their weights reaches it;
a video's frames are each a grid of their own, at the video's own scatter."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.testing import chat, load
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def model():
    return load("dots3_note")


def test_the_indexed_block_reads_the_selected_keys_and_a_write_decides_them(model):
    prompt, pictures = chat(model, images=1), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        selected = model.layers[0].self_attn.selected_keys.save()
        pattern = model.layers[0].self_attn.attention_probabilities.save()
    read = torch.zeros(*selected.shape[:2], pattern.shape[-1], dtype=torch.bool).scatter_(-1, selected.long(), True)
    assert not read.all() and (pattern[~read.unsqueeze(1).expand_as(pattern)] == 0).all()
    with model.trace(prompt, images=pictures):
        model.layers[0].self_attn.selected_keys[...] = 0  # every query may read the first key only
        written = model.layers[0].self_attn.attention_probabilities.save()
    assert torch.allclose(written[..., 0], torch.ones(())) and not written[..., 1:].any()


def test_the_sliding_window_block_refuses_the_indexer_values(model):
    for name in ("indexer_scores", "selected_keys", "sparse_attention_mask"):
        with pytest.raises(Unavailable, match="runs no indexer"):
            with model.trace(chat(model, images=0)):
                getattr(model.layers[1].self_attn, name).save()


def test_a_tower_blocks_experts_make_its_mlp_output_and_a_write_to_the_routing_reaches_it(model):
    with model.trace(chat(model, images=1), images=[image(112, 84)]):
        weights = model.vision.layers[1].mlp.expert_weights.save()
        indices = model.vision.layers[1].mlp.expert_indices.save()
        routed = model.vision.layers[1].mlp.routed_output.save()
        output = model.vision.layers[1].mlp.mlp_output.save()
    assert weights.shape == indices.shape == (output.shape[1], model.vision.layers[1].mlp.top_k)
    torch.testing.assert_close(routed, output[0])
    assert output.abs().sum() > 0
    with model.trace(chat(model, images=1), images=[image(112, 84)]):
        model.vision.layers[1].mlp.expert_weights[...] = 0  # no expert's output is added
        silenced = model.vision.layers[1].mlp.mlp_output.save()
    assert not silenced.any()


def test_each_frame_of_a_video_is_a_grid_of_its_own_at_the_videos_scatter(model):
    """The video processor folds no frames (``temporal_patch_size`` 1): each video token covers
    one frame, as many a frame as the processor's grid says, and the video's features are
    block 0's input at them, apart from an image's in the same prompt."""
    video, picture = [image(56, 84, seed=k) for k in range(3)], image(84, 56, seed=9)
    prompt = chat(model, "image", "video", text="What changes?")
    (_, geometry) = model.vision.geometry(prompt, images=[picture], videos=[video])
    (slices, rows, columns), = model.processor(text=[prompt], images=[picture], videos=[video],
                                               return_tensors="pt")["video_grid_thw"].tolist()
    assert slices == 3 and [grid.frames for grid in geometry.grids] == [(0, 0), (1, 1), (2, 2)]
    with model.trace(prompt, images=[picture], videos=[video]):
        mask = model.vision.video_token_mask.save()
        features = model.vision.video_features.save()
        first = model.layers[0].input.save()
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
    assert features.shape[0] == geometry.tokens == 3 * rows * columns // 4 and torch.equal(first[mask], features)
