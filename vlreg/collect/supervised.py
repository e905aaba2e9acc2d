"""A store for supervised work: rows that carry where they came from, the index as a
table, and labels joined by image name.

A probe trains on a value's rows and a label per row; the labels are usually per image
(a class, a caption's attribute) or per region. `Store.examples` yields `Examples`:
the rows with their row numbers and their index entries (image, token, box, prompt),
so a per-token label can be computed from the box; `Store.labels` spreads per-image
labels over each image's rows. `Index.table` is the index as a pandas DataFrame (one row
per store row), `Index.dataset` as a Hugging Face ``datasets.Dataset``; both need pandas
(``pip install 'vlreg[datasets]'``).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import torch
from attrs import frozen


@frozen
class Examples:
    """A batch of rows and where each came from: ``x`` ``[n, width]``, ``rows`` (their row
    numbers in the store), ``token`` ``[n]``, ``box`` ``[n, 4]`` (NaN where a row covers no
    pixels), ``image`` and ``prompt`` (each row's image name and prompt id), and
    ``labels`` (each row's label, where labels were given: a tensor if they are numbers)."""

    x: torch.Tensor
    rows: torch.Tensor
    token: torch.Tensor
    box: torch.Tensor
    image: list
    prompt: list
    labels: Any = None


def per_row(store: Any, labels: Any, missing: Any = "refuse") -> Any:
    """``labels`` (a mapping of image name to label, or a pandas Series indexed by image
    name, or a DataFrame with an ``image`` column and one other) as one label per row of
    the store: a tensor where the labels are numbers, else a list. An image without a
    label is refused, naming it, unless ``missing`` is the value to give its rows."""
    labels = _mapping(labels)
    names = store.images
    absent = [name for name in names if name not in labels]
    if absent and isinstance(missing, str) and missing == "refuse":
        raise KeyError(f"{len(absent)} of the store's {len(names)} images have no label (first: {absent[0]!r}): label "
                       "them, or pass missing= the value their rows take (e.g. float('nan'))")
    values = [labels.get(name, missing) for name in names]
    ids = store.index.image_id
    if all(isinstance(v, (int, float, bool)) and not isinstance(v, str) for v in values):
        return torch.tensor(values)[ids]
    return [values[i] for i in ids.tolist()]


def _mapping(labels: Any) -> Mapping:
    if isinstance(labels, Mapping):
        return labels
    columns = getattr(labels, "columns", None)
    if columns is not None:  # a DataFrame: its image column and one other
        others = [c for c in columns if c != "image"]
        if "image" not in columns or len(others) != 1:
            raise ValueError(f"a DataFrame of labels has an 'image' column and one label column, not {list(columns)}")
        return dict(zip(labels["image"], labels[others[0]]))
    if hasattr(labels, "to_dict"):  # a Series indexed by image name
        return labels.to_dict()
    raise TypeError(f"labels are a mapping of image name to label, a pandas Series or a DataFrame, not "
                    f"{type(labels).__name__}")


def examples(store: Any, name: str, size: int, *, shuffle: bool = False, seed: int = 0,
             labels: Any = None) -> Iterator[Examples]:
    """``name``'s rows ``size`` at a time, in the order `Store.batches` gives them (the same
    seed, the same rows), each batch with its rows' index entries and labels."""
    column, index = store[name], store.index
    joined = None if labels is None else per_row(store, labels)
    names, prompts = store.images, store.image_prompts
    order = (torch.randperm(len(column), generator=torch.Generator().manual_seed(seed)) if shuffle
             else torch.arange(len(column)))
    for start in range(0, len(order), size):
        rows = order[start : start + size]
        ids = index.image_id[rows].tolist()
        chosen = None if joined is None else (joined[rows] if isinstance(joined, torch.Tensor)
                                              else [joined[r] for r in rows.tolist()])
        x = column[start : start + len(rows)] if not shuffle else column[rows]
        yield Examples(x, rows, index.token[rows], index.box[rows], [names[i] for i in ids], [prompts[i] for i in ids],
                       chosen)


def table(index: Any) -> Any:
    """The index as a pandas DataFrame: ``row``, ``image``, ``token``, ``x0``, ``y0``,
    ``x1``, ``y1``, ``prompt`` (the prompt's id; `Store.prompts` has its text), and
    ``first_frame``, ``last_frame`` (a video's row's frames; -1 elsewhere)."""
    try:
        import pandas
    except ImportError:
        raise ImportError("the index as a table needs pandas: pip install 'vlreg[datasets]'") from None
    box = index.box.double().numpy()
    return pandas.DataFrame({"row": range(len(index)), "image": index.image, "token": index.token.numpy(),
                             "x0": box[:, 0], "y0": box[:, 1], "x1": box[:, 2], "y1": box[:, 3],
                             "prompt": index.prompt, "first_frame": index.frame[:, 0].numpy(),
                             "last_frame": index.frame[:, 1].numpy()})


def dataset(index: Any) -> Any:
    """The index as a Hugging Face ``datasets.Dataset`` (`table`'s columns)."""
    try:
        import datasets
    except ImportError:
        raise ImportError("the index as a dataset needs datasets: pip install 'vlreg[datasets]'") from None
    return datasets.Dataset.from_pandas(table(index), preserve_index=False)
