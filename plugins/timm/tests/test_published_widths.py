"""Perception LM and FastVLM at their published widths and full depth, built on the meta
device (no weights), their geometry at the published processor's resolution, and `vlreg
inspect` of a config alone.

* FastVLM: transformers 5.23's ``FastVlmConfig()`` defaults are FastVLM-7B's (read from the
  class, not recalled): ``fastvit_mci3`` (stages of 2, 12, 24, 4 and 2 blocks, 96 to 1536
  wide, the last two attention stages; a 3072-wide final grid at a stride of 64) on Qwen2
  (28 blocks, 3584 wide, 28 heads over 4). The processor is the published one's shape
  (``LlavaProcessor``, CLIP's 1024-pixel shortest edge and centre crop, ``patch_size`` 64):
  256 tokens an image.
* Perception LM: ``PerceptionLMConfig()`` defaults to no published checkpoint (a ResNet-50
  tower), so the configs are written out below from what transformers' conversion script
  builds for the published ones (``facebook/Perception-LM-1B``: PE-Core-L cut to 23 blocks,
  1024 wide, over 448-pixel tiles of 14-pixel patches, on Llama 3.2 1B; ``-8B``: PE-Core-G,
  47 blocks, 1536 wide, on Llama 3.1 8B), as recalled: there is no hub access here to check
  them, so a test relies only on what follows from them (the blocks the config asks for,
  the tokens the processor's rule gives: 16 x 16 a crop, pooled 2 x 2 from 32 x 32 patches).
"""

import json

import pytest
import transformers

from vlreg import StandardizedTransformer, Unavailable
from vlreg.cli import main
from vlreg.testing import build
from vlreg.testing.conformance import image

LLAMA_1B = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}
LLAMA_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}


def pe(architecture: str, width: int, depth: int) -> dict:
    return {"architecture": architecture, "do_pooling": False,
            "model_args": {"embed_dim": width, "depth": depth, "img_size": [448, 448], "global_pool": "",
                           "use_post_transformer_norm": False, "init_values": 0.1, "ref_feat_shape": [32, 32]}}


#: PE-Core-L has a class token, which the wrapper drops; PE-Core-G has none.
PLM = {
    "Perception-LM-1B": {"text_config": LLAMA_1B, "vision_config": pe("vit_pe_core_large_patch14_336", 1024, 23),
                         "vision_use_cls_token": True},
    "Perception-LM-8B": {"text_config": LLAMA_8B, "vision_config": pe("vit_pe_core_gigantic_patch14_448", 1536, 47),
                         "vision_use_cls_token": False},
}
#: text (blocks, width, heads, kv heads), tower (blocks, width, heads, MLP width, class tokens)
EXPECTED = {"Perception-LM-1B": ((16, 2048, 32, 8), (23, 1024, 16, 4096, 1)),
            "Perception-LM-8B": ((32, 4096, 32, 8), (47, 1536, 16, 8960, 0))}


#: (width, height) -> the (columns, rows) of 448-pixel tiles the published processor's rule
#: gives, worked out by hand: of the canvases of at most 36 tiles that hold the image, the one
#: where its aspect-kept resize is largest (the aspect is then not kept: it fills the canvas).
TILES = {
    (1024, 768): (7, 5),  # 7 x 5 lets it grow 2.92 times; 6 x 6 only 2.63
    (448, 448): (6, 6),  # a square grows most on the largest square canvas
    (2000, 300): (14, 2),  # 2 rows let it grow most (2.99 times), 14 to 18 columns alike: the rule's order takes 14
}


@pytest.fixture(scope="module")
def tiny_plm():
    return transformers.AutoProcessor.from_pretrained(build("perception_lm"))


@pytest.fixture(scope="module", params=sorted(PLM))
def perception_lm(request, tiny_plm, tmp_path_factory):
    """``(name, folder)``: the published config, the tiny tokenizer with the published
    processor's settings (448-pixel tiles, up to 36, 14-pixel patches pooled 2 x 2)."""
    name, folder = request.param, tmp_path_factory.mktemp(request.param)
    tok = tiny_plm.tokenizer
    transformers.PerceptionLMProcessor(
        image_processor=transformers.PerceptionLMImageProcessor(tile_size=448, max_num_tiles=36),
        video_processor=tiny_plm.video_processor, tokenizer=tok, patch_size=14, pooling_ratio=2,
    ).save_pretrained(folder)
    transformers.PerceptionLMConfig(
        **PLM[name], projector_pooling_ratio=2,
        image_token_id=tok.convert_tokens_to_ids("<|image|>"), video_token_id=tok.convert_tokens_to_ids("<|video|>"),
    ).save_pretrained(folder)
    return name, folder


def test_perception_lm_at_the_published_widths_on_meta(perception_lm):
    name, folder = perception_lm
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "timm"
    assert model.vision.layers[0].self_attn.qkv.weight.device.type == "meta"
    (layers, hidden, heads, kv), (tower_layers, tower, tower_heads, mlp, class_tokens) = EXPECTED[name]
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads) == (layers, hidden, heads, kv)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size) == (
        tower_layers, tower, tower_heads, mlp)
    assert (vision.image_size, vision.patch_size, vision.class_tokens) == (448, 14, class_tokens)
    assert tuple(model.projector.linear_1.weight.shape) == (hidden, tower)
    refused = {row for row, reason in model.support().items() if reason}
    assert refused == {"vision.self_attn.attention_scores", "vision.self_attn.attention_probabilities", "videos"}
    assert list(model.read_only()) == ["vision.image_token_mask"]
    for size, (columns, rows) in TILES.items():
        (geometry,) = vision.geometry("<|image|>", [image(*size)])  # the host checks the grids against the encoding
        labels = ["thumbnail"] + [f"tile {r},{c}" for r in range(rows) for c in range(columns)]
        assert [grid.label for grid in geometry.grids] == labels, size
        assert all((grid.rows, grid.columns, grid.fold) == (16, 16, 2) for grid in geometry.grids)


def test_perception_lm_inspect_reads_the_config_alone(perception_lm, tmp_path, capsys):
    name, _ = perception_lm
    transformers.PerceptionLMConfig(**PLM[name], projector_pooling_ratio=2).save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "timm" and report["parts"]["vision"]["model_type"] == "timm_wrapper"
    assert report["sizes"]["num_layers"] == EXPECTED[name][0][0]


@pytest.fixture(scope="module")
def fast_vlm(tmp_path_factory):
    """The published config (``FastVlmConfig()``), the tiny tokenizer, the published
    processor's shape; the image token the tiny tokenizer's."""
    folder = tmp_path_factory.mktemp("fast_vlm")
    tok = transformers.AutoProcessor.from_pretrained(build("fast_vlm")).tokenizer
    images = transformers.CLIPImageProcessor(size={"shortest_edge": 1024}, crop_size={"height": 1024, "width": 1024},
                                             image_mean=[0.0] * 3, image_std=[1.0] * 3)
    transformers.LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=64,
                                vision_feature_select_strategy="full").save_pretrained(folder)
    transformers.FastVlmConfig(image_token_id=tok.convert_tokens_to_ids("<image>")).save_pretrained(folder)
    return folder


def test_fast_vlm_at_the_published_widths_on_meta(fast_vlm):
    model = StandardizedTransformer(str(fast_vlm), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "timm"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads) == (28, 3584, 28, 4)
    vision = model.vision
    assert vision.num_layers == 0 and vision.vision_hidden_size == 3072
    assert (vision.patch_size, vision.patch_embedding_size) == (64, 96)
    assert [len(stage.blocks) for stage in vision.timm_model.stages] == [2, 12, 24, 4, 2]
    with pytest.raises(Unavailable, match="no ViT-layout blocks"):
        vision.num_heads
    assert tuple(model.projector.linear_1.weight.shape) == (3584, 3072)
    rows = model.support()
    assert "FastViT's stages" in rows.pop("vision.layers")
    assert all(reason is None for reason in rows.values()), {row: why for row, why in rows.items() if why}
    for size in ((1024, 768), (640, 480), (300, 2000)):
        (geometry,) = vision.geometry("<image>", [image(*size)])
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns) == (16, 16) and geometry.tokens == 256


def test_fast_vlm_inspect_reads_the_config_alone(tmp_path, capsys):
    transformers.FastVlmConfig().save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "timm" and report["parts"]["text"]["model_type"] == "qwen2"
    assert report["aliases"]["model"]["projector"] == "model.multi_modal_projector"
    assert report["sizes"]["num_layers"] == 28
