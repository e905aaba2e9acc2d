"""How a standard value is served in a trace: the value descriptors (`values`), the run
state and each invoke's part of a batch (`batching`), how vlreg's objects travel in a
remote request (`reference`), and the gradients of served values (`gradients`, served by
`backward`, installed here so every load serves them). The bottom layer of the core: it
imports nothing above it."""

from . import backward  # noqa: F401  (installs .grad on served values in nnsight's backward)
