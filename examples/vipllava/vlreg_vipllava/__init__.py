"""vlreg-vipllava-example: VipLLaVA as a third-party vlreg plugin that overrides a built-in one.

Written only against vlreg's public plugin API (`vlreg.plugin`, `vlreg.testing`), the
way a plugin from outside vlreg's repository would be: one declaration, ``plugin``, that
the ``vlreg`` entry point names (``vipllava = "vlreg_vipllava:plugin"``).

vlreg-llava serves VipLLaVA itself. This plugin claims the ``vipllava`` wrapper too, with
``overrides="llava"``: installed beside vlreg-llava, its declaration is the one a VipLLaVA
checkpoint is served by, and every other claim of both plugins stands. That is how an
outside author replaces how a built-in family serves a model type (to try another
geometry, or read-only rows, before proposing them upstream) without forking vlreg.

VipLlavaForConditionalGeneration has three parts, and this plugin claims one:

* the ``vipllava`` wrapper, transformers' composite layout (the declaration states nothing
  of it): the text model at ``model.language_model``, the CLIP tower at
  ``model.vision_tower`` and ``model.multi_modal_projector``, which takes the streams of
  several tower blocks (``vision_feature_layer``: -2, -5, -8, -11 and 6 on the real
  checkpoints), drops each one's class token, concatenates them and projects them; the
  result is written into the token embeddings by ``inputs_embeds.masked_scatter`` in
  ``VipLlavaModel.forward``;
* the ``clip_vision_model`` tower and the ``llama`` text model are not claimed:
  vlreg-llava serves both, for any wrapper whose parts have those model types.

What the projector does not read cannot be edited to any effect, so the tower's output
and every block after the last one it reads are declared read-only
(`FEATURE_LAYER_READ_ONLY`). `geometry` lays out each image's tokens over CLIP's centre
crop, written here from the processor's settings. Its tests load vlreg-llava's tiny
``vipllava`` checkpoint (`vlreg.testing.build`).
"""

from vlreg.plugin import FEATURE_LAYER_READ_ONLY, Plugin, Wrapper

from .geometry import image_grids

plugin = Plugin(
    Wrapper("vipllava", overrides="llava", refuses=FEATURE_LAYER_READ_ONLY,
            image_grids=lambda part: image_grids(part.config)),
)
