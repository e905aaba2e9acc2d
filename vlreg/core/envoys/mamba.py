"""`Mamba`: a block's sequence mixer that is a Mamba-2 selective state space (SSD).

Hybrid models (NemotronH, and the Bamba/Jamba line) mix such blocks with attention ones;
the mixer is ``layers[i].mamba``, and ``support()`` names the blocks that have one. In
the state-space duality a Mamba-2 head is a linear attention whose state decays: with
its step ``dt`` (``time_steps``) and ``A = -exp(A_log)``, each head keeps a
``[head_dim, state_size]`` state ``h``,

    h_t = exp(dt_t * A) * h_{t-1} + dt_t * x_t B_t^T,    y_t = h_t C_t + D * x_t,

so ``C`` plays the queries, ``B`` the keys and ``x`` the values (each group of ``B`` and
``C`` is shared by ``num_heads / num_groups`` heads). The values are read where the
torch path computes them (a kernel installed in place of a function is called at the
same place with the same arguments), in the shapes those calls take and return:

* ``conv_output`` ``[batch, seq, conv_dim]``: the short causal convolution's output after
  its activation, ``x``, ``B`` and ``C`` side by side (a view of the call's
  ``[batch, conv_dim, seq]``);
* ``attention_values`` (``x``) ``[batch, seq, num_heads, head_dim]``, ``attention_keys``
  (``B``) and ``attention_queries`` (``C``) ``[batch, seq, num_groups, state_size]``: what
  the chunked scan takes;
* ``time_steps`` ``[batch, seq, num_heads]``: each token's step ``dt``, after the bias,
  softplus and clamp the torch scan applies to its input, and ``decays`` (the same shape):
  ``dt * A``, the per-token decay in log space (the state is multiplied by ``exp(decay)``
  before each write). Both are formed inside the torch scan, so they are refused where a
  kernel (``mamba_ssm``, or the hub's under ``use_kernels``) runs it;
* ``attention_head_outputs`` ``[batch, seq, num_heads, head_dim]``: the scan's ``y``,
  with the ``D`` skip added, before the gate;
* ``state_output`` ``[batch, num_heads, head_dim, state_size]``: the state after the
  prompt. Read-only: nothing in the forward reads it (it reaches a generation's later
  steps through the cache); ``None`` when the model runs without a cache;
* ``gates`` ``[batch, seq, num_heads * head_dim]``: ``z``, which the gated norm multiplies
  ``y`` by (``silu(z)``) before its group RMS norm;
* ``attention_output``: what the mixer adds to the stream (the name every mixer shares).

All but ``gates`` and ``attention_output`` are the prefill's: a generation's later steps
run each token through the recurrent update (another call, with the convolution's own
update), so they are refused there (`Mamba.refuses`), unless the generation runs without a
cache (``use_cache=False``), which runs the scan over the whole sequence at every step.
In training mode a fused kernel, where one is installed, runs the whole mixer as one
call, so the values are refused there.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

from ..serving.refusals import prefill_only, read_only
from ..serving.values import argument, returned, value
from .standard import Standard
from .text import _size


def _call(mixer: Any, name: str) -> str:
    return f"{mixer.path}.source.{getattr(mixer, name)}"


def _kernels(mixer: Any) -> bool:
    """Whether transformers runs the mixer's functions as kernels: ``mamba_ssm``'s where it
    is installed, the hub's where the model was loaded with ``use_kernels``."""
    return importlib.util.find_spec("mamba_ssm") is not None or bool(getattr(mixer.root._module, "use_kernels", False))


def _fused(mixer: Any) -> str | None:
    """In training mode with a fused kernel at hand the whole mixer is one call; the torch
    path computes every value."""
    if not (mixer._module.training and _kernels(mixer)):
        return None
    return (
        "the mixer is in training mode with a fused Mamba kernel installed, which computes it in one "
        "call that exposes nothing; call model.eval()"
    )


def _kernel(mixer: Any) -> str | None:
    if not _kernels(mixer):
        return None
    return (
        "the scan runs as a kernel (mamba_ssm is installed, or the model uses the hub's kernels), which "
        "forms the steps and decays inside; without it transformers runs the torch scan, which serves them"
    )


def _inside_scan(operation: str) -> Any:
    """The location of ``operation`` in the torch scan, reached through the calls between
    the mixer's call and it (known only when the call is made, so drilled in the trace)."""

    def locate(mixer: Any) -> str:
        drilled = getattr(mixer.source, mixer.scan).source
        for call in mixer.scan_through:
            drilled = getattr(drilled, call).source
        return f"{drilled.prefix}.{operation}"

    return locate


def _state_is_read_nowhere(mixer: Any) -> str:
    return (
        "no part of the forward reads the state after the prompt (it reaches a generation's later "
        "steps through the cache); to change what the mixer computes, edit attention_values, "
        "attention_keys, attention_queries, time_steps or decays"
    )


#: What a cached generation's later steps run instead of the prefill's calls.
PREFILL = prefill_only("the mixer's recurrent update", "the convolution and chunked scan", "the scan")


def _scan_input(index: int, description: str) -> value:
    # Views of one split: torch refuses in-place edits of them, so served as copies written back.
    return argument(index, lambda m: f"{_call(m, 'scan')}.input", copy=True, description=description)


class Mamba(Standard):
    """A Mamba-2 mixer (``mamba``). ``conv`` and ``scan`` are nnsight's names for its calls
    to the causal convolution and to the chunked scan in the module's forward;
    ``scan_through`` names the calls from there to the torch scan (transformers' wrapper
    that picks a kernel or the torch function)."""

    sourced = True
    conv: ClassVar[str] = "causal_conv1d_fn_0"
    scan: ClassVar[str] = "mamba2_chunk_scan_0"
    scan_through: ClassVar[tuple[str, ...]] = ("implementation_0",)
    order = ("conv_output", "attention_values", "attention_keys", "attention_queries", "time_steps", "decays",
             "attention_head_outputs", "state_output", "gates", "attention_output")

    conv_output = value(
        lambda m: f"{_call(m, 'conv')}.output",
        description="the causal convolution's output after its activation (x, B and C side by side), [batch, seq, conv_dim]",
    )(lambda m, raw: raw.transpose(1, 2)).writes(lambda m, raw, new: new.transpose(1, 2))
    attention_values = _scan_input(0, "x, what each head writes into its state, [batch, seq, heads, head_dim]")
    attention_keys = _scan_input(3, "B, where each token writes in the state, [batch, seq, groups, state_size]")
    attention_queries = _scan_input(4, "C, what each token reads from the state, [batch, seq, groups, state_size]")
    time_steps = returned(
        _inside_scan("torch_clamp_0.output"),
        description="each token's step per head, after the bias, softplus and clamp, [batch, seq, heads]",
    )
    decays = returned(
        _inside_scan("A_0.output"),
        description="each token's decay per head in log space (step times A), [batch, seq, heads]",
    )
    attention_head_outputs = returned(
        lambda m: f"{_call(m, 'scan')}.output",
        description="the scan's output per head (D skip added), before the gate, [batch, seq, heads, head_dim]",
    )
    state_output = value(
        lambda m: f"{_call(m, 'scan')}.output",
        description="the state after the prompt, [batch, heads, head_dim, state_size]",
    )(lambda m, raw: raw[1] if isinstance(raw, tuple) else None)
    gates = argument(
        1, lambda m: f"{m.path}.norm.input", copy=True,
        description="z, whose silu gates the scan's output in the gated norm, [batch, seq, heads * head_dim]",
    )
    attention_output = returned(description="what the mixer adds to the stream")

    #: The values of the prefill's calls (the convolution and the chunked scan) are refused at
    #: a cached generation's later steps; all but the steps and decays where a fused kernel runs
    #: the mixer, those two where a kernel runs the scan; nothing reads the state it returns.
    refuses = {
        **dict.fromkeys(("conv_output", "attention_values", "attention_keys", "attention_queries",
                         "attention_head_outputs"), (_fused, PREFILL)),
        "time_steps": (_kernel, PREFILL),
        "decays": (_kernel, PREFILL),
        "state_output": (_fused, PREFILL, read_only(_state_is_read_nowhere)),
        "gates": _fused,
    }

    @property
    def num_heads(self) -> int:
        return _size(self, "num_heads", (self._module, "num_heads"))

    @property
    def head_dim(self) -> int:
        return _size(self, "head_dim", (self._module, "head_dim"))

    @property
    def num_groups(self) -> int:
        """Groups of heads that share one ``B`` and ``C``."""
        return _size(self, "num_groups", (self._module, "n_groups"))

    @property
    def state_size(self) -> int:
        return _size(self, "state_size", (self._module, "ssm_state_size"))

    @property
    def conv_dim(self) -> int:
        return _size(self, "conv_dim", (self._module, "conv_dim"))
