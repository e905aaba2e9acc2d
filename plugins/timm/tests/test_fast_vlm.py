"""What FastVLM adds to the names, on the tiny checkpoint: FastViT through timm served at
its edges, its blocks refused by name, LLaVA's processor and a token per cell."""

import pytest
import torch

from vlreg import Unavailable, analysis
from vlreg.cli import partial
from vlreg.testing import chat
from vlreg.testing.conformance import image
from vlreg_timm.wrappers import FASTVIT_BLOCKS

CHECKPOINT = "fast_vlm"


def test_the_template_writes_a_system_turn_the_image_then_the_text_on_its_own_line(model):
    assert chat(model) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<image>\nWhat is in this image?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_blocks_are_refused_by_name_everywhere_a_user_looks(model):
    assert "layers" not in model.vision.__dict__ and model.vision.num_layers == 0
    assert model.support()["vision.layers"] == FASTVIT_BLOCKS
    assert partial()["fast_vlm"] == {"vision.layers": FASTVIT_BLOCKS}  # vlreg plugins --coverage: partial
    with pytest.raises(AttributeError, match="model.vision.layers is not served: its blocks are FastViT's stages"):
        model.vision.layers
    with pytest.raises(Unavailable, match="no ViT-layout blocks"):
        model.vision.head_dim
    with pytest.raises(Unavailable, match="tower_patterns is unavailable: its blocks are FastViT's stages"):
        analysis.tower_patterns(model, chat(model), [image(112, 84)])


def test_the_tower_is_served_at_its_edges_each_grid_cell_a_row(model):
    vision, timm = model.vision, model.vision.timm_model
    assert model.family.served_by("vision") == "timm" and vision.class_tokens == 0
    assert (vision.patch_size, vision.patch_embedding_size, vision.vision_hidden_size) == (8, 16, 64)
    assert vision.patch_size == model.processor.patch_size  # the processor counts the tokens by the tower's stride
    with pytest.raises(Unavailable, match="takes any size"):
        vision.image_size
    with model.trace(chat(model), images=[image(112, 84)]):
        stem = timm.stem.output.save()
        embedded = vision.patch_embeddings.save()
        grid = timm.final_conv.output.save()
        out = vision.tower_output.save()
        fed = model.projector.input.save()
    assert stem.shape == (1, 16, 8, 8) and torch.equal(embedded, stem.flatten(2).transpose(1, 2))
    assert grid.shape == (1, 64, 4, 4) and torch.equal(out, grid.flatten(2).transpose(1, 2))
    assert torch.equal(fed, out)


def test_edits_of_the_grids_land_where_the_stages_read_them(model):
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        model.vision.patch_embeddings[:, :5] = 0
        stem = model.vision.timm_model.stem.output.save()
        model.vision.tower_output[:, 3] = 1
        fed = model.projector.input.save()
    assert stem.flatten(2)[0, :, :5].abs().max() == 0
    assert torch.equal(fed[0, 3], torch.ones(64))
