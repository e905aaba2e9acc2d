"""vlreg's tests share the fixtures and hooks a family plugin's tests load the same way."""

pytest_plugins = ["vlreg.testing.pytest_plugin"]
