"""`vlreg.plugin.Plugin`: a family plugin as one declaration of its parts.

The last tests declare a plugin here, in this file, the way an author outside vlreg would:
LFM2-VL, whose blocks mix tokens by attention or by a short convolution (a mixer kind the
core does not know) and whose projector runs once per crop. It is written with the names
of `vlreg.plugin` only (a test below reads this file's imports to hold it to that),
registered in place of vlreg-lfm2-vl, and traced on a tiny LFM2-VL built on disk.
"""

import ast
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from vlreg_lfm2_vl import plugin as lfm2_vl
from vlreg_lfm2_vl.vision import PER_CROP

from vlreg import StandardizedTransformer
from vlreg.plugin import (
    SCATTER, Attention, Claim, Layer, Mixer, Mlp, Part, PerCall, Plugin, Scatter, Standard, Text, Tower, Vision,
    Wrapper, adapter, prefill_only, read_only, returned, tower_envoys, value,
)
from vlreg.testing import build, chat, registered
from vlreg.testing.conformance import image


def part(kind: str, model_type: str) -> Part:
    return Part(kind, model_type, config=None, root=None)


def grids(encoding, images, processor):
    return []


DECLARED = Plugin(
    Wrapper("tiny_wrapper", text="model.text", vision=None, rename={"model.text.lm_head": "lm_head"},
            entry=Scatter("model", "op_0"),
            image_grids=lambda part: grids, refuses={"videos": "frames are not served; pass them as images",
                                                     "vision.*": read_only(lambda envoy: None)}),
    Text(("tiny_text", "tinier_text"), rename=lambda part: {"attn": f"self_attn_of_{part.model_type}"},
         envoys=lambda part: {torch.nn.Linear: Layer}),
    Tower("tiny_vision", overrides="someone", refuses={"tower_output": read_only("the projector reads no tower")}),
    adapters={"tiny_tower": "published"},
    checkpoints=lambda: {"tiny": print},
)


def test_a_declaration_answers_every_hook_from_its_parts():
    claims = DECLARED.vlreg_claims()
    assert [(claim.kind, claim.model_type) for claim in claims] == [
        ("wrapper", "tiny_wrapper"), ("text", "tiny_text"), ("text", "tinier_text"), ("vision", "tiny_vision")]
    assert claims[0].refuses == {"videos": "frames are not served; pass them as images"}  # its table's sentences
    assert claims[-1] == Claim("vision", "tiny_vision", overrides="someone")
    wrapper = part("wrapper", "tiny_wrapper")
    assert DECLARED.vlreg_rename(wrapper) == {
        "model.text.layers": "layers", "model.text.embed_tokens": "embed_tokens", "model.text.norm": "norm",
        "model.multi_modal_projector": "projector", "model.text.lm_head": "lm_head"}
    assert DECLARED.vlreg_entry(wrapper) == Scatter("model", "op_0")
    assert DECLARED.vlreg_image_grids(wrapper) is grids  # a function of the part, giving the grids
    # a field given as a function is asked with the part it serves
    assert DECLARED.vlreg_rename(part("text", "tinier_text")) == {"attn": "self_attn_of_tinier_text"}
    assert DECLARED.vlreg_envoys(part("text", "tiny_text")) == {torch.nn.Linear: Layer}
    assert list(DECLARED.vlreg_refuses(part("vision", "tiny_vision"))) == ["tower_output"]
    # what a part does not declare, and a part the plugin does not declare, answer nothing
    assert DECLARED.vlreg_entry(part("text", "tiny_text")) is None
    assert DECLARED.vlreg_rename(part("vision", "tiny_vision")) is None
    assert DECLARED.vlreg_rename(part("wrapper", "another_wrapper")) is None
    assert DECLARED.vlreg_adapters() == {"tiny_tower": "published"}
    assert DECLARED.vlreg_checkpoints() == {"tiny": print}


def test_a_wrapper_states_only_what_differs_from_transformers_composite_layout():
    standard = Plugin(Wrapper("standard_vl"))
    wrapper = part("wrapper", "standard_vl")
    assert standard.vlreg_rename(wrapper) == {
        "model.language_model.layers": "layers", "model.language_model.embed_tokens": "embed_tokens",
        "model.language_model.norm": "norm", "model.vision_tower": "vision", "model.multi_modal_projector": "projector"}
    assert standard.vlreg_entry(wrapper) == SCATTER == Scatter("model", "inputs_embeds_masked_scatter_0", 1)
    # a mount the rename names elsewhere is replaced; a text-only class's mounts are added
    other = Plugin(Wrapper("other_vl", rename={"model.language_model.final_norm": "norm"}, text_only="model",
                           projector=None, entry=None))
    renamed = other.vlreg_rename(part("wrapper", "other_vl"))
    assert renamed["model.language_model.final_norm"] == "norm" and "model.language_model.norm" not in renamed
    assert {renamed[f"model.{name}"] for name in ("layers", "embed_tokens", "norm")} == {"layers", "embed_tokens", "norm"}
    assert "projector" not in renamed.values() and other.vlreg_entry(part("wrapper", "other_vl")) is None


def test_a_part_declared_twice_or_something_else_is_refused_at_once():
    with pytest.raises(ValueError, match="the text part 'tiny_text' is declared twice"):
        Plugin(Text("tiny_text"), Text(("tinier_text", "tiny_text")))
    with pytest.raises(TypeError, match="takes Wrapper, Text, Tower and Other declarations"):
        Plugin(Claim("text", "tiny_text"))
    with pytest.raises(ValueError, match="declares the model types it serves"):
        Text(())


def test_a_declaration_registers_as_a_plugin_and_a_subclass_adds_raw_hooks():
    from vlreg.plugin import hookimpl

    class Declining(Plugin):
        @hookimpl
        def vlreg_declines(self, part):
            return "declined by a hook of its own"

    declared = Declining(Wrapper("tiny_wrapper"))
    with registered(declared, name="declining"):
        assert declared.vlreg_declines(part("wrapper", "tiny_wrapper")) == "declined by a hook of its own"
        from vlreg.core.host import plugins

        assert plugins.claimant("wrapper", "tiny_wrapper") is declared


# -- LFM2-VL, declared from outside with vlreg.plugin's names -----------------------------


class Convolving(Layer):
    """An LFM2 block: attention or a short convolution (a mixer kind of the family's own,
    held natively as ``conv``), then the MLP."""

    mixers = (Mixer("self_attn"), Mixer("short_conv", native="conv"))


class ShortConvolution(Standard):
    """LFM2's gated short convolution: ``out_proj(C * conv(B * x))``, read at the call to the
    convolution inside the module's forward (``causal_conv1d_fn``, at the prefill; from
    transformers 5.25, ``causal_conv1d_forward`` at every step: the subclass below)."""

    sourced = True
    call: ClassVar[str] = "causal_conv1d_fn_0"
    refuses = {"conv_output": prefill_only("the convolution's cached update", "the call", "the convolution")}

    conv_output = value(
        lambda m: f"{m.path}.source.{m.call}.output", description="the convolution's output"
    )(lambda m, raw: raw.transpose(1, 2)).writes(lambda m, raw, new: new.transpose(1, 2).reshape(raw.shape))
    attention_output = returned(description="what the mixer adds to the stream")


class ShortConvolutionEveryStep(ShortConvolution):
    call = "causal_conv1d_forward_0"
    refuses = {"conv_output": ()}  # read at a call made at every step: served at every step


class PerCrop(PerCall):
    """The projector, which the wrapper calls once per crop."""

    def calls(self, inputs: dict) -> int:
        pixels = inputs.get("pixel_values")
        return 0 if pixels is None else int(pixels.shape[0])


class NaFlex(Vision):
    """SigLIP 2's NaFlex tower: each crop's patches, then padding."""

    padded_patches: ClassVar[bool] = True


def text_envoys(part: Any) -> dict:
    from transformers.models.lfm2 import modeling_lfm2 as lfm2

    conv = ShortConvolutionEveryStep if hasattr(lfm2, "causal_conv1d_forward") else ShortConvolution
    return {lfm2.Lfm2DecoderLayer: Convolving, lfm2.Lfm2Attention: Attention, lfm2.Lfm2ShortConv: conv, lfm2.Lfm2MLP: Mlp}


def wrapper_envoys(part: Any) -> dict:
    """The projector per crop where the wrapper calls it so (vlreg-lfm2-vl says which)."""
    from transformers.models.lfm2_vl import modeling_lfm2_vl as lfm2_vl

    return {lfm2_vl.Lfm2VlMultiModalProjector: PerCrop} if PER_CROP else {}


OUTSIDE = Plugin(
    # transformers' composite layout but for the final norm's name
    Wrapper("lfm2_vl", envoys=wrapper_envoys, rename={"model.language_model.embedding_norm": "norm"}),
    Text("lfm2", rename={"feed_forward": "mlp"}, envoys=text_envoys),
    # vlreg-llava's SigLIP names (published for towers like this one), SigLIP 2's four classes
    Tower("siglip2_vision_model", rename=lambda part: adapter("siglip").rename,
          envoys=tower_envoys("siglip2", ("Siglip2VisionModel", "Siglip2EncoderLayer", "Siglip2Attention",
                                          "Siglip2MLP"), vision=NaFlex)),
)


@pytest.fixture(scope="module")
def model():
    path = str(build("lfm2_vl"))
    with registered(OUTSIDE, name="outside", replacing=[lfm2_vl]):
        yield StandardizedTransformer(path, task="image-text-to-text", dispatch=True, device="cpu",
                                      attn_implementation="eager")


PICTURE = image(112, 84)


def test_an_outside_plugin_declares_a_mixer_kind_its_blocks_hold(model):
    assert model.family.name == "outside"
    kinds = [[mixer.place.label.rpartition(".")[2] for mixer in block.present_mixers()] for block in model.layers]
    assert kinds == [["short_conv"], ["short_conv"], ["self_attn"]]
    rows = model.support()
    assert rows["layers.0-1.short_conv.conv_output"] is None and rows["layers.2.self_attn.attention_output"] is None
    saved = []
    with model.trace(chat(model), images=[PICTURE]):
        for block in model.layers:
            mixer = block.short_conv if "short_conv" in block.standard_names() else block.self_attn
            saved.append((block.input.save(), mixer.attention_output.save(), block.mlp.mlp_output.save(),
                          block.layer_output.save()))
    with model.trace(chat(model), images=[PICTURE]):
        model.layers[0].short_conv.conv_output[:] = 0
        zeroed = model.layers[0].short_conv.attention_output.save()
    for entering, mixed, mlp, leaving in saved:
        torch.testing.assert_close(entering + mixed + mlp, leaving)
    assert zeroed.abs().max() == 0  # the write to the convolution's output reached the mixer's output


def test_an_outside_plugin_serves_a_projector_called_once_per_crop(model):
    """Per crop where the wrapper calls it so; from transformers 5.24 one call on every
    crop packed, whose rows hold the features."""
    with model.trace(chat(model), images=[PICTURE]):
        outputs = model.projector.output.save()
        features = model.vision.image_features.save()
    if not PER_CROP:
        rows = outputs.reshape(-1, outputs.shape[-1])
        assert rows.shape[0] > features.shape[0] and (features[:, None] == rows[None]).all(-1).any(-1).all()
        return
    assert isinstance(outputs, list) and len(outputs) > 1  # the image is cut into crops
    assert torch.equal(torch.cat([out.reshape(-1, out.shape[-1]) for out in outputs]), features)


def test_the_outside_plugin_uses_the_public_api_only():
    """The plugin above imports from vlreg only what an outside author may: this file's
    module-level imports are from `vlreg`, `vlreg.plugin` and `vlreg.testing` (a test of the
    host below asks it inside the test), and the plugin's code reaches no private name."""
    source = Path(__file__).read_text()
    plugin_part = source[source.index("# -- LFM2-VL, declared from outside"):source.index("@pytest.fixture")]
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").partition(".")[0] == "vlreg":
            assert node.module in ("vlreg", "vlreg.plugin", "vlreg.testing", "vlreg.testing.conformance"), node.module
    assert "vlreg.core" not in plugin_part and "._" not in plugin_part


# -- another part of the config (a Q-Former's) ---------------------------------------------


def test_another_config_part_is_served_where_claimed_and_named_where_not():
    """BLIP-2's Q-Former config (``qformer_config``) is a part of its own: vlreg-blip claims it
    (an `Other` declaration), and without that claim the checkpoint still resolves, the part
    named unserved."""
    from transformers import AutoConfig
    from vlreg_blip import plugin as blip

    from vlreg.core.host.family import resolve
    from vlreg.plugin import Other

    config = AutoConfig.from_pretrained(build("blip-2"))
    family = resolve(config)
    assert family.parts["qformer_config"].model_type == "blip_2_qformer"
    assert family.plugins["qformer_config"] is blip and not family.unserved
    without = Plugin(*{id(part): part for (kind, _), part in blip.parts.items() if kind != "qformer_config"}.values(),
                     checkpoints=blip.checkpoints)
    with registered(without, name="blip-without-qformer", replacing=[blip]):
        family = resolve(config)
    assert "qformer_config" not in family.plugins and family.unserved == {"qformer_config": "blip_2_qformer"}
    assert "qformer_config='blip_2_qformer' unserved" in repr(family)
    assert Other("blip_2_qformer", field="qformer_config").claims() == [Claim("qformer_config", "blip_2_qformer")]
    with pytest.raises(ValueError, match="or the config field of another part"):
        Claim("qformer", "blip_2_qformer")
