"""How a standard value is served in a trace: the value descriptors (`values`), the run
state and each invoke's part of a batch (`batching`), and how vlreg's objects travel in a
remote request (`reference`). The bottom layer of the core: it imports nothing above it."""
