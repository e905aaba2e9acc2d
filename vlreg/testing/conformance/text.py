"""The text side of the conformance suite: names, sizes, identities, edits, support."""

from __future__ import annotations

import re
import warnings
from typing import Any, ClassVar

import pytest
import torch

from ...core.envoys.linear import LinearAttention
from ...core.envoys.readout import unembedding
from ...core.envoys.mamba import Mamba
from ...core.envoys.standard import Standard
from ...core.envoys.support import named
from ...core.envoys.text import Attention, Layer, Mlp
from ...core.errors import ReadOnly
from ...core.model import StandardizedTransformer
from ..checkpoints import build
from ..kit import chat
from ..sampling import repeat, sample
from .gradients import GradientConformance
from ...core.envoys.streams import MixingStreamsLayer
from .helpers import (a_video_row, attention_blocks, image, joined_keys, joined_positions, module_at,
                      refused_before_running, served_on_images, sublayer_output, sublayers, text_rows, writable_stream,
                      write_value, written)
from .remote import RemoteConformance
from .attention import INTERIOR, AttentionInterior
from .trust import TextTrust

#: How many of the values `helpers.written` lists the write check writes in one run: each
#: costs two traces, and a family serves 30 to 60 (`vlreg.testing.sampling`).
WRITES = 8


class TextConformance(AttentionInterior, TextTrust, RemoteConformance, GradientConformance):
    """What every family's text model promises. Subclass it in a ``Test*`` class and set:

    * ``checkpoint``: the name of a checkpoint builder (`vlreg_checkpoints`);
    * ``build_options``: overrides for the builder;
    * ``native``: standard names (dotted, from the root) and the native paths they must
      resolve to, e.g. ``{"layers": "model.language_model.layers"}`` (`native.composite`
      writes a composite layout's);
    * ``unavailable``: rows of ``support()`` expected unavailable on an eager image load,
      each with a fragment its reason must contain; reading a row's value must raise
      `Unavailable` with it, before the model runs;
    * ``plain_sum``: whether ``input + attention_output + mlp_output == layer_output`` on
      the family's blocks (a pre-norm block);
    * ``o_proj``: the attention's output projection, which maps the head outputs to the
      attention output (a dotted path below the attention where it is nested);
    * ``load_options``: extra keyword arguments for every load;
    * ``text_images``: images every prompt carries, for a processor that takes no prompt
      without one (PaliGemma's): the text prompt is then the processor's encoding of the
      text with that many images, which a trace takes as it is;
    * ``bidirectional_prefix``: whether the prompt is a prefix the model attends
      bidirectionally (PaliGemma's prefix-LM): the pattern then has tokens attending to
      later ones, where elsewhere it is causal;
    * ``supports_sdpa``: whether transformers runs the text model under sdpa (Gemma 2's
      softcapping runs only eager), which the check that the interior needs eager loads;
    * ``one_sublayer``: whether each block holds one sublayer, a mixer or an MLP
      (NemotronH's), rather than a mixer and an MLP;
    * ``processor_prefix``, ``processor_suffix``: text the processor writes before and
      after every prompt that the tokenizer alone does not (Emu3's processor writes the BOS,
      Chameleon's a separator after the prompt), so a load with no processor (text
      generation) is given it written out.
    * ``last_block_is_read_out``: whether the final norm reads the last block's
      ``layer_output`` as it is; not where the text model combines more after its last
      block (every stream of blocks that carry several, `vlreg.core.envoys.streams`), and
      the logit-lens check then reads what the final norm is called with.
    """

    checkpoint: ClassVar[str]
    build_options: ClassVar[dict] = {}
    load_options: ClassVar[dict] = {}
    native: ClassVar[dict[str, str]] = {}
    unavailable: ClassVar[dict[str, str]] = {}
    plain_sum: ClassVar[bool] = True
    o_proj: ClassVar[str] = "o_proj"
    text: ClassVar[str] = "The quick brown fox jumps over the lazy dog."
    text_images: ClassVar[int] = 0
    bidirectional_prefix: ClassVar[bool] = False
    supports_sdpa: ClassVar[bool] = True
    one_sublayer: ClassVar[bool] = False
    processor_prefix: ClassVar[str] = ""
    processor_suffix: ClassVar[str] = ""
    last_block_is_read_out: ClassVar[bool] = True

    # -- fixtures -------------------------------------------------------------

    @pytest.fixture(scope="class")
    @classmethod
    def path(cls) -> str:
        return str(build(cls.checkpoint, **cls.build_options))

    @classmethod
    def load(cls, path: str, **options: Any) -> StandardizedTransformer:
        options = {"task": "image-text-to-text", "dispatch": True, "device": "cpu", **cls.load_options, **options}
        return StandardizedTransformer(path, **options)

    @pytest.fixture(scope="class")
    @classmethod
    def model(cls, path: str) -> StandardizedTransformer:
        return cls.load(path, attn_implementation="eager")

    @pytest.fixture(scope="class")
    @classmethod
    def sdpa_model(cls, path: str) -> StandardizedTransformer:
        if not cls.supports_sdpa:
            pytest.skip("transformers runs this text model only with eager attention (it refuses sdpa)")
        return cls.load(path, attn_implementation="sdpa")

    def text_prompt(self, model: StandardizedTransformer, text: str | None = None,
                    generation: bool = True) -> "str | dict":
        text = text or self.text
        if model.processor is None:  # a base language model: the plain text
            return text
        prompt = chat(model, text=text, images=self.text_images, generation=generation)
        if not self.text_images:
            return prompt
        pictures = [image(56, 56, seed) for seed in range(self.text_images)]
        return dict(model.processor(text=prompt, images=pictures, return_tensors="pt"))

    def written(self, model: StandardizedTransformer, prompt: Any) -> Any:
        """``prompt`` as the processor hands it to the tokenizer, where the model has one:
        with what the processor writes around it (``processor_prefix``, ``processor_suffix``)."""
        if model.processor is None or not isinstance(prompt, str):
            return prompt
        return self.processor_prefix + prompt + self.processor_suffix

    # -- names and sizes ----------------------------------------------------

    def test_standard_names_resolve_to_native_paths(self, model):
        for name, native in self.native.items():
            assert model.get(name).path == f"model.{native}", name

    def test_blocks_are_standard(self, model):
        """Each block holds its mixer under a kind its class declares (`Layer.mixers`):
        the core's kinds are their standard classes, a family's own a standard envoy."""
        kinds = {"self_attn": Attention, "linear_attn": LinearAttention, "mamba": Mamba}
        for block in model.layers:
            assert isinstance(block, Layer)
            mixers = [mixer.name for mixer in block.mixers if mixer.name in block.__dict__]
            assert all(isinstance(block.__dict__[name], kinds.get(name, Standard)) for name in mixers)
            mlp = block.__dict__.get("mlp")
            assert mlp is None or isinstance(mlp, Mlp)
            if self.one_sublayer:
                assert len(mixers) + (mlp is not None) == 1, "one sublayer per block"
            else:
                assert len(mixers) == 1 and mlp is not None, "one mixer and an MLP per block"

    def test_sizes_agree_with_the_weights(self, model):
        """``num_layers`` counts the block calls (a looped block's once per pass:
        `Layer.passes`), every block module among them."""
        from ...core.envoys.blocks import passes_of

        modules = {id(block._module): block for block in model.layers}  # a looped block's calls share its module
        assert model.num_layers == len(model.layers) == sum(passes_of(block) for block in modules.values())
        assert len(modules) == len(model.layers._module)
        assert tuple(model.embed_tokens.weight.shape) == (model.vocab_size, model.hidden_size)
        assert unembedding(model).shape[0] == model.vocab_size
        for block in attention_blocks(model):
            attention = block.self_attn
            assert module_at(attention, self.o_proj).weight.shape[1] == attention.num_heads * attention.head_dim
            assert attention.num_heads % attention.num_kv_heads == 0
        # the root's sizes against each block's (heads may differ by block):
        # test_root_sizes_are_what_the_blocks_agree_on

    def test_the_repr_lists_each_standard_value_with_its_description(self, model):
        for envoy in (model, *model.layers, *[part for b in model.layers for part in sublayers(b)]):
            shown = repr(envoy)
            for name in type(envoy).values():
                description = getattr(type(envoy), name).description
                assert description, f"{type(envoy).__name__}.{name} has no description"
                assert f"({name})" in shown and description in shown, name

    def test_values_read_in_walk_order_in_one_trace_are_in_order(self, model):
        """`walk` (and `support`) list values in the order the forward computes them:
        reading every served one in that order in one trace never reads backwards."""
        read = []  # made outside the trace: names first bound inside one do not leave it
        args, kwargs = self.order_input(model)
        with model.trace(*args, **kwargs):
            for envoy, name in served_on_images(model):
                read.append(getattr(envoy, name).save())
        assert len(read) > 10

    def order_input(self, model: StandardizedTransformer) -> tuple[tuple, dict]:
        return (self.text_prompt(model),), {}

    def test_every_value_written_reaches_the_logits_or_refuses(self, model):
        """A write to any served value either changes what the model computes (zeros,
        on random weights, move the logits) or is refused with `ReadOnly`, by assignment
        and in place alike: no edit lands nowhere. `WRITES` of the values a run, drawn from
        its seed: over runs, every one."""
        args, kwargs = self.order_input(model)
        with model.trace(*args, **kwargs):
            clean = model.logits.save()
        for envoy, name in sample(written(model), WRITES, f"{type(self).__name__} writes"):
            reason = envoy.why_read_only(name)
            for way in ("assign", "in place"):
                with model.trace(*args, **kwargs):
                    served = getattr(envoy, name)
                    if reason is None:
                        write_value(envoy, name, served, way)
                    else:
                        with pytest.raises(ReadOnly):
                            write_value(envoy, name, served, way)
                    out = model.logits.save()
                label = envoy.label(name)
                if reason is None:
                    assert not torch.equal(out, clean), f"writing {label} ({way}) changed nothing ({repeat()})"
                else:
                    assert torch.equal(out, clean), f"{label} refused the write ({way}) but something changed ({repeat()})"

    # -- values ---------------------------------------------------------------

    def test_block_identity(self, model):
        """A pre-norm block's output is its input plus its sublayers' outputs; a post-norm
        block (``post_norms``: BART's) norms the stream after each sublayer's add
        (`vlreg.core.envoys.seq2seq.post_norm_output`). Every stack's blocks are checked."""
        from ...core.envoys.seq2seq import post_norm_output, sublayer_names

        encoder = model.__dict__.get("encoder")
        blocks = [*(encoder.layers if encoder is not None else ()), *model.layers]
        if any(block.identity_reads() for block in blocks):
            return self._check_declared_identities(model, blocks)
        if not self.plain_sum and not all(getattr(block, "post_norms", ()) for block in blocks):
            pytest.skip("this family's blocks are no plain sum of their sublayers (their outputs are normed, scaled, "
                        "or, on blocks of several streams, combined): its own tests check its identity")
        rows = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.text_prompt(model)):
            for block in blocks:
                parts = [block.__dict__[name] for name in sublayer_names(block)] if block.post_norms else sublayers(block)
                rows.append((block, block.input.save(), [sublayer_output(part).save() for part in parts],
                             block.layer_output.save()))
        for block, x, added, out in rows:
            if block.post_norms:
                torch.testing.assert_close(post_norm_output(block, x, added), out)
            else:
                torch.testing.assert_close(sum(added, x), out)  # x + a + b, in that order (bfloat16 rounds)

    def _check_declared_identities(self, model, blocks) -> None:
        """Each block that states its identity (`Layer.identity`) holds it: what it gives
        from the values it reads equals what the block served."""
        rows = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.text_prompt(model)):
            for block in blocks:
                names = block.identity_reads()
                rows.append((block, names, [_dotted(block, name).save() for name in names]))
        for block, names, read in rows:
            if names:
                values = dict(zip(names, read))
                torch.testing.assert_close(block.identity(values), values[names[-1]], msg=lambda m: f"{block}: {m}")

    def test_in_place_edit_of_layer_output_reaches_the_next_block(self, model):
        prompt = self.text_prompt(model)
        out, into = writable_stream(model)
        with model.trace(prompt):
            getattr(model.layers[0], out)[:] = 0
            after = getattr(model.layers[1], into).save()
        if isinstance(model.layers[0], MixingStreamsLayer) and out == "layer_output":
            # the collapse vlreg computes, written back through its inverse: zero within float error
            torch.testing.assert_close(after, torch.zeros_like(after))
        else:
            assert after.abs().max() == 0

    def test_assigned_layer_output_reaches_the_next_block(self, model):
        prompt = self.text_prompt(model)
        out, into = writable_stream(model)
        with model.trace(prompt):
            setattr(model.layers[0], out, getattr(model.layers[0], out) * 2)
            after = getattr(model.layers[1], into).save()
        with model.trace(prompt):
            plain = getattr(model.layers[0], out).save()
        torch.testing.assert_close(after, plain * 2)

    def test_logits_are_the_readout(self, model):
        """``uncapped_logits`` is ``lm_head``'s output; ``logits`` what the model returns
        (the same tensor, but after a final softcap: `TextTrust`)."""
        with model.trace(self.text_prompt(model)):
            readout = model.lm_head.output.save()
            uncapped = model.uncapped_logits.save()
            logits = model.logits.save()
        assert torch.equal(uncapped, readout)
        assert logits.shape == readout.shape and logits.shape[-1] == model.vocab_size

    def test_token_embeddings_are_the_embedding(self, model):
        prompt = self.text_prompt(model)
        written = self.written(model, prompt)
        ids = prompt["input_ids"] if isinstance(prompt, dict) else model.tokenizer(written, return_tensors="pt")["input_ids"]
        with model.trace(prompt):
            embeddings = model.token_embeddings.save()
        assert torch.equal(embeddings, model.embed_tokens._module(ids))

    def test_support_lists_every_value(self, model):
        rows = model.support()
        for name in ("token_embeddings", "logits", "input", "output", "layer_output",
                     "self_attn.attention_output", "mlp.mlp_output"):
            assert text_rows(rows, name) and all(rows[row] is None for row in text_rows(rows, name)), name
        for name in INTERIOR:
            assert text_rows(rows, f"self_attn.{name}"), name
        refused = model.family.sentences  # what the family declares it never serves
        assert set(refused) <= set(rows), "support() lists every name a claim refuses"
        for row, reason in rows.items():
            if a_video_row(row):  # VideoConformance's, served or refused
                continue
            if row in refused:
                assert reason is not None, row
            elif row in self.unavailable:
                assert reason is not None and self.unavailable[row] in reason, row
            else:
                assert reason is None, f"{row}: {reason}"

    def test_an_unavailable_value_is_refused_with_its_reason_before_the_model_runs(self, model):
        if not self.unavailable:
            pytest.skip("this family serves every value on an eager image load")
        for row, found in [(row, named(model, row)) for row in self.unavailable]:
            if found is None:  # a row that names no value: a trace input, a child
                continue
            envoy, name = found
            with refused_before_running(model, re.escape(self.unavailable[row])):
                with model.trace(self.text_prompt(model)):
                    getattr(envoy, name).save()

    def test_a_trace_that_edits_leaves_the_weights_alone(self, model):
        before = {name: tensor.clone() for name, tensor in model._module.state_dict().items()}
        with model.trace(self.text_prompt(model)):
            getattr(model.layers[0], writable_stream(model)[0])[:] = 0
            attention_blocks(model)[-1].self_attn.attention_probabilities[:] = 0
            model.logits.save()
        after = model._module.state_dict()
        assert before.keys() == after.keys()
        for name, tensor in before.items():
            assert torch.equal(tensor, after[name]), name

    def test_lazy_build_binds_the_same_names_then_dispatches(self, path, model):
        lazy = self.load(path, dispatch=False, attn_implementation="eager")
        assert not lazy.dispatched
        assert lazy.embed_tokens.weight.device.type == "meta"
        assert lazy._aliases == model._aliases
        prompt = self.text_prompt(model)
        joined = []  # made outside the trace: names first bound inside one do not leave it
        with lazy.trace(prompt):
            joined_keys(lazy, attention_blocks(lazy)[-1], joined)
            pattern = attention_blocks(lazy)[-1].self_attn.attention_probabilities.save()
            logits = lazy.logits.save()
        with model.trace(prompt):
            expected = model.logits.save()
        assert lazy.dispatched
        assert pattern.shape[-1] == logits.shape[1] + joined_positions(joined)
        assert torch.equal(logits, expected)

    def test_device_map_auto_keeps_the_names(self, path, model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sharded = self.load(path, device="auto")
        assert sharded._aliases == model._aliases
        with sharded.trace(self.text_prompt(model)):
            out = sharded.layers[-1].layer_output.save()
        assert out.shape[-1] == model.hidden_size


def _dotted(envoy: Any, name: str) -> Any:
    for part in name.split("."):
        envoy = getattr(envoy, part)
    return envoy
