"""dots3.note's tower (``dots3_note_vision_encoder``): a Qwen ViT with experts on some blocks.

It runs on every image's patches packed in one row in merge-block order, norms the patch
embedding's output (``patch_embed.norm``: ``patch_embeddings`` is that output), calls its
attention once per image with queries and keys normed per head (the ``"qwen_vit"`` adapter's
attention), and norms the last block's stream (``norm``) before the merger, inside the tower.
Its MLP is a dense one on ``"dense"`` blocks (``mlp_layer_types``) and routed experts on
``"sparse"`` ones, without a shared expert (`vlreg.plugin.VisionMoeMlp`): a sigmoid router
whose choice adds ``e_score_correction_bias``, the chosen weights renormalized and scaled by
``router_scaling_factor``.
"""

from __future__ import annotations

from vlreg.plugin import Vision, VisionLayer, VisionMlp, VisionMoeMlp, adapter, config_size, modeling_envoys

QWEN_VIT = adapter("qwen_vit")


class DotsVision(QWEN_VIT.Vision):
    """The tower (``model.vision_tower``); its config names the heads ``num_attention_heads``."""

    num_heads = config_size("num_attention_heads")
    #: read off the blocks' MLPs, as the core's `Vision` does: the dense and the experts' widths
    #: differ, and the config's ``intermediate_size`` is the dense one's alone
    intermediate_size = Vision.intermediate_size


envoys = modeling_envoys("dots3_note", {
    "Dots3NoteVisionModel": DotsVision, "Dots3NoteVisionBlock": VisionLayer,
    "Dots3NoteVisionAttention": QWEN_VIT.Attention, "Dots3NoteVisionMLP": VisionMlp,
    "Dots3NoteVisionMoE": VisionMoeMlp})
