"""Activations at dataset scale: `collect` writes values at every image of a folder, a
list or a dataset into a store; `open_store` reads it back, memory-mapped.

    from vlreg.collect import collect, open_store
    collect(model, values=["layers[0].layer_output"], images="photos/", out="acts/")
    store = open_store("acts/")
    rows = store["layers[0].layer_output"]     # [rows, width], read where indexed
    store.index[0]                             # Record(image, token, box, prompt)

The store is safetensors shards beside a manifest (`vlreg.collect.store`); a rerun adds
only the images it lacks, and under ``torchrun`` each process takes its share.
docs/collect.md has the details.
"""

from .run import Summary, collect
from .store import Column, Index, Record, Store, open_store

__all__ = ["collect", "open_store", "Store", "Column", "Index", "Record", "Summary"]
