"""The plugin as a distribution: what it claims, that its adapters serve other wrappers,
and that it works with no other family installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import vlreg_llava
from vlreg import StandardizedTransformer
from vlreg.core.host import plugins
from vlreg.plugin import Attention, Claim, Layer, Mlp, Scatter, Vision, VisionLayer, hookimpl
from vlreg.testing import registered, tokenizer

CLAIMS = {
    Claim("wrapper", "llava"),
    Claim("wrapper", "llava_next"),
    Claim("wrapper", "llava_onevision"),
    Claim("wrapper", "llava_next_video"),
    Claim("wrapper", "video_llava"),
    Claim("text", "qwen2"),
    Claim("text", "llama"),
    Claim("text", "mistral"),
    Claim("vision", "siglip_vision_model"),
    Claim("vision", "clip_vision_model"),
}


def test_claims_are_the_installed_plugins_and_no_other_holds_them():
    assert set(vlreg_llava.vlreg_claims()) == CLAIMS
    held = plugins.claims()
    for claim in CLAIMS:
        assert held[(claim.kind, claim.model_type)] is vlreg_llava
    assert plugins.distribution(vlreg_llava).name == "vlreg-llava"


class Gemma3ByHand:
    """A third-party wrapper plugin: it claims Gemma 3's wrapper and text model and
    nothing about its SigLIP tower."""

    @hookimpl
    def vlreg_claims(self):
        # Overrides the Gemma 3 example where it is installed too (examples/ collected).
        return [Claim("wrapper", "gemma3", overrides="gemma3"), Claim("text", "gemma3_text", overrides="gemma3")]

    @hookimpl
    def vlreg_rename(self, part):
        if part.kind == "wrapper":
            return {
                "model.language_model.embed_tokens": "embed_tokens",
                "model.language_model.layers": "layers",
                "model.language_model.norm": "norm",
                "model.vision_tower": "vision",
                "model.multi_modal_projector": "projector",
            }
        return None

    @hookimpl
    def vlreg_envoys(self, part):
        from transformers.models.gemma3 import modeling_gemma3 as gemma3

        if part.kind == "text":
            return {gemma3.Gemma3DecoderLayer: Layer, gemma3.Gemma3Attention: Attention, gemma3.Gemma3MLP: Mlp}
        return None

    @hookimpl
    def vlreg_scatter(self, part):
        return Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


def test_another_wrapper_reuses_the_siglip_tower_adapter():
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    config = Gemma3Config(
        text_config={"vocab_size": 300, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "image_size": 56, "patch_size": 14},
        mm_tokens_per_image=4, image_token_index=299, boi_token_index=298, eoi_token_index=297,
    )
    module = Gemma3ForConditionalGeneration(config).eval()
    plugin = Gemma3ByHand()
    # any installed plugin serving Gemma 3 (vlreg-gemma, the example) steps aside for it
    others = [p for p in map(plugins.plugin_manager().get_plugin, ("gemma", "gemma3")) if p is not None]
    with registered(plugin, name="gemma3-by-hand", replacing=others):
        with pytest.warns(UserWarning, match="no image reaches the model"):  # a text-generation load
            model = StandardizedTransformer(module, dispatch=True, tokenizer=tokenizer(["<pad>", "<eos>"]))
    assert model.family.plugins["vision"] is vlreg_llava
    assert model.family.plugins["wrapper"] is plugin
    assert type(model.vision) is Vision
    assert model.vision._aliases == {
        "patch_embed": "embeddings.patch_embedding", "layers": "encoder.layers", "norm": "post_layernorm",
    }
    assert all(type(block) is VisionLayer for block in model.vision.layers)
    assert model.vision.layers[0]._aliases == {"input_layernorm": "layer_norm1", "post_attention_layernorm": "layer_norm2"}
    assert model.vision.vision_hidden_size == 32 and model.hidden_size == 64
    for block in model.layers:
        assert not set(block._aliases.values()) & {"layer_norm1", "layer_norm2", "post_layernorm"}


ALONE = textwrap.dedent(
    """
    import tempfile, warnings
    warnings.simplefilter("ignore")
    from vlreg import StandardizedTransformer
    from vlreg.core.host import plugins
    from vlreg.testing import build
    from vlreg.testing.conformance import image

    assert set(plugins.plugin_manager().list_name_plugin()) == {("llava", plugins.claimant("wrapper", "llava"))}
    with tempfile.TemporaryDirectory() as folder:
        model = StandardizedTransformer(str(build("llava_interleave", folder)),
                                        task="image-text-to-text", dispatch=True, device="cpu")
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with model.trace(prompt, images=[image(112, 84)]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert (first[mask] == features).all() and features.shape[0] == 16
    print("alone ok")
    """
)


def test_works_with_no_other_family_installed():
    """Loaded alone (``VLREG_LOAD_PLUGINS=llava``), the plugin builds, loads and traces."""
    env = {**os.environ, "VLREG_LOAD_PLUGINS": "llava"}
    done = subprocess.run([sys.executable, "-c", ALONE], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "alone ok" in done.stdout
