"""The two errors a vlreg user meets by name."""

from __future__ import annotations


class Unavailable(Exception):
    """This load cannot serve the value that was read.

    The message is one sentence of why and what would help ("load with
    attn_implementation='eager'"). Raised at the read, before the model is asked for
    anything, so a trace that reads an unavailable value changes nothing.

    Deliberately not an `AttributeError`: a property that raises one is taken for a
    missing attribute and resurfaces as "has no attribute", hiding the reason.
    """


class NoFamily(LookupError):
    """No installed plugin serves (part of) this checkpoint's config.

    Raised before any weight is read, naming the model_type that is unclaimed, the
    families that are installed, and what to install.
    """
