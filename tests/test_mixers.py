"""A block's mixer kinds, declared on its envoy class (`Layer.mixers`, `vlreg.plugin.Mixer`):
the block's standard children and forward order follow the declaration, and a mixer held
under another native name is bound under its standard name on blocks of that class only.
Served for real by vlreg-lfm2-vl (LFM2's ``conv``, as ``short_conv``); a plugin written here
against the public API declares a kind whose name a block already uses, and is refused."""

from __future__ import annotations

import pytest

from vlreg import StandardizedTransformer
from vlreg.plugin import Attention, Claim, Layer, Mixer, Mlp, Standard, hookimpl
from vlreg.testing import build, registered


class Convolving(Layer):
    mixers = (Mixer("self_attn"), Mixer("short_conv", native="conv"))


class Tapped(Layer):
    order = (*Layer.order, "deepstack_output")


class TappedConvolving(Tapped):
    mixers = (Mixer("short_conv", native="conv"),)


def test_the_declared_mixers_are_the_blocks_children_in_forward_order():
    assert Layer.standard_children == {"self_attn": "self_attn.", "linear_attn": "linear_attn.", "mamba": "mamba.",
                                       "mlp": "mlp."}
    assert Convolving.standard_children == {"self_attn": "self_attn.", "short_conv": "short_conv.", "mlp": "mlp."}
    assert Convolving.order == ("input", "self_attn", "short_conv", "mlp", "output", "layer_output")
    # a subclass's own entries stay where it put them
    assert TappedConvolving.order == ("input", "short_conv", "mlp", "output", "layer_output", "deepstack_output")
    assert list(TappedConvolving.standard_children) == ["short_conv", "mlp"]


def test_the_core_blocks_declare_theirs():
    from vlreg.plugin import CrossAttentionLayer, DecoderLayer

    assert [mixer.name for mixer in CrossAttentionLayer.mixers] == ["cross_attn"]
    assert CrossAttentionLayer.order == ("input", "cross_attn", "mlp", "output", "layer_output")
    assert [mixer.name for mixer in DecoderLayer.mixers] == ["self_attn"]  # cross_attn: a sublayer of its own
    assert DecoderLayer.order == ("input", "self_attn", "cross_attn", "mlp", "output", "layer_output")


class Clashing(Layer):
    """Declares LFM2's convolution under a name its blocks already hold (its MLP's)."""

    mixers = (Mixer("self_attn"), Mixer("feed_forward", native="conv"))


class ClashingText:
    @hookimpl
    def vlreg_claims(self):
        return [Claim("text", "lfm2", overrides="lfm2_vl")]

    @hookimpl
    def vlreg_rename(self, part):
        return {}

    @hookimpl
    def vlreg_envoys(self, part):
        from transformers.models.lfm2 import modeling_lfm2 as modeling

        return {modeling.Lfm2DecoderLayer: Clashing, modeling.Lfm2Attention: Attention, modeling.Lfm2MLP: Mlp,
                modeling.Lfm2ShortConv: Standard}


def test_a_mixer_named_as_a_child_the_block_holds_is_refused_at_build():
    path = build("lfm2_vl")
    with registered(ClashingText(), name="clashing"):
        with pytest.raises(ValueError, match=r"declares its conv as the mixer 'feed_forward', but .* already has a "
                                             r"'feed_forward': name the mixer otherwise"):
            StandardizedTransformer(str(path), task="image-text-to-text", dispatch=False)
