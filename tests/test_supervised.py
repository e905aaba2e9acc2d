"""The store for supervised work (`vlreg/collect/supervised.py`): `Store.examples` gives the
rows `Store.batches` gives, each with where it came from; `Store.labels` spreads per-image
labels over the image's rows and refuses an image it has no label for; the index as a
pandas table and a ``datasets.Dataset``. On a small store of the toy's scenes."""

from __future__ import annotations

import pandas
import pytest
import torch

from vlreg.collect import collect, open_store
from vlreg.testing import toy

VALUE = "layers[0].layer_output"
CHECKPOINT = toy.build()  # the shipped toy's folder


@pytest.fixture(scope="module")
def store(model, tmp_path_factory):
    """6 scenes' image tokens (216 rows), shards of 4 images, each scene asked its own question."""
    scenes = toy.scenes(6, seed=11)
    names = [f"scene-{i}" for i in range(len(scenes))]
    prompts = dict(zip(names, (s.prompt for s in scenes)))
    folder = tmp_path_factory.mktemp("store")
    collect(model, [VALUE], dict(zip(names, (s.image for s in scenes))), folder,
            prompt=lambda record: prompts[record["image"]], batch=3, shard_images=4, progress=False)
    return open_store(folder)


@pytest.mark.parametrize("shuffle", [False, True])
def test_examples_are_the_batches_rows_with_where_each_came_from(store, shuffle):
    batches = list(store.batches(VALUE, 50, shuffle=shuffle, seed=4))
    examples = list(store.examples(VALUE, 50, shuffle=shuffle, seed=4))
    assert [len(e.x) for e in examples] == [50, 50, 50, 50, 16]
    everything = store[VALUE][:]
    for batch, found in zip(batches, examples):
        assert torch.equal(found.x, batch) and torch.equal(found.x, everything[found.rows])
        for i in range(0, len(found.rows), 7):
            record = store.index[int(found.rows[i])]
            assert (found.image[i], int(found.token[i]), tuple(found.box[i].tolist()), found.prompt[i]) == (
                record.image, record.token, record.box, record.prompt)
    assert sorted(torch.cat([e.rows for e in examples]).tolist()) == list(range(len(store)))


def test_labels_given_per_image_are_each_rows_label(store):
    numbers = {name: float(i) for i, name in enumerate(store.images)}
    per_row = store.labels(numbers)
    assert isinstance(per_row, torch.Tensor) and per_row.tolist() == [numbers[store.index[r].image] for r in range(len(store))]
    words = {name: f"class {i % 2}" for i, name in enumerate(store.images)}
    as_series, as_frame = pandas.Series(words), pandas.DataFrame({"image": list(words), "label": list(words.values())})
    assert store.labels(words) == store.labels(as_series) == store.labels(as_frame) == [
        words[image] for image in store.index.image]
    batch = next(store.examples(VALUE, 40, shuffle=True, labels=numbers))
    assert batch.labels.tolist() == [numbers[image] for image in batch.image]


def test_an_image_without_a_label_is_refused_unless_its_rows_get_a_value(store):
    some = {name: 1.0 for name in store.images[1:]}
    with pytest.raises(KeyError, match=f"1 of the store's 6 images have no label \\(first: '{store.images[0]}'\\)"):
        store.labels(some)
    filled = store.labels(some, missing=float("nan"))
    assert filled[store.index.rows(store.images[0])].isnan().all() and not filled[36:].isnan().any()
    with pytest.raises(ValueError, match="an 'image' column and one label column"):
        store.labels(pandas.DataFrame({"image": store.images, "a": 1, "b": 2}))


def test_the_index_as_a_table_and_a_dataset(store):
    table = store.index.table()
    assert table.columns.tolist() == ["row", "image", "token", "x0", "y0", "x1", "y1", "prompt", "first_frame", "last_frame"] and len(table) == len(store)
    for row in (0, 37, len(store) - 1):
        record = store.index[row]
        assert (table.image[row], int(table.token[row]), tuple(table.loc[row, ["x0", "y0", "x1", "y1"]]),
                table.prompt[row]) == (record.image, record.token, record.box, record.prompt)
    dataset = store.index.dataset()
    assert dataset.column_names == table.columns.tolist() and dataset[37]["image"] == table.image[37]
