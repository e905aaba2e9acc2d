"""The readout: from the last stream to the logits the model returns and samples from.

On most models the logits are ``lm_head``'s output. Some models transform it after:
Aya Vision's (from transformers 5.25) multiplies it by Cohere's ``logit_scale``;
Gemma 2 (so PaliGemma 2) and Gemma 4 checkpoints that set ``final_logit_softcapping``
return ``tanh(z / cap) * cap``, which keeps each token's rank but not its probability
(at trained-model logit sizes the top probability moves from 0.998 to 0.772); Chameleon's
forward sets the logits of its image codes to the dtype's lowest value, in place, so text
generation never emits them (the family's `vlreg_suppressed_tokens`). vlreg's ``logits``
is what the model returns, read after those steps, so ``softmax(model.logits)`` is the
model's own distribution on every family; ``uncapped_logits`` is ``lm_head``'s output,
before the cap (where the forward edits it in place, the same tensor, which the edit
reaches); `readout` applies the same steps to any stream (the logit lens).

A family whose readout is not ``lm_head(norm(stream))`` declares it (`Readout`, a
wrapper's ``readout=``): no final norm (Qwen4-Exp reads its streams out through a mixer
of its own, which its blocks' ``layer_output`` already is), a transform of ``lm_head``'s
output the rules above do not know (``after``), or a sentence: the lens refused by name.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch
from attrs import frozen

from ..errors import Unavailable
from ..serving.values import returned, value


@frozen
class Readout:
    """How a stream as a block's ``layer_output`` serves it (``[..., hidden]``) becomes the
    logits the model returns, where it is not ``lm_head(norm(stream))`` (a wrapper's
    ``readout=``; a sentence there instead refuses the logit lens by name).

    * ``norm``: the mount applied before ``lm_head`` (``"norm"``), or ``None`` where the
      text model has no final norm (the model then needs no ``norm`` mount);
    * ``after``: ``after(model, logits)``, what the forward does to ``lm_head``'s output,
      where it does more than vlreg's rules find (a logit scale, a final softcap, suppressed
      tokens); ``None``: those rules. Then ``logits`` is read where the model returns them;
    * ``before``: ``before(model, stream)``, what the forward does to the normed stream
      before ``lm_head`` (Inkling 1 divides it by ``logits_mup_width_multiplier``), applied
      where vlreg reads a stream out itself (``lm_head``'s output in the forward has had it);
    * ``lens``: a sentence refusing the logit lens by name where the logits' steps are
      declared but a stream alone does not give them (Inkling 2 attends over every stored
      group of blocks before its norm); ``None``: the lens is this readout."""

    norm: str | None = "norm"
    after: Callable[[Any, torch.Tensor], torch.Tensor] | None = None
    before: Callable[[Any, torch.Tensor], torch.Tensor] | None = None
    lens: str | None = None


#: No final norm: ``lm_head`` reads the stream as the blocks serve it.
UNNORMED = Readout(norm=None)


def declared(model: Any) -> "Readout | str | None":
    """The family's readout (`Readout`), the sentence refusing the lens, or ``None``."""
    return getattr(model.family, "readout", None)


def refused_lens(model: Any) -> str | None:
    """The sentence refusing the logit lens (a wrapper's ``readout=`` sentence, or its
    `Readout`'s ``lens``), or ``None`` where the lens is served."""
    found = declared(model)
    return found if isinstance(found, str) else getattr(found, "lens", None)


def lens_refusal(model: Any, helper: str) -> None:
    """Refuse ``helper``, which reads a stream out, where the family refuses the lens."""
    found = refused_lens(model)
    if found is not None:
        raise Unavailable(f"{helper} is unavailable: {found}")


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


def logit_scale(model: Any) -> float | None:
    """The factor the wrapper's forward multiplies ``lm_head``'s output by, or ``None``: the
    text config's ``logit_scale`` (Cohere's), where the forward reads it (Aya Vision's does
    from transformers 5.25; Command A Vision's does not)."""
    root = model._module
    scale = getattr(root.config.get_text_config(), "logit_scale", None)
    if scale is None:
        return None
    try:
        applies = "logit_scale" in inspect.getsource(type(root).forward)
    except (OSError, TypeError):  # no source to read: trust the config
        applies = True
    return float(scale) if applies else None


def unembedding(model: Any) -> torch.Tensor:
    """The readout's weight, ``[vocab_size, hidden_size]``: ``lm_head``'s, or where ``lm_head``
    is a head module around its projection (T5Gemma 2's ``out_proj``), that projection's, the
    output embeddings transformers names (``get_output_embeddings``)."""
    weight = getattr(model.lm_head._module, "weight", None)
    return weight if weight is not None else model._module.get_output_embeddings().weight


def suppressed(model: Any) -> tuple[int, ...]:
    """The ids whose logits the model's forward sets to the lowest value after ``lm_head``
    (its family's `vlreg_suppressed_tokens`), or none."""
    return model.family.suppressed_tokens


def _transformed(model: Any) -> bool:
    """Whether the forward returns other logits than ``lm_head``'s output as it left it."""
    found = declared(model)
    if isinstance(found, Readout) and found.after is not None:
        return True
    return final_softcap(model) is not None or logit_scale(model) is not None or bool(suppressed(model))


def as_returned(model: Any, logits: torch.Tensor) -> torch.Tensor:
    """``logits`` (``lm_head``'s output) as the model returns them: scaled where it scales,
    capped where it caps, the suppressed tokens' set to the lowest value (a copy; ``logits``
    is left as it is)."""
    found = declared(model)
    if isinstance(found, Readout) and found.after is not None:
        return found.after(model, logits)
    scale = logit_scale(model)
    if scale is not None:
        logits = logits * scale
    cap = final_softcap(model)
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    ids = suppressed(model)
    if ids:
        logits = logits.clone()
        logits[..., list(ids)] = torch.finfo(logits.dtype).min
    return logits


def readout(model: Any, stream: torch.Tensor) -> torch.Tensor:
    """The model's final norm, readout and final transform applied to a stream value
    (``[..., hidden_size]``) outside a trace: logits as the model would return them there.
    A model with no final norm (a post-norm stack, whose last block ends in its own norm:
    BART's decoder; a family whose `Readout` says so) reads the stream out as it is; a
    family that refuses the lens is refused here (`Unavailable`)."""
    lens_refusal(model, "the logit lens")
    found = declared(model)
    name = found.norm if isinstance(found, Readout) else "norm"
    norm = model.__dict__.get(name) if name else None
    before = found.before if isinstance(found, Readout) else None
    with torch.no_grad():
        normed = norm._module(stream) if norm is not None else stream
        return as_returned(model, model.lm_head._module(before(model, normed) if before is not None else normed))


def _returned_logits(model: Any, raw: Any) -> torch.Tensor:
    return raw.logits if hasattr(raw, "logits") else raw[0] if isinstance(raw, tuple) else raw


def _with_logits(model: Any, raw: Any, new: torch.Tensor) -> Any:
    if hasattr(raw, "logits"):
        raw["logits"] = new
        return raw
    return (new, *raw[1:]) if isinstance(raw, tuple) else new


def _logits_location(model: Any) -> str:
    if not _transformed(model):
        return f"{model.lm_head.path}.output"
    return f"{model.path}.output"


logits = value(
    _logits_location,
    # the root's whole output, narrowed to an invoke's rows by nnsight, fails on some
    # families (PaliGemma 2's): the logits are served whole and cut here instead
    layout=lambda model: "rows" if _transformed(model) else "batch",
    description="the logits the model returns and samples from (lm_head's output, after any logit scale, final "
                "softcap or suppressed tokens)",
)(_returned_logits).writes(_with_logits)

uncapped_logits = returned(
    lambda model: f"{model.lm_head.path}.output",
    description="lm_head's output, before any logit scale or final softcap (where there is none, the logits)",
)
