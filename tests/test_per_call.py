"""A module called once per crop, served every call (`vlreg.plugin.PerCall`), and root
sizes read off the modules, on a tiny LFM2-VL declared by a plugin in this test.

LFM2-VL's wrapper runs its projector once per crop (the tiles, then a thumbnail) in a
loop, and its text model's MLPs are wider than ``intermediate_size`` says where the
config sets ``block_auto_adjust_ff_dim``. No family plugin serves it yet, so the plugin is
written here against the public API, as an outside author would, and registered for the
tests; the checkpoint is built on disk and loaded through ``from_pretrained``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.plugin import (
    Attention, Claim, Layer, Mlp, PerCall, Scatter, Vision, VisionAttention, VisionLayer, VisionMlp, hookimpl,
)
from vlreg.testing import registered, save, tokenizer
from vlreg.testing.conformance import image
from vlreg.testing.conformance.trust import _calls

TOKENS = ("<|pad|>", "<|startoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<|image_start|>", "<|image_end|>",
          "<|img_thumbnail|>")
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class Projector(PerCall):
    """LFM2-VL's projector: one call per row of ``pixel_values`` (each tile, then the thumbnail)."""

    def calls(self, inputs: dict) -> int:
        pixels = inputs.get("pixel_values")
        return 0 if pixels is None else int(pixels.shape[0])


class Lfm2Mlp(Mlp):
    _widening = ("w1",)


class Lfm2Vl:
    """The plugin: the wrapper, LFM2's text blocks (attention ones; the conv blocks'
    mixer is not served), the SigLIP 2 tower."""

    @hookimpl
    def vlreg_claims(self):
        return [Claim("wrapper", "lfm2_vl"), Claim("text", "lfm2"), Claim("vision", "siglip2_vision_model")]

    @hookimpl
    def vlreg_rename(self, part):
        if part.kind == "wrapper":
            return {"model.language_model.layers": "layers", "model.language_model.embed_tokens": "embed_tokens",
                    "model.language_model.embedding_norm": "norm", "model.vision_tower": "vision",
                    "model.multi_modal_projector": "projector"}
        if part.kind == "text":
            return {"feed_forward": "mlp"}
        return {"encoder.layers": "layers"}

    @hookimpl
    def vlreg_envoys(self, part):
        from transformers.models.lfm2 import modeling_lfm2 as text
        from transformers.models.lfm2_vl import modeling_lfm2_vl as wrapper
        from transformers.models.siglip2 import modeling_siglip2 as tower

        if part.kind == "wrapper":
            return {wrapper.Lfm2VlMultiModalProjector: Projector}
        if part.kind == "text":
            return {text.Lfm2DecoderLayer: Layer, text.Lfm2Attention: Attention, text.Lfm2MLP: Lfm2Mlp}
        return {tower.Siglip2VisionModel: Vision, tower.Siglip2EncoderLayer: VisionLayer,
                tower.Siglip2Attention: VisionAttention, tower.Siglip2MLP: VisionMlp}

    @hookimpl
    def vlreg_scatter(self, part):
        return Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


def build_lfm2_vl(path: Path) -> Path:
    from transformers import Lfm2VlConfig, Lfm2VlImageProcessor, Lfm2VlProcessor

    tok = tokenizer(TOKENS, pad_token="<|pad|>", bos_token="<|startoftext|>", eos_token="<|im_end|>")
    ids = {token: tok.convert_tokens_to_ids(token) for token in TOKENS}
    images = Lfm2VlImageProcessor(tile_size=32, encoder_patch_size=4, downsample_factor=2, min_image_tokens=4,
                                  max_image_tokens=16, min_tiles=2, max_tiles=4, max_num_patches=64)
    processor = Lfm2VlProcessor(image_processor=images, tokenizer=tok, chat_template=TEMPLATE)
    config = Lfm2VlConfig(
        text_config={"model_type": "lfm2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "layer_types": ["conv", "full_attention"],
                     "block_auto_adjust_ff_dim": True, "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 16, "vocab_size": len(tok),
                     "pad_token_id": ids["<|pad|>"], "bos_token_id": ids["<|startoftext|>"],
                     "eos_token_id": ids["<|im_end|>"]},
        vision_config={"model_type": "siglip2_vision_model", "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "patch_size": 4, "num_patches": 64},
        image_token_id=ids["<image>"], projector_hidden_size=64, downsample_factor=2,
    )
    return save(path, config, processor)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = build_lfm2_vl(tmp_path_factory.mktemp("lfm2_vl"))
    with registered(Lfm2Vl(), name="lfm2-vl-test"):
        yield StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True, device="cpu",
                                      attn_implementation="eager")


def prompt(model) -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


PICTURE = image(112, 84)


def test_the_projector_runs_once_per_crop_and_serves_every_call(model):
    counts = _calls(model, (prompt(model),), {"images": [PICTURE]})
    crops = counts[model.projector]
    assert crops > 1, "the tiny image is not cut into crops: the test would not reach a second call"
    with model.trace(prompt(model), images=[PICTURE]):
        outputs = model.projector.output.save()
        features = model.vision.image_features.save()
    assert isinstance(outputs, list) and len(outputs) == crops
    assert torch.equal(torch.cat([out.reshape(-1, out.shape[-1]) for out in outputs]), features)


def test_every_call_of_the_projector_takes_a_write(model):
    """An assignment is a list, one entry per call, each written as its call returns (so
    it is made before the calls are read: their shapes come from an earlier trace)."""
    with model.trace(prompt(model), images=[PICTURE]):
        outputs = model.projector.output.save()
    with model.trace(prompt(model), images=[PICTURE]):
        model.projector.output = [torch.zeros_like(out) for out in outputs]
        features = model.vision.image_features.save()
    assert features.abs().max() == 0
    with pytest.raises(ValueError, match="assign a list"):
        with model.trace(prompt(model), images=[PICTURE]):
            model.projector.output = torch.zeros(1)


def test_root_sizes_are_the_modules_where_the_config_differs(model):
    """``block_auto_adjust_ff_dim`` makes each MLP 2/3 of ``intermediate_size`` wide."""
    config = model._module.config.text_config
    assert model.layers[0].mlp.intermediate_size == model.layers[0].mlp.w1.out_features == int(2 * 96 / 3)
    assert model.intermediate_size == model.layers[0].mlp.intermediate_size != config.intermediate_size
