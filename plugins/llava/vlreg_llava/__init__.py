"""vlreg-llava: LLaVA, LLaVA-NeXT and LLaVA-OneVision, declared against `vlreg.plugin`.

The plugin serves three kinds of part, each from its own module, so each adapter is in
one place and serves any wrapper whose config names its model_type:

* wrappers (`wrappers`): ``llava`` (LlavaForConditionalGeneration: llava-interleave,
  LLaVA-1.5), ``llava_next`` (LlavaNextForConditionalGeneration), ``llava_onevision``
  (LlavaOnevisionForConditionalGeneration), ``llava_next_video``
  (LlavaNextVideoForConditionalGeneration: NeXT's images) and ``video_llava``
  (VideoLlavaForConditionalGeneration: LLaVA-1.5's images on a tower of their own), the
  video lines' videos refused by name on their claims (`wrappers.REFUSES`);
* text models (`texts`): ``qwen2``, ``llama``, ``mistral``;
* towers (`towers`): ``siglip_vision_model``, ``clip_vision_model``.

A ``llava`` wrapper over the ``pixtral`` tower (Pixtral-12B) gets its tower from
vlreg-mistral3, which claims it, and its geometry from that plugin's adapter
``"pixtral_image_grids"`` (`geometry`).

`checkpoints` builds small random-weight checkpoints of each shape for tests.
"""

from vlreg.plugin import Claim, hookimpl

from . import texts, towers, wrappers

PARTS = {"wrapper": wrappers, "text": texts, "vision": towers}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim(kind, model_type, refuses=wrappers.REFUSES.get(model_type, {}) if kind == "wrapper" else {})
            for kind, module in PARTS.items() for model_type in module.MODEL_TYPES]


@hookimpl
def vlreg_rename(part):
    return PARTS[part.kind].rename(part)


@hookimpl
def vlreg_envoys(part):
    return PARTS[part.kind].envoys(part)


@hookimpl
def vlreg_scatter(part):
    return wrappers.scatter(part)


@hookimpl
def vlreg_read_only(part):
    return wrappers.read_only(part) if part.kind == "wrapper" else None


@hookimpl
def vlreg_image_grids(part):
    from .geometry import llava_image_grids

    return llava_image_grids(part.config)


@hookimpl
def vlreg_adapters():
    return {"siglip": towers.SIGLIP_TOWER}


@hookimpl
def vlreg_checkpoints():
    from . import checkpoints, videos

    return {**checkpoints.BUILDERS, **videos.BUILDERS}
