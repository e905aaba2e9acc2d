"""vlreg-timm: the timm towers transformers hosts in ``TimmWrapperModel``, and the families
built on them, declared against `vlreg.plugin`.

* the tower (`vision`): the vision part whose config is a ``timm_wrapper``, served by its
  timm model's layout: a ViT's blocks (Perception LM's Perception Encoder) under
  ``vision.layers``, a convolutional model's (FastViT's) edges only; published to other
  plugins as the adapter ``"timm_tower"``, for a family whose tower wraps a timm model under
  a config of its own;
* the wrappers (`wrappers`): ``perception_lm`` (PerceptionLMForConditionalGeneration: tiles
  and a thumbnail, 2 x 2 patches pooled a token; a video's frames through the same tower, written
  at the second scatter) and ``fast_vlm``
  (FastVlmForConditionalGeneration: a token per cell of FastViT's last grid; FastViT's blocks
  refused by name). Their text models (Llama, Qwen2) are vlreg-llava's claims.

`geometry` lays each image's tokens over its pixels; `checkpoints` builds tiny checkpoints
for tests. timm is this plugin's dependency only.
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Tower, Wrapper

from . import vision, wrappers
from .geometry import fast_vlm_grids, perception_lm_grids, perception_lm_video_grids


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("perception_lm", entry=VIDEO_SCATTER, image_grids=lambda part: perception_lm_grids(part.config),
            video_grids=lambda part: perception_lm_video_grids(part.config)),
    Wrapper("fast_vlm", image_grids=lambda part: fast_vlm_grids, refuses=wrappers.REFUSES["fast_vlm"]),
    Tower("timm_wrapper", rename=vision.RENAME, envoys=vision.envoys),
    adapters={"timm_tower": vision.TIMM_TOWER},
    checkpoints=builders,
)
