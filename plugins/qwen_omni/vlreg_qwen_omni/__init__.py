"""vlreg-qwen-omni: the Qwen omni thinkers' image and text paths, declared against `vlreg.plugin`.

A thinker (``Qwen2_5OmniThinkerForConditionalGeneration``,
``Qwen3OmniMoeThinkerForConditionalGeneration``) has Qwen2-VL's layout (the text model at
``model.language_model``, the Qwen ViT at ``model.visual`` with its merger, images resized
whole into 2 x 2 blocks of patches), so the mounts, the tower's names and attention, the
image grids and the read-only rows come from the ``"qwen_vit"`` adapter vlreg-qwen2-vl
publishes. What differs:

* the scatter: ``Qwen2_5OmniThinkerModel.forward`` writes the audio's features first
  (``inputs_embeds_masked_scatter_0``), then the image's (``_1``), then the video's (``_2``),
  so ``image_features`` is read at ``_1``, whether or not the prompt carries audio;
* Qwen2.5-Omni's tower is Qwen2.5-VL's windowed one: its blocks and its merger's output run
  in window order, the features at the scatter in the image tokens' order;
* Qwen3-Omni's tower is Qwen3-VL's (learned positions, DeepStack taps its text model adds
  after its first blocks) and its text model Qwen3-MoE's: the positions and DeepStack's
  additions are not served here yet (`DeepStackLayer`, `Qwen3OmniVision` refuse them by name).

The thinkers' audio encoder (``model.audio_tower``, ``audio_config``) is not served: vlreg
claims no audio part, and a trace hands the processor no audio (only text, images and
videos), so the audio's values have no standard names here.
"""

from vlreg.plugin import Attention, Claim, Layer, Mlp, MoeMlp, Scatter, VisionLayer, VisionMlp, adapter, hookimpl

from .qwen3 import DeepStackLayer, Qwen3OmniVision

QWEN_VIT = adapter("qwen_vit")

#: The image's scatter: the second ``masked_scatter`` of the thinker model's forward (the
#: audio's comes first).
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_1", argument=1)


@hookimpl
def vlreg_plugin_api():
    return 1


#: What a thinker's claim refuses: it serves the image and text paths, not the others.
REFUSES = {
    "videos": (
        "a video's frames reach the thinker (its logits and text values are served), but they run through the "
        "tower in calls of their own and are written at the third scatter, which no standard value reads; pass "
        "the frames as images=[...] to read them"
    ),
    "audio": (
        "audio is not served: vlreg claims no audio part, so the audio encoder has no standard names, and a trace "
        "hands the processor only text, images and videos (audio= is refused as a keyword nothing takes)"
    ),
}


@hookimpl
def vlreg_claims():
    return [
        Claim("wrapper", "qwen2_5_omni_thinker", refuses=REFUSES),
        Claim("text", "qwen2_5_omni_text"),
        Claim("vision", "qwen2_5_omni_vision_encoder"),
        Claim("wrapper", "qwen3_omni_moe_thinker", refuses=REFUSES),
        Claim("text", "qwen3_omni_moe_text"),
        Claim("vision", "qwen3_omni_moe_vision_encoder"),
    ]


@hookimpl
def vlreg_rename(part):
    return {"wrapper": QWEN_VIT.wrapper_rename, "vision": QWEN_VIT.tower_rename}.get(part.kind)


@hookimpl
def vlreg_envoys(part):
    if part.root.model_type == "qwen2_5_omni_thinker":
        from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as omni

        if part.kind == "text":
            return {omni.Qwen2_5OmniDecoderLayer: Layer, omni.Qwen2_5OmniAttention: Attention, omni.Qwen2MLP: Mlp}
        if part.kind == "vision":
            return {omni.Qwen2_5OmniVisionEncoder: QWEN_VIT.Vision, omni.Qwen2_5OmniVisionBlock: VisionLayer,
                    omni.Qwen2_5OmniVisionAttention: QWEN_VIT.Attention, omni.Qwen2_5OmniMLP: VisionMlp}
        return None
    from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni

    if part.kind == "text":
        return {omni.Qwen3OmniMoeThinkerTextDecoderLayer: DeepStackLayer,
                omni.Qwen3OmniMoeThinkerTextAttention: Attention,
                omni.Qwen3OmniMoeThinkerTextMLP: Mlp,  # the blocks in mlp_only_layers
                omni.Qwen3OmniMoeThinkerTextSparseMoeBlock: MoeMlp}
    if part.kind == "vision":
        return {omni.Qwen3OmniMoeVisionEncoder: Qwen3OmniVision, omni.Qwen3OmniMoeVisionBlock: VisionLayer,
                omni.Qwen3OmniMoeVisionAttention: QWEN_VIT.Attention, omni.Qwen3OmniMoeVisionMLP: VisionMlp}
    return None


@hookimpl
def vlreg_scatter(part):
    return SCATTER


@hookimpl
def vlreg_read_only(part):
    return QWEN_VIT.read_only if part.kind == "wrapper" else None


@hookimpl
def vlreg_image_grids(part):
    return QWEN_VIT.image_grids


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import BUILDERS

    return BUILDERS
