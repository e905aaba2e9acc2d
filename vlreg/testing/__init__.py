"""Testing support for vlreg and its plugins: checkpoints built on disk."""

from .checkpoints import CORPUS, build, builders, reduce_depth, shared_checkpoint, tokenizer

__all__ = ["CORPUS", "build", "builders", "reduce_depth", "shared_checkpoint", "tokenizer"]
