"""Florence-2 at the published widths (transformers' ``Florence2Config()`` defaults), on meta.

Read from transformers 5.23's config classes, not from memory: the image token id is
51289, BART's defaults give the text model 1024 wide with 12 encoder and 12 decoder blocks
of 16 heads, and DaViT's four stages are 128, 256, 512 and 1024 wide with strides 4, 2, 2, 2
(a token per 32 x 32 pixels). BART's default vocabulary (50265) is smaller than the image
token id, so the config alone cannot embed its own image token; the test widens it to hold
the id, as a checkpoint's vocabulary must.

vlreg's lazy build (``dispatch=False``) cannot build Florence-2: transformers' DaViT calls
``.item()`` while it is built, which nnsight's meta build refuses. So the module is built
under ``torch.device("meta")`` and checked against what the family reads: the claims and
the names the plugin renames resolve on it."""

import torch
from transformers import Florence2Config, Florence2ForConditionalGeneration

from vlreg.core.host.family import resolve
from vlreg_florence2.geometry import final_grid


def test_published_widths_on_meta():
    config = Florence2Config()
    assert config.image_token_id == 51289
    assert config.text_config.vocab_size < config.image_token_id
    config.text_config.vocab_size = config.image_token_id + 1
    family = resolve(config)
    assert family.name == "florence2" and set(family.parts) == {"wrapper", "text", "vision"}
    with torch.device("meta"):
        module = Florence2ForConditionalGeneration(config)
    for native in family.plugins["wrapper"].vlreg_rename(family.parts["wrapper"]):  # every mount resolves
        assert module.get_submodule(native) is not None
    text = module.model.language_model
    assert (len(text.decoder.layers), len(text.encoder.layers)) == (12, 12)
    assert text.shared.weight.shape == (config.image_token_id + 1, 1024)
    block = text.decoder.layers[0]
    assert (block.self_attn.num_heads, block.self_attn.head_dim, block.fc2.in_features) == (16, 64, 4096)
    assert [conv.conv.out_channels for conv in module.model.vision_tower.convs] == [128, 256, 512, 1024]
    assert final_grid(config.vision_config, 768, 768) == (24, 24)  # 577 image tokens with the pooled one
