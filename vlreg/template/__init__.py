"""``vlreg new-plugin``: a plugin skeleton for a transformers vision-language family.

The skeleton is written from a survey of the model itself (`survey`): its config, from a
checkpoint folder (``config.json`` is enough; no weights), is cut down and built on the
meta device, and the module tree says where the text model, its blocks, the tower, the
projector and the scatter are. Parts an installed plugin already serves are left to it.
What the survey cannot know is a TODO comment in the generated files.

The skeleton is a distribution like the built-in families: ``pyproject.toml``, a package
that declares the family as one `vlreg.plugin.Plugin` and imports only `vlreg.plugin` and
`vlreg.testing` (so it keeps working across vlreg releases that keep the plugin API), a
builder of a small checkpoint (`vlreg.testing.small_copy` of the source folder), and a test
that runs the conformance suite on it (`writing`). A source with no processor borrows one
(`processor`), copied into the package, so the skeleton's tests need nothing but itself and
the source folder.

The modules import one another one way (`writing` the `survey`, which reads the tree with
`modules`, `scatter` and `tower`), never this package.
"""

from .survey import Survey, survey
from .writing import write_plugin

__all__ = ["Survey", "survey", "write_plugin"]
