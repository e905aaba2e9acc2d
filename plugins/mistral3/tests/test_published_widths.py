"""Mistral 3 at the sizes transformers' defaults give (Mistral Small 3.1's: a 40-block
Mistral text model 5120 wide with 32 heads of 128 over 8 key/value heads, a 24-block
Pixtral tower 1024 wide with 16 heads and 14-pixel patches, merged 2 x 2), built on the
meta device (no weights): the names, sizes and support table such a checkpoint gets,
and what ``vlreg inspect`` prints of it."""

from __future__ import annotations

import pytest
import torch
from transformers import Mistral3Config, MistralLarge4Config

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing.conformance import PublishedWidths


class TestMistralSmall31(PublishedWidths):
    config = Mistral3Config
    checkpoint = "mistral3"
    family = "mistral3"
    parts = {"vision": ("pixtral", "vlreg-mistral3"), "text": ("mistral", "vlreg-llava")}
    published = {
        "num_layers": 40, "hidden_size": 5120, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
        "vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
        "vision.patch_size": 14,
        "projector.patch_merger.merging_layer.weight.shape": (1024, 1024 * 2**2),  # 2 x 2 patches a token
    }

    def test_the_image_size_is_each_images_and_the_projector_reads_the_last_blocks_stream(self, model):
        with pytest.raises(Unavailable, match=r"image_sizes"):
            model.vision.image_size
        # the projector reads the last block's stream out of the hidden states (vision_feature_layer=-1)
        assert "edit vision.layers[23].layer_output" in model.read_only()["vision.tower_output"]
        assert "vision.layer_output" not in model.read_only()


#: (width, height) -> (rows, columns) of tokens at the default 1024-pixel longest edge and
#: 28-pixel tokens (14-pixel patches merged 2 x 2), by hand: a side past 1024 shrinks with
#: the aspect (floored), then each side is rounded up to whole tokens.
DEFAULT_GRIDS = {(1024, 768): (28, 37), (2048, 1536): (28, 37), (28, 28): (1, 1), (29, 28): (1, 2), (500, 200): (8, 18),
                 (200, 500): (18, 8), (3000, 100): (2, 37)}


def test_geometry_at_the_default_processors_resolution(tmp_path):
    """Pixtral's default image processor (longest edge 1024) with Mistral 3's 14-pixel
    patches merged 2 x 2: each image a raster of 28-pixel tokens, rows ended by breaks."""
    from transformers import PixtralImageProcessor, PixtralProcessor

    from vlreg.testing import tokenizer
    from vlreg_mistral3.checkpoints import CHAT_TEMPLATE, SPECIAL_TOKENS

    tok = tokenizer(SPECIAL_TOKENS, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    PixtralProcessor(image_processor=PixtralImageProcessor(), tokenizer=tok, patch_size=14, spatial_merge_size=2,
                     chat_template=CHAT_TEMPLATE).save_pretrained(tmp_path)
    Mistral3Config(image_token_index=tok.convert_tokens_to_ids("[IMG]"),
                   text_config={"num_hidden_layers": 1, "vocab_size": len(tok)}).save_pretrained(tmp_path)
    model = StandardizedTransformer(str(tmp_path), task="image-text-to-text", dispatch=False)
    prompt = "<s>[INST][IMG]What is in this image?[/INST]"
    from vlreg.testing.conformance import image, taken_sizes

    for size in taken_sizes(model, prompt, DEFAULT_GRIDS):
        rows, columns = DEFAULT_GRIDS[size]
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks the tokens against the encoding
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, grid.fold) == (rows, columns, 2), size
        assert torch.allclose(grid.boxes[-1, 2:], torch.tensor(size, dtype=torch.float64)), size


#: The DSA indexer's rows, refused by name, each with a fragment of the reason.
INDEXER = {f"self_attn.{name}": "not declared on the standard sparse-attention names"
           for name in ("indexer_scores", "selected_keys", "sparse_attention_mask")}


class TestMistralLarge4(PublishedWidths):
    """Mistral-Large-4's defaults: 72 blocks 6144 wide, 64 heads with values of 128, every
    fourth block without positions, 128 experts choosing 4; a 30-block Pixtral tower 2048
    wide with 14-pixel patches merged 2 x 2."""

    config = MistralLarge4Config
    checkpoint = "mistral_large4"
    family = "mistral3"
    parts = {"vision": ("pixtral", "vlreg-mistral3"), "text": ("mistral_large4_text", "vlreg-mistral3")}
    published = {
        "num_layers": 72, "hidden_size": 6144, "num_heads": 64, "head_dim": 128,
        "layers.0.self_attn.kv_lora_rank": 512, "layers.3.self_attn.qk_rope_head_dim": 0,
        "layers.1.mlp.num_experts": 128, "layers.1.mlp.top_k": 4,
        "vision.num_layers": 30, "vision.vision_hidden_size": 2048, "vision.num_heads": 16, "vision.patch_size": 14,
        "projector.patch_merger.merging_layer.weight.shape": (2048, 2048 * 2**2),
    }
    refused = {**INDEXER, "self_attn.query_latents": "q_lora_rank is None"}
