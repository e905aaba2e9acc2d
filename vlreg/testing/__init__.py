"""Testing support for vlreg and its plugins: checkpoints built on disk (a family's own
builders, from the tiny widths here, or `small_copy` of any checkpoint folder), plugins
registered for a test (`registered`, `Forwarding`), `load` and `chat` (a model and a
prompt, as every test needs them), the conformance suite (`vlreg.testing.conformance`) and
the pytest plugin that gives tests their ``model`` (`vlreg.testing.pytest_plugin`).

A public surface for plugins, as `vlreg.plugin` is: a family's builders and tests use
what this package exports and the conformance suite's mixins, and nothing else of vlreg."""

from .checkpoints import (CORPUS, TINY_LATENT_MOE, TINY_TEXT, TINY_VISION, build, builders, family_builders, forget, from_source, reduce_depth, save,
                          shared_checkpoint, tokenizer)
from .kit import QUESTION, chat, load
from .plugins import Forwarding, registered
from .recipes import chat_template, tiny
from .shrink import shrink, small_copy

__all__ = [
    "CORPUS",
    "Forwarding",
    "QUESTION",
    "TINY_TEXT",
    "TINY_LATENT_MOE",
    "TINY_VISION",
    "build",
    "builders",
    "chat",
    "chat_template",
    "family_builders",
    "forget",
    "from_source",
    "load",
    "reduce_depth",
    "registered",
    "save",
    "shared_checkpoint",
    "shrink",
    "small_copy",
    "tiny",
    "tokenizer",
]
