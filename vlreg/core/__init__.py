"""The host and the tracing core. Plugins import from `vlreg.plugin`, not from here."""
