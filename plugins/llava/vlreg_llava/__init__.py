"""vlreg-llava: LLaVA, LLaVA-NeXT and LLaVA-OneVision, declared against `vlreg.plugin`.

The plugin serves three kinds of part, each from its own module, so each adapter is in
one place and serves any wrapper whose config names its model_type:

* wrappers (`wrappers`): ``llava`` (LlavaForConditionalGeneration: llava-interleave,
  LLaVA-1.5), ``llava_next`` (LlavaNextForConditionalGeneration), ``vipllava``
  (VipLlavaForConditionalGeneration: LLaVA-1.5's layout, its projector reading several
  tower blocks, ``vision_feature_layer`` a list), ``llava_onevision``
  (LlavaOnevisionForConditionalGeneration), ``llava_next_video``
  (LlavaNextVideoForConditionalGeneration: NeXT's images) and ``video_llava``
  (VideoLlavaForConditionalGeneration: LLaVA-1.5's images on a tower of their own), the
  video lines' videos refused by name on their claims (`wrappers.REFUSES`);
* text models (`text`): ``qwen2``, ``llama``, ``mistral``;
* towers (`vision`): ``siglip_vision_model``, ``clip_vision_model``.

A ``llava`` wrapper over the ``pixtral`` tower (Pixtral-12B) gets its tower from
vlreg-mistral3, which claims it, and its geometry from that plugin's adapter
``"pixtral_image_grids"`` (`geometry`).

`checkpoints` builds small random-weight checkpoints of each shape for tests.
"""

from attrs import evolve

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper

from . import text, vision, wrappers
from .geometry import llava_image_grids, next_image_grids, next_video_grids, video_llava_video_grids


def builders():
    """The checkpoint builders, imported when a test asks for one."""
    from .checkpoints import BUILDERS

    return BUILDERS


#: What every LLaVA wrapper declares alike: the grids (which read the part's config).
IMAGES = {"image_grids": lambda part: llava_image_grids(part.config)}

plugin = Plugin(
    Wrapper(("llava", "llava_next", "vipllava"), refuses=wrappers.REFUSES["llava"], **IMAGES),
    Wrapper("llava_onevision", entry=VIDEO_SCATTER, refuses=wrappers.REFUSES["llava_onevision"],
            video_grids=lambda part: wrappers.onevision_video_grids(part.config), **IMAGES),
    Wrapper("llava_next_video", entry=VIDEO_SCATTER, refuses=wrappers.REFUSES["llava_next_video"],
            video_grids=lambda part: next_video_grids(part.config), **IMAGES),
    # Video-LLaVA's image tower is `vision`; its video tower, of the same class, `vision.video_tower`
    Wrapper("video_llava", vision="model.image_tower", entry=evolve(VIDEO_SCATTER, video_tower="model.video_tower"),
            refuses=wrappers.REFUSES["video_llava"], video_grids=lambda part: video_llava_video_grids(part.config),
            **IMAGES),
    Text(text.MODEL_TYPES, envoys=text.envoys),
    Tower(vision.SIGLIP, rename=vision.RENAME[vision.SIGLIP], envoys=vision.siglip_envoys),
    Tower(vision.CLIP, rename=vision.RENAME[vision.CLIP], envoys=vision.clip_envoys),
    adapters={"siglip": vision.SIGLIP_TOWER, "next_image_grids": next_image_grids},
    checkpoints=builders,
)
