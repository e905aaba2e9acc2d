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

transformers 5.23 and 5.24 call the convolution (``causal_conv1d_fn``) and the chunked
scan (``mamba2_chunk_scan``) in the mixer's forward, and the prefill's values are read
there: a generation's later steps run each token through the recurrent update (another
call, with the convolution's own update), so all but ``gates`` and ``attention_output``
are refused there (`Mamba.refuses`), unless the generation runs without a cache
(``use_cache=False``), which runs the scan over the whole sequence at every step.
transformers 5.25 moves both into functions the forward calls at every step
(``causal_conv1d_forward``, ``mamba2_scan_forward``: the cache's update, then the chunked
or the recurrent form inside); the values are read at those calls, at every step. Those
functions are kernels layers (modules outside the model), which nnsight cannot open, so
what forms inside them (``time_steps``, ``decays``, and ``state_output``, which goes to
the cache) is refused there. `Mamba.one_call` says which layout the installed release has.
In training mode a fused kernel, where one is installed, runs the whole mixer as one
call, so the values are refused there.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, ClassVar

from ..serving.drilled import inside
from ..serving.refusals import Gate, prefill_only, read_only
from ..serving.values import argument, returned, value
from .standard import Standard
from .text import _size


def scan_in_one_call(mixer_class: type) -> bool:
    """Whether the modeling module of ``mixer_class`` runs the scan through one function that
    keeps the cache (transformers 5.25's ``mamba2_scan_forward``; `Mamba.one_call`)."""
    return hasattr(sys.modules[mixer_class.__module__], "mamba2_scan_forward")


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


def _inside_the_call(mixer: Any) -> str | None:
    if not mixer.one_call:
        return None
    return (
        "transformers runs the scan inside mamba2_scan_forward, a kernels layer outside the model that nnsight "
        "cannot open, which forms it inside; transformers 5.23 and 5.24 call the chunked scan in the mixer's "
        "forward, which serves it"
    )


def _kernel(mixer: Any) -> str | None:
    if mixer.one_call:
        return _inside_the_call(mixer)
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
        call = getattr(mixer.source, mixer.scan)
        for through in mixer.scan_through:
            call = getattr(call.source, through)
        return inside(call, operation)

    return locate


def _heads(mixer: Any, tensor: Any) -> Any:
    """``[batch, seq, heads, head_dim]`` (a view): 5.25's scan returns it flat."""
    return tensor.reshape(*tensor.shape[:2], mixer.num_heads, -1)


def _state_in_the_cache(mixer: Any) -> str | None:
    if not mixer.one_call:
        return _fused(mixer)
    return (
        "transformers runs the scan inside mamba2_scan_forward, a kernels layer outside the model that nnsight "
        "cannot open, which writes the state into the cache and returns only the output; read the state from "
        "the cache a generation returns, or use transformers 5.23 or 5.24, whose forward returns it"
    )


def _state_is_read_nowhere(mixer: Any) -> str:
    return (
        "no part of the forward reads the state after the prompt (it reaches a generation's later "
        "steps through the cache); to change what the mixer computes, edit attention_values, "
        "attention_keys, attention_queries, time_steps or decays"
    )


_LATER_STEPS = prefill_only("the mixer's recurrent update", "the convolution and chunked scan", "the scan")
#: Values of calls the prefill makes and a cached generation's later steps do not: the
#: convolution and the chunked scan, where the forward calls them itself (5.23, 5.24); not
#: where each runs through its one function at every step (5.25).
PREFILL = Gate(lambda asked: None if asked.envoy.one_call else _LATER_STEPS(asked))


def _scan_input(which: str, shape: str, description: str) -> value:
    """``which`` of the scan's inputs (``x``, ``B`` or ``C``), ``[batch, seq, *shape]``.
    Views of one split: torch refuses in-place edits of them, so served as copies written
    back; 5.25's call takes them flat (``[batch, seq, heads * head_dim]``), so the copy is
    shaped by heads (or groups) and written back flat."""

    def read(mixer: Any, raw: Any) -> Any:
        found = raw[0][mixer.scan_arguments[which]]
        return found.reshape(*found.shape[:2], getattr(mixer, shape), -1).clone()

    def rebuild(mixer: Any, raw: Any, new: Any) -> Any:
        (args, kwargs), index = raw, mixer.scan_arguments[which]
        return (*args[:index], new.reshape(args[index].shape), *args[index + 1 :]), kwargs

    served = value(lambda m: f"{_call(m, 'scan')}.input", description=description)(read)
    return served.writes(rebuild).transform(lambda mixer, view, raw: rebuild(mixer, raw, view))


class Mamba(Standard):
    """A Mamba-2 mixer (``mamba``). ``conv`` and ``scan`` are nnsight's names for its calls
    to the causal convolution and to the scan in the module's forward (`one_call` says
    which layout); ``scan_through`` names the calls from the chunked scan to the torch scan
    (transformers' wrapper that picks a kernel or the torch function)."""

    sourced = True
    scan_through: ClassVar[tuple[str, ...]] = ("implementation_0",)
    #: The prefill's values are refused at a cached generation's later steps (`PREFILL`); all
    #: but the steps and decays where a fused kernel runs the mixer, those two where a kernel
    #: runs the scan; the state where the cache takes it, and nothing reads the one it returns.
    refuses = {
        **dict.fromkeys(("conv_output", "attention_values", "attention_keys", "attention_queries",
                         "attention_head_outputs"), (_fused, PREFILL)),
        "time_steps": (_kernel, PREFILL),
        "decays": (_kernel, PREFILL),
        "state_output": (_state_in_the_cache, PREFILL, read_only(_state_is_read_nowhere)),
        "gates": _fused,
    }

    @property
    def one_call(self) -> bool:
        """Whether the forward runs the convolution and the scan each through one function
        that keeps the cache (transformers 5.25's ``causal_conv1d_forward`` and
        ``mamba2_scan_forward``), rather than calling the chunked scan itself."""
        return scan_in_one_call(type(self._module))

    @property
    def conv(self) -> str:
        return "causal_conv1d_forward_0" if self.one_call else "causal_conv1d_fn_0"

    @property
    def scan(self) -> str:
        return "mamba2_scan_forward_0" if self.one_call else "mamba2_chunk_scan_0"

    @property
    def scan_arguments(self) -> dict[str, int]:
        """Where ``x``, ``B`` and ``C`` are among the scan call's arguments."""
        return {"x": 1, "B": 2, "C": 3} if self.one_call else {"x": 0, "B": 3, "C": 4}
    order = ("conv_output", "attention_values", "attention_keys", "attention_queries", "time_steps", "decays",
             "attention_head_outputs", "state_output", "gates", "attention_output")

    conv_output = value(
        lambda m: f"{_call(m, 'conv')}.output",
        description="the causal convolution's output after its activation (x, B and C side by side), [batch, seq, conv_dim]",
    )(lambda m, raw: raw.transpose(1, 2)).writes(lambda m, raw, new: new.transpose(1, 2))
    attention_values = _scan_input("x", "num_heads", "x, what each head writes into its state, [batch, seq, heads, head_dim]")
    attention_keys = _scan_input("B", "num_groups", "B, where each token writes in the state, [batch, seq, groups, state_size]")
    attention_queries = _scan_input("C", "num_groups", "C, what each token reads from the state, [batch, seq, groups, state_size]")
    time_steps = returned(
        _inside_scan("torch_clamp_0.output"),
        description="each token's step per head, after the bias, softplus and clamp, [batch, seq, heads]",
    )
    decays = returned(
        _inside_scan("A_0.output"),
        description="each token's decay per head in log space (step times A), [batch, seq, heads]",
    )
    attention_head_outputs = value(
        lambda m: f"{_call(m, 'scan')}.output",
        description="the scan's output per head (D skip added), before the gate, [batch, seq, heads, head_dim]",
    )(lambda m, raw: _heads(m, raw[0] if isinstance(raw, tuple) else raw)).writes(
        lambda m, raw, new: (new.reshape(raw[0].shape), *raw[1:]) if isinstance(raw, tuple) else new.reshape(raw.shape)
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
