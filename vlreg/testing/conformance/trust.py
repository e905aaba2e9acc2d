"""Classes of silently wrong answers, checked on every family (issue 22, text side).

Each test is one class of answer that once came back wrong without a word: a generation
step steered at the wrong position, probabilities that are not the model's, values not
cut to an invoke's rows, root sizes a config reports but no block has, a module called
several times served once. `TextConformance` mixes this in, so every family runs it.
"""

from __future__ import annotations

import collections
import re
import warnings
from typing import Any

import pytest
import torch

from ... import analysis
from ...core.envoys.readout import Readout, as_returned, declared, refused_lens
from ...core.errors import Unavailable
from ...core.serving.values import value
from .helpers import attention_blocks, refused_before_running, written


class TextTrust:
    """Mixed into `TextConformance`; reads its ``model`` fixture and prompts."""

    # -- generation steps --------------------------------------------------------

    def test_steering_a_generation_step_acts_on_the_positions_it_computes(self, model):
        """At a step after the prefill a block computes only the new token: steering
        sequence position ``length`` (the new token's) there is steering ``-1``, and a
        position already in the cache is refused, naming it, instead of landing on the
        new token."""
        prompt = self.text_prompt(model)
        length = _length(model, prompt)
        vector = torch.ones(model.hidden_size)
        reason = model.layers[0].why_read_only("layer_output")
        if reason is not None:  # steering writes layer_output: refused, by name, before anything runs
            with refused_before_running(model, re.escape(reason)):
                with model.trace(prompt):
                    analysis.steer(model, [0], vector)
            return

        def step_logits(positions: Any = None) -> torch.Tensor:
            saved: list = []
            with model.generate(prompt, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
                for _ in tracer.iter[1:2]:
                    if positions is not None:
                        analysis.steer(model, [0], vector, positions=positions)
                    saved.append(model.logits[:, -1].save())
            return saved[0]

        plain, new_token = step_logits(), step_logits([length])
        assert not torch.equal(plain, new_token), "steering the new token's position changed nothing"
        torch.testing.assert_close(step_logits([-1]), new_token)
        with pytest.raises(ValueError, match="in the cache"):
            step_logits([0])

    # -- probabilities -----------------------------------------------------------

    def test_every_probability_is_the_models_own(self, model):
        """``logits`` is what the model returns (after any final softcap), and every
        probability vlreg reports is its softmax: the next-token distribution, the logit
        lens anywhere (`project_on_vocab`) and `top_tokens`. The lens is checked on the last
        block's ``layer_output``, or where the text model combines more after its last block
        (``last_block_is_read_out``), on what the final norm is called with."""
        args, kwargs = self.order_input(model)
        with model.trace(*args, **kwargs):
            last = (model.layers[-1].layer_output if self.last_block_is_read_out else model.norm.input).save()
            uncapped = model.uncapped_logits.save()
            logits = model.logits.save()
            returned = model.output.logits.save()
        assert torch.equal(logits, returned), "logits are not what the model returns"
        expected = returned[0, -1].float().softmax(-1)
        torch.testing.assert_close(analysis.next_token_probs(model, *args, **kwargs).reshape(-1), expected)
        refused = refused_lens(model)
        if refused is not None:  # the family refuses the lens, by name, before anything runs
            with refused_before_running(model, re.escape(refused)):
                analysis.project_on_vocab(model, last[0, -1])
            return
        lens = analysis.project_on_vocab(model, last[0, -1])
        torch.testing.assert_close(lens.float().softmax(-1), expected, atol=1e-4, rtol=1e-3)
        (token, probability), = analysis.top_tokens(model, lens, k=1)
        assert abs(probability - float(expected.max().detach())) < 1e-3
        config = model._module.config.get_text_config()
        cap, scale = getattr(config, "final_logit_softcapping", None), getattr(config, "logit_scale", None)
        if torch.equal(uncapped, logits):
            return
        readout = declared(model)
        after = isinstance(readout, Readout) and readout.after is not None  # the family's declared transform
        assert cap or scale or after, ("the logits differ from lm_head's output on a model with no logit scale, final "
                                       "softcap or declared Readout.after")
        torch.testing.assert_close(logits, as_returned(model, uncapped))

    # -- invokes -----------------------------------------------------------------

    def two_invokes(self, model: Any) -> list[tuple[tuple, dict]]:
        """Two invokes of different lengths, the first padded: text prompts here."""
        prompt = self.text_prompt(model)
        if isinstance(prompt, dict):
            pytest.skip("this family's processor takes no prompt without an image (VisionConformance's invokes carry images)")
        longer = prompt + " The capital of France is Paris." if model.processor is None else self.text_prompt(
            model, "The quick brown fox jumps over the lazy dog. The capital of France is Paris.")
        return [((prompt,), {}), ((longer,), {})]

    def test_values_not_laid_out_along_the_batch_are_cut_per_invoke(self, model):
        """Every value nnsight cannot narrow (a routed MLP's tokens, the features at the
        scatter, a cross-attention model's states) is cut to each invoke's rows, on every
        load: an edit in one invoke leaves the other's logits as they were."""
        first, second = self.two_invokes(model)
        cut = [(envoy, name) for envoy, name in _near_ends(model)
               if envoy.why_unavailable(name) is None and getattr(type(envoy), name).layout_on(envoy) not in ("batch", "tower", "whole")]
        if not cut:
            pytest.skip("this family serves no value laid out otherwise than along the batch on these prompts")
        with model.trace() as tracer:
            with tracer.invoke(*first[0], **first[1]):
                pass
            with tracer.invoke(*second[0], **second[1]):
                clean = model.logits.save()
        for envoy, name in cut:
            parts: list = []
            axis = 1 if getattr(type(envoy), name).layout_on(envoy) == "streams" else 0  # [streams, batch, ...]
            with model.trace() as tracer:
                with tracer.invoke(*first[0], **first[1]):
                    served = getattr(envoy, name)
                    parts.append(_rows(served, axis))
                    if envoy.why_read_only(name) is None:
                        setattr(envoy, name, _zeroed(served))
                with tracer.invoke(*second[0], **second[1]):
                    parts.append(_rows(getattr(envoy, name), axis))
                    other = model.logits.save()
            with model.trace() as tracer:
                with tracer.invoke(*first[0], **first[1]):
                    pass
                with tracer.invoke(*second[0], **second[1]):
                    alone = _rows(getattr(envoy, name), axis)
                    parts.append(alone)
            label = envoy.label(name)
            assert parts[1] == parts[2] and parts[0] > 0, f"{label}: the second invoke's part is not its own rows"
            torch.testing.assert_close(other, clean, msg=lambda m: f"an edit of {label} in one invoke moved the other's logits: {m}")

    # -- sizes -------------------------------------------------------------------

    def test_root_sizes_are_what_the_blocks_agree_on(self, model):
        """``model.num_heads``, ``head_dim``, ``qk_head_dim``, ``intermediate_size``, ...
        are what every block that has the part agrees on, read off the modules, or
        `Unavailable` where the blocks differ; the tower's likewise."""
        roots = [(model, model.layers)]
        vision = model.__dict__.get("vision")
        if vision is not None and vision.no_images() is None and "layers" in vision.__dict__:
            roots.append((vision, vision.layers))
        for root, blocks in roots:
            for part, names in (("self_attn", ("num_heads", "num_kv_heads", "head_dim", "qk_head_dim")),
                                ("mlp", ("intermediate_size",))):
                for name in names:
                    if root is vision and name == "num_kv_heads":
                        continue
                    sizes = set()
                    for block in blocks:
                        envoy = block.__dict__.get(part)
                        if envoy is not None:
                            try:
                                sizes.add(getattr(envoy, name))
                            except Unavailable:
                                pass
                    if len(sizes) > 1:
                        with pytest.raises(Unavailable, match="differ"):
                            getattr(root, name)
                    elif sizes:
                        assert getattr(root, name) == sizes.pop(), f"{root.place.label or 'model'}.{name}"

    def test_queries_and_keys_are_qk_head_dim_wide(self, model):
        """Every attention, text and tower, serves ``qk_head_dim``: the width of its
        queries and keys."""
        block = attention_blocks(model)[-1]
        with model.trace(self.text_prompt(model)):
            queries = block.self_attn.attention_queries.save()
            keys = block.self_attn.attention_keys.save()
        assert queries.shape[-1] == keys.shape[-1] == block.self_attn.qk_head_dim
        vision = model.__dict__.get("vision")
        if vision is not None and vision.no_images() is None and "layers" in vision.__dict__:
            for tower_block in attention_blocks(vision):
                assert tower_block.self_attn.qk_head_dim == tower_block.self_attn.head_dim

    # -- modules called several times --------------------------------------------

    def test_a_module_called_several_times_serves_every_call(self, model):
        """A standard module the forward calls more than once (a projector run once per
        crop) serves every call, in order, or refuses: its ``output`` is never only the
        first call's without a word."""
        from ...core.serving.calls import call_of

        args, kwargs = self.order_input(model)
        counts = _calls(model, args, kwargs)
        for envoy, calls in counts.items():
            if calls < 2:
                continue
            if call_of(envoy) is not None and calls == call_of(envoy).passes:  # a looped block's: a call an entry
                self._each_call_its_own(model, envoy, calls, args, kwargs)
                continue
            served = getattr(type(envoy), "output", None)
            assert isinstance(served, value) and served.at.calls is not None, (
                f"{envoy.path} runs {calls} times in one forward and serves only its first call: declare it "
                f"per call (vlreg.plugin.PerCall)"
            )
            with model.trace(*args, **kwargs):
                outputs = envoy.output.save()
            assert isinstance(outputs, list) and len(outputs) == calls, envoy.path

    def _each_call_its_own(self, model: Any, envoy: Any, calls: int, args: tuple, kwargs: dict) -> None:
        """The envoys of a looped block's calls (`vlreg.core.envoys.blocks`) over ``envoy``'s
        module: one per call, each reading its own call's output."""
        from ...core.envoys.tree import entered

        module = envoy._module
        each = [visit.envoy for visit in entered(model) if visit.envoy._module is module]
        assert sorted(one.pass_index for one in each) == list(range(calls)), envoy.path
        outputs: list = []
        served: list = []
        hook = module.register_forward_hook(lambda _, inputs, output: outputs.append(output))
        try:
            with model.trace(*args, **kwargs):
                for one in each:
                    served.append(one.output.save())
        finally:
            hook.remove()
        for one, output in zip(served, outputs):
            torch.testing.assert_close(_first(one), _first(output))

    # -- slips -------------------------------------------------------------------

    def test_a_prompt_that_ends_its_turn_warns_at_position_minus_1(self, model):
        """A helper reading position -1 of a prompt made without
        ``add_generation_prompt=True`` reads the turn's end: it warns, naming the fix."""
        from ...analysis.tokens import _turn_end

        if _turn_end(model) is None:
            pytest.skip("this checkpoint's chat template writes nothing after a turn (or it has none)")
        ended = self.text_prompt(model, generation=False)
        with pytest.warns(UserWarning, match="add_generation_prompt=True"):
            analysis.next_token_probs(model, ended)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            analysis.next_token_probs(model, self.text_prompt(model))


def _length(model: Any, prompt: Any) -> int:
    """How many positions the blocks (``layers``) compute at a generation's first step: the
    prompt's, or on an encoder-decoder the decoder's start token alone."""
    if model.__dict__.get("encoder") is not None:
        return 1
    if isinstance(prompt, dict):
        return int(prompt["input_ids"].shape[-1])
    with model.trace(prompt):
        ids = model.input_ids.save()
    return int(ids.shape[-1])


def _rows(served: Any, axis: int = 0) -> int:
    tensors = served if isinstance(served, (list, tuple)) else [served]
    return sum(int(tensor.shape[axis]) for tensor in tensors)


def _zeroed(served: Any) -> Any:
    if isinstance(served, (list, tuple)):
        return [torch.zeros_like(tensor) for tensor in served]
    return torch.zeros_like(served)


def _near_ends(model: Any) -> list:
    """The served values of the root, the tower and the first block of each stack that
    has values cut per invoke."""
    chosen, blocks = [], {}
    for envoy, name in written(model):
        layout = getattr(type(envoy), name).layout_on(envoy)
        if envoy.block_index is None:
            chosen.append((envoy, name))
        elif layout not in ("batch", "tower"):
            key = envoy.place.tower is not None
            blocks.setdefault(key, envoy.block_index)
            if blocks[key] == envoy.block_index:
                chosen.append((envoy, name))
    return chosen


def _first(output: Any) -> Any:
    return output[0] if isinstance(output, tuple) else output


def _calls(model: Any, args: tuple, kwargs: dict) -> dict:
    """How many times one forward of the input calls each standard envoy's module."""
    from ...core.envoys.tree import tree

    envoys = {id(envoy._module): envoy for envoy in (visit.envoy for visit in tree(model)) if envoy is not model}
    for name in ("projector", "embed_tokens", "norm", "lm_head"):
        envoy = model.__dict__.get(name)
        if envoy is not None:
            envoys.setdefault(id(envoy._module), envoy)
    counts: collections.Counter = collections.Counter()
    hooks = [envoy._module.register_forward_hook(lambda module, i, o, key=key: counts.update([key]))
             for key, envoy in envoys.items()]
    try:
        with model.trace(*args, **kwargs):
            pass
    finally:
        for hook in hooks:
            hook.remove()
    return {envoys[key]: count for key, count in counts.items()}
