"""The suite's header names the stack it ran on, so a CI log says which transformers (the
range in pyproject.toml lets pip take any release from the floor to the newest tested)."""

from importlib.metadata import version


def pytest_report_header(config):
    stack = ", ".join(f"{name} {version(name)}" for name in ("transformers", "nnsight", "torch"))
    return f"vlreg on {stack} (vlreg requires {_requirement()})"


def _requirement() -> str:
    from importlib.metadata import requires

    return next(r for r in requires("vlreg") if r.startswith("transformers"))
