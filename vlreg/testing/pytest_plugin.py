"""vlreg's pytest plugin: the fixtures and hooks vlreg's tests and a family plugin's share.

Load it from the top ``conftest.py`` of your tests (vlreg's own does)::

    pytest_plugins = ["vlreg.testing.pytest_plugin"]

It gives:

* ``model``: a module's model, loaded once for the module by `vlreg.testing.load`. The
  module names its checkpoint, ``CHECKPOINT = "qwen2_vl"``, or several,
  ``CHECKPOINTS = ("qwen2_vl", "llava_interleave")`` (every test that takes ``model``
  then runs on each), and may set ``LOAD_OPTIONS = {"dtype": torch.bfloat16}`` (for the
  load) and ``BUILD_OPTIONS = {"num_query_tokens": 5}`` (for the builder: a checkpoint so
  built is the module's own, removed after it);
* ``loaded``: ``loaded(name, overrides, **options)``, as `vlreg.testing.load`, each model
  loaded once for the module;
* the run's seed (`vlreg.testing.sampling`), shown in the header and in a failure's report,
  so a sampled check that failed runs again on the same sample;
* the ``heavy`` mark, for a module or class of tests that take seconds each (they start
  Python processes, or build a real checkpoint's geometry): collected first, so that under
  ``pytest -n 2 --dist loadscope --no-loadscope-reorder`` (``make test``) they start first
  and the workers finish together.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from . import sampling
from .checkpoints import build, forget
from .kit import load


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "heavy: seconds a test (processes started, a real geometry built): run first")
    sampling.seed()  # drawn here, before pytest-xdist starts its workers, which inherit it


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable: heavy first, else as collected


def pytest_report_header(config: pytest.Config) -> str:
    return f"vlreg: sampled checks draw from seed {sampling.seed()} ({sampling.repeat()})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    report = yield
    if report.failed:
        report.sections.append(("vlreg", sampling.repeat()))
    return report


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = getattr(metafunc.module, "CHECKPOINTS", None)
    if names is not None and "model" in metafunc.fixturenames and not _parametrized(metafunc, "model"):
        metafunc.parametrize("model", list(names), indirect=True, scope="module")


def _parametrized(metafunc: pytest.Metafunc, name: str) -> bool:
    return any(name in marker.args[0] for marker in metafunc.definition.iter_markers("parametrize"))


@pytest.fixture(scope="module")
def model(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The module's checkpoint loaded; one built with ``BUILD_OPTIONS`` is the module's own,
    removed after it (a real geometry's runs to gigabytes)."""
    name = getattr(request, "param", None) or getattr(request.module, "CHECKPOINT", None)
    if name is None:
        raise pytest.UsageError(f"{request.module.__name__} takes `model` but names no checkpoint: set "
                                f"CHECKPOINT = '<builder name>' (or CHECKPOINTS) in the module")
    overrides = getattr(request.module, "BUILD_OPTIONS", None)
    yield load(name, overrides, **getattr(request.module, "LOAD_OPTIONS", {}))
    if overrides:
        forget(build(str(name), **overrides))


@pytest.fixture(scope="module")
def loaded() -> Callable[..., Any]:
    models: dict[str, Any] = {}

    def get(checkpoint: str, overrides: dict | None = None, **options: Any) -> Any:
        key = repr((checkpoint, sorted((overrides or {}).items()), sorted(options.items())))
        if key not in models:
            models[key] = load(checkpoint, overrides, **options)
        return models[key]

    return get
