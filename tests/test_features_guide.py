"""docs/features.md: its blocks run in order as written (the ``sh`` blocks' ``vlreg``
commands in this process, tests/doc_blocks.py), and the site its three commands make shows
the toy's shapes and colours (where sae-lens, which trains, is installed). In headless
Chromium (where it is installed), the docs' site of the toy (its shipped dictionary over
the guide's scenes) shows on each page the crops and boxes the store's index holds and
asks for nothing outside the site, and docs/images' pictures of it are what Chromium
shows now."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlreg.collect import open_store
from vlreg.features import browser, pictures
from vlreg.testing.scenes import held

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import IMAGES, in_order, mismatches, run, run_shell  # noqa: E402

pytestmark = pytest.mark.heavy  # the guide collects 300 scenes and trains: started first under make test

GUIDE = (IMAGES.parent / "features.md").read_text()
CHROMIUM = pytest.mark.skipif(browser.executable() is None,
                              reason="Chromium is not installed (apt-get install chromium): the site is not opened")
TRAINER = importlib.util.find_spec("sae_lens") is not None
NO_TRAINER = "sae-lens is not installed (pip install 'vlreg[train]'): the guide's `vlreg train` cannot run"


@pytest.fixture(scope="module")
def guide(tmp_path_factory):
    """The guide's blocks run in a scratch folder: its printed output, and the folder."""
    import os

    if not TRAINER:
        pytest.skip(NO_TRAINER)

    folder = tmp_path_factory.mktemp("guide")
    here = os.getcwd()
    os.chdir(folder)
    try:
        found, printed, namespace = [], [], {}
        for block in in_order(GUIDE):
            if isinstance(block, str):
                run_shell(block)
            else:
                found.append(block)
                printed.append(run(block, namespace, "features guide"))
    finally:
        os.chdir(here)
    return {"folder": folder, "wrong": mismatches(found, printed)}


def test_the_guides_blocks_print_what_it_shows(guide):
    assert not guide["wrong"], "\n".join(guide["wrong"]) + "\n(python tests/doc_blocks.py cannot rewrite this doc's: fix by hand)"


def _crops_held(folder: Path) -> list[tuple[int, list]]:
    import datasets

    given = datasets.load_from_disk(str(folder / "scenes"))
    shapes = dict(zip(given["name"], given["shapes"]))
    features = json.loads((folder / "site" / "data.json").read_text())["features"]
    return [(f["id"], [held(shapes[e["image"]], e["box"]) for e in f["top"]]) for f in features if f["top"]]


def test_the_toys_site_shows_its_shapes_and_colours(guide):
    """The known answer: some feature's 16 top crops across the store all lie on one shape,
    and some feature's all on one colour; each crop is the token its box says."""
    found = _crops_held(guide["folder"])
    one_shape = [f for f, on in found if len(on) == 16 and None not in on and len({s for _, s in on}) == 1]
    one_colour = [f for f, on in found if len(on) == 16 and None not in on and len({c for c, _ in on}) == 1]
    print(f"{len(found)} features fire; all 16 top crops on one shape: {one_shape}; on one colour: {one_colour}")
    assert one_shape and one_colour
    store = open_store(guide["folder"] / "acts")
    data = json.loads((guide["folder"] / "site" / "data.json").read_text())
    for feature in data["features"][:40]:
        for example in feature["top"]:
            record = store.index[example["row"]]
            assert (record.image, record.token, list(record.box)) == (example["image"], example["token"], example["box"])


@pytest.fixture(scope="module")
def toy_site(request, tmp_path_factory) -> tuple[Path, Path]:
    """The docs' pictures' site and its store: the shipped dictionary over the guide's
    store and scenes where the guide ran, else over the same scenes collected here."""
    work = tmp_path_factory.mktemp("toy-site")
    if not TRAINER:
        return pictures.toy_site(work), work / "acts"
    folder = request.getfixturevalue("guide")["folder"]
    return pictures.toy_site(work, store=folder / "acts", scenes=folder / "scenes"), folder / "acts"


def _dom(page) -> dict:
    return page.evaluate("""JSON.stringify({
        crops: Array.from(document.querySelectorAll('figure.crop')).map(f => ({
            row: +f.dataset.row, image: f.dataset.image, box: f.dataset.box,
            rect: ['x', 'y', 'width', 'height'].map(a => +f.querySelector('rect.box').getAttribute(a)),
            href: f.querySelector('image').getAttribute('href')})),
        tokens: document.querySelectorAll('svg.overlay rect.token').length,
        bars: document.querySelectorAll('svg.histogram rect').length,
        rows: document.querySelectorAll('#features tbody tr').length})""")


def _boxes_are_the_index(crops: list, store, site: Path) -> None:
    for crop in crops:
        x0, y0, x1, y1 = (float(v) for v in store.index.box[crop["row"]])
        assert store.index[crop["row"]].image == crop["image"]
        assert crop["rect"] == pytest.approx([x0, y0, x1 - x0, y1 - y0], abs=0.01)
        assert (site / crop["href"].removeprefix("../")).is_file()


@CHROMIUM
def test_in_chromium_each_feature_shows_its_crops_and_boxes_and_nothing_leaves_the_site(toy_site):
    """The index: every feature's top four crops, each box where the store's index puts
    its row; the search box. Six features' pages (a spread of them, for time): their 16
    crops in order, the overlay's 36 tokens, the histogram's bars."""
    site, store = toy_site[0].resolve(), open_store(toy_site[1])
    data = json.loads((site / "data.json").read_text())
    live = [f for f in data["features"] if f["page"]]
    with browser.Chromium(timeout=60) as chromium:
        index = chromium.open((site / "index.html").as_uri())
        shown = json.loads(_dom(index))
        assert shown["rows"] == len(live)
        assert [c["row"] for c in shown["crops"]] == [e["row"] for f in live for e in f["top"][:4]]
        _boxes_are_the_index(shown["crops"], store, site)
        index.evaluate("document.getElementById('search').value = 'feature 10'; "
                       "document.getElementById('search').dispatchEvent(new Event('input'))")
        text = [" ".join([f["name"], str(f["id"]), *(t for t, _ in f["promotes"])]).lower() for f in live]
        assert index.evaluate("document.getElementById('shown').textContent") == str(
            sum(1 for t in text if "feature" in t and "10" in t))   # every word typed, anywhere in the row's text
        requests = index.requests()
        for feature in live[:: max(1, len(live) // 6)][:6]:
            page = chromium.open((site / feature["page"]).as_uri())
            dom = json.loads(_dom(page))
            assert [c["row"] for c in dom["crops"]] == [e["row"] for e in feature["top"]]
            _boxes_are_the_index(dom["crops"], store, site)
            assert dom["tokens"] == 36 and dom["bars"] == 24
            requests += page.requests()
    outside = [url for url in requests if not url.startswith(site.as_uri() + "/")]
    assert not outside, f"the site asked for what is not in it: {outside[:5]}"
    asked = {url.removeprefix(site.as_uri() + "/") for url in requests}
    assert {"index.html", "style.css", "site.js"} <= asked and any(a.startswith("images/") for a in asked)


def unlike(expected: Path, drawn: Path, share: float = 0.01) -> str | None:
    """Why the screenshot ``drawn`` is not ``expected``, or None: the same size, and at most
    ``share`` of the pixels off by more than 48 in a channel (a browser's text rendering
    may move a few pixels between releases; a changed page moves many)."""
    with Image.open(expected) as a, Image.open(drawn) as b:
        if a.size != b.size:
            return f"{drawn} is {b.size}, {expected} is {a.size}"
        off = (np.abs(np.asarray(a.convert("RGB"), dtype=int) - np.asarray(b.convert("RGB"), dtype=int)) > 48).any(-1)
    if off.mean() > share:
        return (f"{drawn} differs from {expected} at {off.mean():.1%} of its pixels: regenerate them with "
                "`python -m vlreg.features.pictures docs/images` if the change is meant")
    return None


@CHROMIUM
def test_the_docs_pictures_are_what_chromium_shows_of_the_toys_site(toy_site, tmp_path):
    drawn = pictures.draw(tmp_path / "pictures", toy_site[0])
    assert [path.name for path in drawn] == list(pictures.PICTURES)
    for path in drawn:
        assert f"](images/{path.name})" in GUIDE
        assert not unlike(IMAGES / path.name, path), unlike(IMAGES / path.name, path)
