"""vlreg-qwen2-5-vl: the Qwen2.5-VL family, declared against `vlreg.plugin`.

Qwen2_5_VLForConditionalGeneration has Qwen2-VL's layout (the text model at
``model.language_model``, the Qwen ViT at ``model.visual`` with its merger, the
``masked_scatter`` in ``model``'s forward), so the paths, the tower's names and its
envoy classes are the ones vlreg-qwen2-vl publishes as the adapter ``"qwen_vit"``. What
differs is the tower: RMSNorm blocks, a biased SwiGLU MLP and windowed attention, served
by `WindowedQwenVision` (`vision`), which it publishes as the adapter
``"windowed_qwen_vit"`` for the lines whose tower is this one (EXAONE 4.5's).

LLaVA-OneVision-1.5 (``llava_onevision1_5``, transformers 5.25) is this layout, EXAONE 4.5's
``model`` writing the merger's output in at its first ``inputs_embeds.masked_scatter``, on a
Qwen3 text model (vlreg-text's ``qwen3`` text part) with a tower of its own, RICE-ViT
(`vision.RiceVision`: unwindowed, a class token a frame). Its videos run through the tower in
a call of their own and are written at the second scatter (`VIDEO_SCATTER`), each frame a
temporal patch of its own (its processor's ``temporal_patch_size`` is 1).
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from .vision import WindowedQwenVision, rice_envoys, tower_envoys, window_layout

QWEN_VIT = adapter("qwen_vit")

__all__ = ["WindowedQwenVision", "plugin", "window_layout"]

def text_envoys(part):
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen2_5_vl

    from vlreg.plugin import Attention, Layer, Mlp

    return {qwen2_5_vl.Qwen2_5_VLDecoderLayer: Layer, qwen2_5_vl.Qwen2_5_VLAttention: Attention,
            qwen2_5_vl.Qwen2MLP: Mlp}


def builders():
    from .checkpoints import build_llava_onevision1_5, build_qwen2_5_vl

    return {"qwen2_5_vl": build_qwen2_5_vl, "llava_onevision1_5": build_llava_onevision1_5}


plugin = Plugin(
    Wrapper("qwen2_5_vl", **QWEN_VIT.mounts, entry=VIDEO_SCATTER, refuses=QWEN_VIT.refuses, image_grids=lambda part: QWEN_VIT.image_grids,
            video_grids=lambda part: QWEN_VIT.video_grids()),
    Text("qwen2_5_vl_text", envoys=text_envoys),
    Tower("qwen2_5_vl_vision", rename=QWEN_VIT.tower_rename, envoys=tower_envoys),
    Wrapper("llava_onevision1_5", **QWEN_VIT.mounts, entry=VIDEO_SCATTER, refuses=QWEN_VIT.refuses,
            image_grids=lambda part: QWEN_VIT.image_grids, video_grids=lambda part: QWEN_VIT.video_grids()),
    Tower("llava_onevision1_5_vision", rename=QWEN_VIT.tower_rename, envoys=rice_envoys),
    adapters={"windowed_qwen_vit": WindowedQwenVision},
    checkpoints=builders,
)
