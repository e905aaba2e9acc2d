"""The errors a vlreg user meets by name."""

from __future__ import annotations

from nnsight.intervention.interleaver import OutOfOrderError


class Unavailable(Exception):
    """This load cannot serve the value that was read.

    The message is one sentence of why and what would help ("load with
    attn_implementation='eager'"). Raised at the read, before the model is asked for
    anything, so a trace that reads an unavailable value changes nothing.

    Deliberately not an `AttributeError`: a property that raises one is taken for a
    missing attribute and resurfaces as "has no attribute", hiding the reason.
    """


class ReadOnly(Unavailable):
    """The value can be read here, but a write to it would not reach the model.

    Raised by an assignment, and by an in-place edit of the tensor the value served
    inside a trace, before anything is handed to the model. The message names what to
    edit instead ("edit vision.layers[-1].layer_output, the stream the projector reads").
    """


class OutOfOrder(OutOfOrderError):
    """A standard value was read after the forward had passed the place it is made.

    nnsight serves values in the order the forward computes them; this names the
    value, the one read before it, and that order in vlreg's names. A subclass of
    nnsight's `OutOfOrderError`, so code that catches that still does.
    """


class NoFamily(LookupError):
    """No installed plugin serves (part of) this checkpoint's config.

    Raised before any weight is read, naming the model_type that is unclaimed, the
    families that are installed, and what to install (or enable).
    """


class LocalOnly(Exception):
    """A trace sent to a server (``remote=True``, a host, or ``"local"``) names something
    only this process can serve.

    Raised while nnsight serializes the request, before anything is sent, naming what
    to do instead (make it on the server: in the remote trace itself, or in a
    ``model.session(remote=...)``).
    """
