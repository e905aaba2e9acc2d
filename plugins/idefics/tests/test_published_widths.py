"""Idefics2, Idefics3 and SmolVLM at the sizes transformers' defaults give, on the meta
device (no weights): the names, sizes and support table such a checkpoint gets, what
``vlreg inspect`` prints of it, and the geometry at the default processors' resolution.

The defaults are only partly a published checkpoint's, and the tests say which parts they
rely on (Idefics2's are said at its tests, below). On Idefics3 and SmolVLM the text model is 4096 wide with 32 heads of 128 over 32 blocks (Llama-3-8B's
width and depth, not its 8 key/value heads or MLP); the tower is SigLIP-so400m's 1152
wide with 16 heads (over 12 blocks of 224-pixel images cut into 32-pixel patches, not a
published tower's depth or resolution). Both families' default processors cut frames of
364 pixels from images resized to a longest edge of 1456 and write 169 tokens a frame,
Idefics3-8B's resolution: with the pixel shuffle's default factor of 2 that is 13 x 13
tokens of 2 x 2 patches, so 14-pixel patches, which the geometry test gives the tower.
"""

from __future__ import annotations

import re

import pytest
import torch
import transformers

from vlreg import Unavailable
from vlreg.testing import load
from vlreg.testing.conformance import PublishedWidths, image

CONFIGS = {"idefics3": "Idefics3Config", "smolvlm": "SmolVLMConfig"}
PROCESSORS = {"idefics3": ("Idefics3Processor", "Idefics3ImageProcessor"),
              "smolvlm": ("SmolVLMProcessor", "SmolVLMImageProcessor")}


class TestIdefics3Defaults(PublishedWidths):
    config = transformers.Idefics3Config
    checkpoint = "idefics3"
    family = "idefics"
    parts = {"vision": ("idefics3_vision", "vlreg-idefics"), "text": ("llama", "vlreg-llava")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "vision.num_layers": 12, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "projector.modality_projection.proj.weight.shape": (4096, 1152 * 2**2),  # 2 x 2 patches a token
        "vision.layers.0.self_attn.path": "model.model.vision_model.encoder.layers.0.self_attn",
    }
    aliases = {"vision.layers[0]": {"input_layernorm": "layer_norm1", "post_attention_layernorm": "layer_norm2"}}

    def test_every_tower_value_takes_a_write(self, model):
        """The connector reads the tower's output itself."""
        assert [row for row in model.read_only() if row.startswith("vision.")] == ["vision.image_token_mask"]


class TestSmolVLMDefaults(TestIdefics3Defaults):
    config = transformers.SmolVLMConfig
    checkpoint = "smolvlm"
    parts = {"vision": ("smolvlm_vision", "vlreg-idefics"), "text": ("llama", "vlreg-llava")}


#: (width, height) -> (tile rows, tile columns) at the default 1456 / 364 pixels, worked out
#: by hand: the longest edge goes to 1456 (a small image is enlarged), the other follows
#: the aspect (made even), and each side is rounded up to whole tiles.
SPLITS = {(1456, 1092): (3, 4), (1092, 1456): (4, 3), (56, 56): (4, 4), (200, 100): (2, 4), (3000, 500): (1, 4),
          (500, 3000): (4, 1), (640, 480): (3, 4), (800, 801): (4, 4), (1000, 20): (1, 4), (77, 300): (4, 2)}


@pytest.mark.parametrize("family", CONFIGS)
def test_geometry_at_the_default_processors_resolution(family, tmp_path):
    """Frames of 364 pixels, 13 x 13 tokens of 2 x 2 patches of 14 pixels; each image
    resized to a longest edge of 1456 and cut into up to 4 x 4 tiles."""
    from vlreg.testing import tokenizer
    from vlreg_idefics.checkpoints import FAKE, GLOBAL, IMAGE, TILE_TAGS

    folder = tmp_path / "checkpoint"
    tok = tokenizer(("<|endoftext|>", FAKE, IMAGE, "<end_of_utterance>", GLOBAL, *TILE_TAGS), eos_token="<end_of_utterance>")
    processor_class, images_class = PROCESSORS[family]
    images = getattr(transformers, images_class)()
    options = {"video_processor": transformers.SmolVLMVideoProcessor()} if family == "smolvlm" else {}
    template = "{% for m in messages %}{% for p in m['content'] %}{% if p['type'] == 'image' %}<image>{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endfor %}"
    getattr(transformers, processor_class)(image_processor=images, tokenizer=tok, chat_template=template, **options).save_pretrained(folder)
    getattr(transformers, CONFIGS[family])(
        image_token_id=tok.convert_tokens_to_ids(IMAGE), vision_config={"image_size": 364, "patch_size": 14},
        text_config={"num_hidden_layers": 1, "vocab_size": len(tok)},
    ).save_pretrained(folder)
    model = load(folder, dispatch=False)
    assert model.processor.image_seq_len == 169 and images.max_image_size["longest_edge"] == 364
    prompt = "<image>What is in this image?"
    for size, (rows, columns) in SPLITS.items():
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks 169 tokens a grid against the encoding
        tags = [t for t in tok.convert_ids_to_tokens(model.processor(text=prompt, images=[image(*size)])["input_ids"][0])
                if re.fullmatch(r"<row_\d+_col_\d+>", t)]
        assert [g.label for g in geometry.grids[:-1]] == [t[1:-1] for t in tags] and len(tags) == rows * columns, size
        assert all((g.rows, g.columns, g.fold) == (13, 13, 2) for g in geometry.grids)
    (geometry,) = model.vision.geometry(prompt, [image(1456, 1092)])
    first, last = geometry.grids[0].boxes, geometry.grids[-2].boxes  # tiles (1, 1) and (3, 4): 28-pixel squares
    assert first[0].tolist() == [0, 0, 28, 28] and last[-1].tolist() == [1428, 1064, 1456, 1092]
    assert geometry.grids[-1].boxes[0].tolist() == [0, 0, 28 * 4, 28 * 3]  # the global image: the whole image in one frame


# -- Idefics2 ------------------------------------------------------------------------
#
# Idefics2Config()'s defaults are Mistral-7B's text model (4096 wide, 32 blocks, 32 heads
# of 128 over 8 key/value heads, an MLP of 14336), a SigLIP-base-shaped tower (768 wide, 12
# blocks, 12 heads, 32-pixel patches; Idefics2-8B's is SigLIP-so400m's, 1152 wide over 27
# blocks of 14-pixel patches) and Idefics2-8B's perceiver: 64 latents a frame, 3 blocks of
# 16 heads of 96 over 4 key/value heads, at the text width.


class TestIdefics2Defaults(PublishedWidths):
    config = transformers.Idefics2Config
    checkpoint = "idefics2"
    family = "idefics"
    parts = {"vision": ("idefics2_vision", "vlreg-idefics"), "text": ("mistral", "vlreg-llava")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "intermediate_size": 14336,
        "vision.num_layers": 12, "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.head_dim": 64,
        "vision.patch_size": 32,
        "projector.modality_projection.gate_proj.weight.shape": (14336, 768),  # every patch, to the text MLP's width
        "projector.modality_projection.down_proj.weight.shape": (4096, 14336),
        "projector.perceiver_resampler.latents.shape": (64, 4096),
        "projector.perceiver_resampler.layers.0.self_attn.q_proj.weight.shape": (16 * 96, 4096),
        "projector.perceiver_resampler.layers.0.self_attn.k_proj.weight.shape": (4 * 96, 4096),
    }

    def test_three_resampler_blocks_and_each_images_size(self, model):
        assert len(model.projector.perceiver_resampler.layers) == 3
        with pytest.raises(Unavailable, match="pixel_attention_mask"):
            model.vision.image_size
        assert [row for row in model.read_only() if row.startswith("vision.")] == ["vision.image_token_mask"]


#: (width, height) -> the box every latent of the whole image's frame covers, worked out by
#: hand at the default 378 / 980 pixels and Idefics2-8B's 14-pixel patches: a side over 980
#: brings the image down to it (the other truncated), each side is raised to at least 378,
#: and the frame shows its whole patches.
WHOLE = {
    (1456, 1092): (1456, 728 * 1092 / 735),  # 980 x 735: 70 x 52 patches, 728 of 735 rows
    (640, 480): (630, 476),  # kept: 45 x 34 patches
    (200, 100): (200, 100),  # raised to 378 x 378: 27 x 27 patches, all of it
    (3000, 500): (3000, 500),  # 980 x 163, raised to 980 x 378: 70 x 27 patches
}


@pytest.mark.parametrize("split", [False, True])
def test_idefics2_geometry_at_the_default_processors_resolution(tmp_path, split):
    """The default image processor (its sides between 378 and 980 pixels) on Idefics2-8B's
    14-pixel patches and 64 latents: one row of 64 latents a frame, every latent over its
    frame's whole patches; split, 4 crops first (at 1456 x 1092, 728 x 546 each, kept and
    wholly in patches)."""
    from vlreg.testing import tokenizer
    from vlreg_idefics.checkpoints import END, FAKE, IMAGE

    folder = tmp_path / "checkpoint"
    tok = tokenizer(("<unk>", FAKE, IMAGE, END), eos_token=END)
    images = transformers.Idefics2ImageProcessor(do_image_splitting=split)
    template = "{% for m in messages %}{% for p in m['content'] %}{% if p['type'] == 'image' %}<image>{% else %}{{ p['text'] }}{% endif %}{% endfor %}{% endfor %}"
    transformers.Idefics2Processor(image_processor=images, tokenizer=tok, chat_template=template).save_pretrained(folder)
    transformers.Idefics2Config(
        image_token_id=tok.convert_tokens_to_ids(IMAGE), vision_config={"image_size": 980, "patch_size": 14},
        text_config={"num_hidden_layers": 1, "vocab_size": len(tok)},
    ).save_pretrained(folder)
    model = load(folder, dispatch=False)
    assert model.processor.image_seq_len == 64 and images.size == {"shortest_edge": 378, "longest_edge": 980}
    prompt = "<image>What is in this image?"
    for size, (right, bottom) in WHOLE.items():
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks 64 tokens a frame against the encoding
        assert len(geometry.grids) == (5 if split else 1) and all(g.resampled and g.tokens == 64 for g in geometry.grids)
        torch.testing.assert_close(geometry.grids[-1].boxes[0], torch.tensor([0, 0, right, bottom], dtype=torch.float64))
    (geometry,) = model.vision.geometry(prompt, [image(1456, 1092)])
    if split:
        assert [g.boxes[0].tolist() for g in geometry.grids[:4]] == [
            [0, 0, 728, 546], [728, 0, 1456, 546], [0, 546, 728, 1092], [728, 546, 1456, 1092]]


# -- IDEFICS (1) ---------------------------------------------------------------------
#
# IdeficsConfig()'s defaults, which transformers gives as similar to IDEFICS-9B's: a text
# model 4096 wide, 32 blocks of 32 heads of 128, a CLIP-shaped tower 768 wide with 32
# blocks of 16 heads over 224-pixel images of 14-pixel patches, and a perceiver of 64
# latents over 6 blocks, here switched on (``use_resampler``), with a gated
# cross-attention block before every 4th text block (``cross_layer_interval``).

#: Where the 8 cross-attention blocks sit in ``layers``: before text blocks 0, 4, ..., 28.
IDEFICS_CROSS = [5 * index for index in range(8)]


class TestIdeficsDefaults(PublishedWidths):
    config = transformers.IdeficsConfig
    fields = {"use_resampler": True, "cross_layer_interval": 4, "perceiver_config": {"use_resampler": True}}
    checkpoint = "idefics"
    family = "idefics"
    parts = {"wrapper": ("idefics", "vlreg-idefics"), "text": ("idefics", "vlreg-idefics"),
             "vision": ("idefics_vision", "vlreg-idefics")}
    published = {
        "num_layers": 40, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "cross_attention_layers": IDEFICS_CROSS,
        "vision.num_layers": 32, "vision.vision_hidden_size": 768, "vision.num_heads": 16, "vision.head_dim": 48,
        "vision.image_size": 224, "vision.patch_size": 14,
        "projector.latents.shape": (64, 768),  # the perceiver keeps the tower's width
        "layers.5.path": "model.model.gated_cross_attn_layers.1", "layers.6.path": "model.model.layers.4",
        "layers.5.cross_attn.k_proj.weight.shape": (4096, 768),  # keys and values from the latents
    }
    read_only = ["vision.image_token_mask", f"layers.{','.join(map(str, IDEFICS_CROSS))}.text_row_mask"]


def test_idefics_without_its_perceiver_is_refused_by_name(tmp_path):
    """IdeficsConfig()'s own default turns the perceiver off, as no published checkpoint does:
    refused before loading, saying so."""
    from vlreg import NoFamily

    transformers.IdeficsConfig().save_pretrained(tmp_path)
    with pytest.raises(NoFamily, match="use_resampler=False"):
        load(tmp_path, dispatch=False)
