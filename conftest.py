"""vlreg's tests share the fixtures and hooks a family plugin's tests load the same way
(`vlreg.testing.pytest_plugin`). The suite's header names the stack it ran on, so a CI log
says which transformers (the range in pyproject.toml lets pip take any release from the
floor to the newest tested)."""

from importlib.metadata import version

pytest_plugins = ["vlreg.testing.pytest_plugin"]


def pytest_report_header(config):
    stack = ", ".join(f"{name} {version(name)}" for name in ("transformers", "nnsight", "torch"))
    return f"vlreg on {stack} (vlreg requires {_requirement()})"


def _requirement() -> str:
    from importlib.metadata import requires

    return next(r for r in requires("vlreg") if r.startswith("transformers"))
