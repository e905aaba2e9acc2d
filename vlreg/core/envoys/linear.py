"""`LinearAttention`: a block's sequence mixer that keeps a recurrent state instead of
attending to every earlier token (a gated delta net, as in Qwen3.5's linear blocks).

Hybrid models mix such blocks with full-attention ones (``config.layer_types``): the
mixer is ``layers[i].linear_attn`` on a linear block and ``layers[i].self_attn`` on a full
one, and ``support()`` names the blocks of each kind. The values are read at the call to
the delta rule (the torch implementation transformers ships, or a kernel that replaces it
under the same call), in the shapes that call takes and returns:

* ``attention_queries``, ``attention_keys`` ``[batch, seq, key_heads, key_head_dim]`` and
  ``attention_values`` ``[batch, seq, value_heads, value_head_dim]``: after the short
  convolution, before the rule's own L2 norm of queries and keys;
* ``betas`` ``[batch, seq, value_heads]``: how strongly each token writes (a sigmoid);
* ``decays`` ``[batch, seq, value_heads]``: the per-token decay in log space (the state is
  multiplied by ``exp(decay)`` before each write);
* ``attention_head_outputs`` ``[batch, seq, value_heads, value_head_dim]``: the rule's
  output per head, before the gated norm and the output projection;
* ``state_output`` ``[batch, value_heads, key_head_dim, value_head_dim]``: the recurrent
  state after the prompt. It is read-only: nothing in the forward reads it (it reaches a
  generation's later steps through the cache); it is ``None`` when the model runs
  without a cache;
* ``attention_output``: what the mixer adds to the stream.

They are the prefill's: a generation's single-token steps run the recurrent form of the
rule, another call.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..serving.refusals import read_only
from ..serving.values import argument, returned
from .standard import Standard
from .text import _size


def _rule(mixer: Any) -> str:
    return f"{mixer.path}.source.{mixer.rule}"


def _state_is_read_nowhere(mixer: Any) -> str:
    return (
        "no part of the forward reads the state after the prompt (it reaches a generation's later "
        "steps through the cache); to change what the mixer computes, edit attention_values, betas or decays"
    )


class LinearAttention(Standard):
    """A gated-delta-net mixer (``linear_attn``). ``rule`` is nnsight's name for its call
    to the chunked delta rule in the module's forward."""

    sourced = True
    rule: ClassVar[str] = "torch_chunk_gated_delta_rule_0"
    refuses = {"state_output": read_only(_state_is_read_nowhere)}

    # Views of one split: torch refuses in-place edits of them, so they are served as
    # copies written back.
    attention_queries = argument(
        0, lambda m: f"{_rule(m)}.input", copy=True, description="queries as the rule takes them"
    )
    attention_keys = argument(1, lambda m: f"{_rule(m)}.input", copy=True, description="keys as the rule takes them")
    attention_values = argument(
        2, lambda m: f"{_rule(m)}.input", copy=True, description="values as the rule takes them"
    )
    betas = argument("beta", lambda m: f"{_rule(m)}.input", description="each token's write strength per head")
    decays = argument("g", lambda m: f"{_rule(m)}.input", description="each token's decay per head, in log space")
    attention_head_outputs = returned(
        lambda m: f"{_rule(m)}.output", description="the rule's output per head, before the gated norm"
    )
    state_output = returned(
        lambda m: f"{_rule(m)}.output", element=1,
        description="the recurrent state after the prompt",
    )
    attention_output = returned(description="what the mixer adds to the stream")

    @property
    def num_key_heads(self) -> int:
        return _size(self, "num_key_heads", (self._module, "num_k_heads"))

    @property
    def num_value_heads(self) -> int:
        return _size(self, "num_value_heads", (self._module, "num_v_heads"))

    @property
    def key_head_dim(self) -> int:
        return _size(self, "key_head_dim", (self._module, "head_k_dim"))

    @property
    def value_head_dim(self) -> int:
        return _size(self, "value_head_dim", (self._module, "head_v_dim"))
