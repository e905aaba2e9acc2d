"""vlreg-fuyu: Fuyu (``FuyuForCausalLM``), declared against `vlreg.plugin`.

Fuyu has no vision tower. Its processor cuts each image into ``patch_size`` squares of
pixels, writes a ``|SPEAKER|`` placeholder per square and a ``|NEWLINE|`` after each row,
and hands the squares over flattened, every image's in one packed row. One linear map,
``model.vision_embed_tokens``, embeds each square at the text model's width, and the
wrapper writes those rows over the placeholders with ``inputs_embeds.masked_scatter``.

* The vision part is that linear map (`vision.FuyuVision`, a `Vision` with no blocks), and
  the config it reads is the wrapper's own (``patch_size``, ``num_channels``: Fuyu's config
  has no ``vision_config``): the ``Tower("fuyu")`` claim on the wrapper's model type says
  so (`vlreg.plugin.Tower`). No module follows it, so no projector is mounted.
* The text model is Persimmon (``persimmon``, at ``model.language_model``): LayerNorm
  blocks whose attention projects queries, keys and values with one fused map, norms each
  head's queries and keys (``q_layernorm``, ``k_layernorm``) and rotates only part of each
  head; its MLP widens with ``dense_h_to_4h`` (`text`). The final norm is
  ``final_layernorm``, mounted as ``norm``.

`geometry` lays each image's tokens out; `checkpoints` builds a tiny random-weight Fuyu.
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper

from . import text, vision


def grids(part):
    from .geometry import image_grids

    return image_grids


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("fuyu", vision="model.vision_embed_tokens", projector=None,
            rename={"model.language_model.final_layernorm": "norm"}, image_grids=grids),
    Text("persimmon", rename=text.RENAME, envoys=text.envoys),
    Tower("fuyu", envoys=vision.envoys),
    checkpoints=builders,
)
