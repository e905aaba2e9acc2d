"""Testing support for vlreg and its plugins: checkpoints built on disk (a family's own
builders, or `small_copy` of any checkpoint folder), plugins registered for a test, and
the conformance suite (`vlreg.testing.conformance`)."""

from .checkpoints import CORPUS, build, builders, forget, from_source, reduce_depth, save, shared_checkpoint, tokenizer
from .plugins import registered
from .shrink import shrink, small_copy

__all__ = [
    "CORPUS",
    "build",
    "builders",
    "forget",
    "from_source",
    "reduce_depth",
    "registered",
    "save",
    "shared_checkpoint",
    "shrink",
    "small_copy",
    "tokenizer",
]
