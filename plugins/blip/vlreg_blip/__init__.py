"""vlreg-blip: BLIP-2, InstructBLIP and InstructBLIP-Video, declared against `vlreg.plugin`.

The image reaches the text model as learned queries (`vlreg.plugin.QueryTokens`): a ViT
tower, a Q-Former whose queries cross-attend to the tower's rows, a linear projector, and
the projected queries scattered at the prompt's ``<image>`` tokens, ``num_query_tokens``
of them an image. Three kinds of part, each from its own module:

* the wrappers (`wrappers`): ``blip-2`` (Blip2ForConditionalGeneration),
  ``instructblip`` (InstructBlipForConditionalGeneration, whose Q-Former also reads the
  instruction) and ``instructblipvideo`` (InstructBlipVideoForConditionalGeneration:
  InstructBLIP on each frame of a clip, a prompt's images being its frames);
* the towers and their Q-Formers (`vision`): ``blip_2_vision_model``,
  ``instructblip_vision_model`` and ``instructblipvideo_vision_model``; the Q-Former
  (``blip_2_qformer``, ``instructblip_qformer``, ``instructblipvideo_qformer``) is a part of
  its own, the wrapper's ``qformer_config``, claimed here (`Other`);
* the OPT text model (`text`), BLIP-2's. InstructBLIP-Vicuna's Llama is vlreg-llava's.

`wrappers.image_grids` declares the query tokens' boxes (each the whole image);
`checkpoints` builds tiny checkpoints for tests.
"""

from vlreg.plugin import Other, Plugin, Text, Tower, Wrapper

from . import text, vision, wrappers


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(("blip-2", "instructblip", "instructblipvideo"), text=None, vision="vision_model",
            projector="language_projection", rename=wrappers.rename, entry=wrappers.entry, declines=wrappers.declines,
            image_grids=wrappers.image_grids, processor=wrappers.processor),
    Text("opt", rename=text.rename, envoys=text.envoys),
    Tower(("blip_2_vision_model", "instructblip_vision_model", "instructblipvideo_vision_model"), rename=vision.RENAME,
          envoys=vision.envoys),
    Other(("blip_2_qformer", "instructblip_qformer", "instructblipvideo_qformer"), field="qformer_config",
          envoys=vision.qformer_envoys),
    checkpoints=builders,
)
