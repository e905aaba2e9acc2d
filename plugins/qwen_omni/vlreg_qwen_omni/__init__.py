"""vlreg-qwen-omni: the Qwen omni thinkers' image and text paths, declared against `vlreg.plugin`.

A thinker (``Qwen2_5OmniThinkerForConditionalGeneration``,
``Qwen3OmniMoeThinkerForConditionalGeneration``) has Qwen2-VL's layout (the text model at
``model.language_model``, the Qwen ViT at ``model.visual`` with its merger, images resized
whole into 2 x 2 blocks of patches), so the mounts, the tower's names and attention, the
image grids and the read-only rows come from the ``"qwen_vit"`` adapter vlreg-qwen2-vl
publishes. What differs:

* the scatter: ``Qwen2_5OmniThinkerModel.forward`` writes the audio's features first
  (``inputs_embeds_masked_scatter_0``), then the image's (``_1``), then the video's (``_2``),
  so ``image_features`` is read at ``_1``, whether or not the prompt carries audio, and
  ``video_features`` at ``_2``;
* Qwen2.5-Omni's tower is Qwen2.5-VL's windowed one: its blocks and its merger's output run
  in window order, the features at the scatter in the image tokens' order;
* Qwen3-Omni's tower is Qwen3-VL's (learned positions, DeepStack taps its text model adds
  after its first blocks) and its text model Qwen3-MoE's: the positions and DeepStack's
  additions are not served here yet (`text.DeepStackLayer`, `vision.Qwen3OmniVision` refuse
  them by name).

The thinkers' audio encoder (``model.audio_tower``, ``audio_config``) is not served: vlreg
claims no audio part, and a trace hands the processor no audio (only text, images and
videos), so the audio's values have no standard names here.
"""

from vlreg.plugin import Plugin, Scatter, Text, Tower, Wrapper, adapter

from .text import qwen2_5_text_envoys, qwen3_text_envoys
from .vision import qwen2_5_tower_envoys, qwen3_tower_envoys

QWEN_VIT = adapter("qwen_vit")

#: The image's scatter: the second ``masked_scatter`` of the thinker model's forward (the
#: audio's comes first); the video's is the third.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_1", argument=1,
                  videos="inputs_embeds_masked_scatter_2")

#: What a thinker's claim refuses: it serves the image, video and text paths, not the audio's.
REFUSES = {
    "audio": (
        "audio is not served: vlreg claims no audio part, so the audio encoder has no standard names, and a trace "
        "hands the processor only text, images and videos (audio= is refused as a keyword nothing takes)"
    ),
}


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker"), **QWEN_VIT.mounts, entry=SCATTER,
            refuses={**QWEN_VIT.refuses, **REFUSES}, image_grids=lambda part: QWEN_VIT.image_grids,
            video_grids=lambda part: QWEN_VIT.video_grids()),
    Text("qwen2_5_omni_text", envoys=qwen2_5_text_envoys),
    Tower("qwen2_5_omni_vision_encoder", rename=QWEN_VIT.tower_rename, envoys=qwen2_5_tower_envoys),
    Text("qwen3_omni_moe_text", envoys=qwen3_text_envoys),
    Tower("qwen3_omni_moe_vision_encoder", rename=QWEN_VIT.tower_rename, envoys=qwen3_tower_envoys),
    checkpoints=builders,
)
