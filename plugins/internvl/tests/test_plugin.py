"""The plugin as a distribution: what it claims, that InternVL's text models it does not
claim come from the plugins that do (nothing imported), and that it serves
InternVL3.5-MoE with no other family installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch
import vlreg_internvl
from vlreg import StandardizedTransformer
from vlreg.core import plugins
from vlreg.plugin import Claim
from vlreg.testing import build
from vlreg.testing.conformance import image

CLAIMS = {Claim("wrapper", "internvl"), Claim("vision", "internvl_vision"), Claim("text", "qwen3_moe")}


def test_claims_are_held():
    assert set(vlreg_internvl.vlreg_claims()) == CLAIMS
    held = plugins.claims()
    for claim in CLAIMS:
        assert held[(claim.kind, claim.model_type)] is vlreg_internvl
    assert plugins.distribution(vlreg_internvl).name == "vlreg-internvl"


def test_internvl3_5s_qwen3_text_comes_from_the_plugin_that_claims_it():
    """InternVL3.5's dense checkpoints pair the InternViT with Qwen3, claimed by another
    plugin (vlreg-text): served from there, and the image reaches its blocks."""
    model = StandardizedTransformer(str(build("internvl3_5")), task="image-text-to-text", dispatch=True, device="cpu")
    assert model.family.parts["text"].model_type == "qwen3"
    assert model.family.plugins["text"] is plugins.claims()[("text", "qwen3")] is not vlreg_internvl
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with model.trace(prompt, images=[image(112, 84)]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert torch.equal(first[mask], features) and features.shape[0] == 80


ALONE = textwrap.dedent(
    """
    import tempfile, warnings
    warnings.simplefilter("ignore")
    from vlreg import NoFamily, StandardizedTransformer
    from vlreg.core import plugins
    from vlreg.testing import build
    from vlreg.testing.conformance import image

    assert [name for name, _ in plugins.plugin_manager().list_name_plugin()] == ["internvl"]
    with tempfile.TemporaryDirectory() as folder:
        model = StandardizedTransformer(str(build("internvl3_5_moe", folder)),
                                        task="image-text-to-text", dispatch=True, device="cpu")
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
        prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        with model.trace(prompt, images=[image(112, 84)]):
            mask = model.vision.image_token_mask.save()
            features = model.vision.image_features.save()
            first = model.layers[0].input.save()
        assert (first[mask] == features).all() and features.shape[0] == 80
        try:
            StandardizedTransformer(str(build("internvl", folder + "/qwen2")), task="image-text-to-text")
        except NoFamily as error:
            assert "qwen2" in str(error), error
        else:
            raise AssertionError("a Qwen2 text part loaded with no plugin serving it")
    print("alone ok")
    """
)


def test_works_with_no_other_family_installed():
    env = {**os.environ, "VLREG_LOAD_PLUGINS": "internvl"}
    done = subprocess.run([sys.executable, "-c", ALONE], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "alone ok" in done.stdout
