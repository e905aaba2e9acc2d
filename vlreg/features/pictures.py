"""The feature browser's pictures in docs/images: the toy's site (its shipped dictionary,
`vlreg.testing.dictionary`, over the held-out scenes docs/features.md collects), as
headless Chromium shows it. ``python -m vlreg.features.pictures docs/images`` draws them;
tests/test_features_guide.py draws them again and compares.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

#: The docs' scenes: as many, and the seed, as docs/features.md saves.
SCENES, SEED = 300, 7
PICTURES = ("features-index.png", "features-feature.png")


def toy_site(work: "str | os.PathLike", store: "str | os.PathLike | None" = None,
             scenes: "str | os.PathLike | None" = None) -> Path:
    """The toy's site in ``work/site``, from ``store`` and ``scenes`` (the docs' store and
    scenes folder), or both made in ``work`` as the docs make them."""
    import datasets

    from ..collect import collect
    from ..testing import dictionary, scenes as toy_scenes, toy
    from . import build

    work = Path(work)
    model = None
    if scenes is None:
        scenes = toy_scenes.save(work / "scenes", SCENES, SEED)
    images = datasets.load_from_disk(str(scenes))
    if store is None:
        model = dictionary.load_model()
        store = work / "acts"
        collect(model, [dictionary.RECIPE["site"]], images, store, prompt_column="prompt", key_column="name",
                batch=50, progress=False)
    return build(store, work / "site", images, dictionary=dictionary.build(), key_column="name",
                 model=model or str(toy.build()), title="The toy's shipped dictionary", progress=False)


def draw(out: "str | os.PathLike", site: "str | os.PathLike") -> list[Path]:
    """`PICTURES` of ``site``: its index, and the page of its feature of the largest activation."""
    from .browser import Chromium

    site, out = Path(site).resolve(), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    features = json.loads((site / "data.json").read_text())["features"]
    strongest = max((f for f in features if f["page"]), key=lambda f: (f["max"], -f["id"]))
    drawn = []
    with Chromium(height=1400) as browser:
        for name, page in zip(PICTURES, ("index.html", strongest["page"])):
            drawn.append(browser.open((site / page).as_uri()).screenshot(out / name))
    return drawn


def main(argv: "list[str] | None" = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m vlreg.features.pictures OUT (e.g. docs/images)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="vlreg-features-") as work:
        for path in draw(argv[0], toy_site(work)):
            print(f"drew {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
