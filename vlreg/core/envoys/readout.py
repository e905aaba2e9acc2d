"""The readout: from the last stream to the logits the model returns and samples from.

On most models the logits are ``lm_head``'s output. Some models transform it after:
Gemma 2 (so PaliGemma 2) and Gemma 4 checkpoints that set ``final_logit_softcapping``
return ``tanh(z / cap) * cap``, which keeps each token's rank but not its probability
(at trained-model logit sizes the top probability moves from 0.998 to 0.772). vlreg's
``logits`` is what the model returns, so ``softmax(model.logits)`` is the model's own
distribution on every family; ``uncapped_logits`` is ``lm_head``'s output, before the
cap; `readout` applies the same steps to any stream (the logit lens).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from ..serving.values import returned, value


def final_softcap(model: Any) -> float | None:
    """The cap the model's forward applies to ``lm_head``'s output, or ``None``: the text
    config's ``final_logit_softcapping``, where the wrapper's forward reads it (Gemma 3's
    config carries the field, and its forward ignores it)."""
    root = model._module
    cap = getattr(root.config.get_text_config(), "final_logit_softcapping", None)
    if cap is None:
        cap = getattr(root.config, "final_logit_softcapping", None)
    if cap is None:
        return None
    try:
        applies = "final_logit_softcapping" in inspect.getsource(type(root).forward)
    except (OSError, TypeError):  # no source to read: trust the config
        applies = True
    return float(cap) if applies else None


def softcap(model: Any, logits: torch.Tensor) -> torch.Tensor:
    """``logits`` (``lm_head``'s output) as the model returns them: capped where it caps."""
    cap = final_softcap(model)
    if cap is None:
        return logits
    return torch.tanh(logits / cap) * cap


def readout(model: Any, stream: torch.Tensor) -> torch.Tensor:
    """The model's final norm, readout and final transform applied to a stream value
    (``[..., hidden_size]``) outside a trace: logits as the model would return them there.
    A model with no final norm (a post-norm stack, whose last block ends in its own norm:
    BART's decoder) reads the stream out as it is."""
    norm = model.__dict__.get("norm")
    with torch.no_grad():
        return softcap(model, model.lm_head._module(norm._module(stream) if norm is not None else stream))


def _returned_logits(model: Any, raw: Any) -> torch.Tensor:
    return raw.logits if hasattr(raw, "logits") else raw[0] if isinstance(raw, tuple) else raw


def _with_logits(model: Any, raw: Any, new: torch.Tensor) -> Any:
    if hasattr(raw, "logits"):
        raw["logits"] = new
        return raw
    return (new, *raw[1:]) if isinstance(raw, tuple) else new


def _logits_location(model: Any) -> str:
    if final_softcap(model) is None:
        return f"{model.lm_head.path}.output"
    return f"{model.path}.output"


logits = value(
    _logits_location,
    # the root's whole output, narrowed to an invoke's rows by nnsight, fails on some
    # families (PaliGemma 2's): the logits are served whole and cut here instead
    layout=lambda model: "batch" if final_softcap(model) is None else "rows",
    description="the logits the model returns and samples from (lm_head's output, after any final softcap)",
)(_returned_logits).writes(_with_logits)

uncapped_logits = returned(
    lambda model: f"{model.lm_head.path}.output",
    description="lm_head's output, before any final logit softcap (where there is none, the logits)",
)
