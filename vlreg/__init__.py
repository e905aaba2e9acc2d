"""vlreg: one traceable interface over vision-language model families.

    from vlreg import StandardizedTransformer
    model = StandardizedTransformer(checkpoint, task="image-text-to-text", dispatch=True)
    with model.trace(prompt, images=[image]):
        out = model.layers[1].layer_output.save()

Families are plugins (see `vlreg.plugin` and docs/writing-a-plugin.md).
"""

from .core.errors import NoFamily, OutOfOrder, ReadOnly, Unavailable
from .core.hookspecs import hookimpl
from .core.model import StandardizedTransformer

__all__ = ["StandardizedTransformer", "Unavailable", "ReadOnly", "OutOfOrder", "NoFamily", "hookimpl"]
__version__ = "0.1.0"
