"""LLaVA-OneVision-1.5 (``llava_onevision1_5``, transformers 5.25): Qwen2.5-VL's layout (the
tower at ``model.visual`` with its merger, EXAONE 4.5's ``model`` writing the merger's output
in at its first ``inputs_embeds.masked_scatter``) on a Qwen3 text model (vlreg-text's
``qwen3`` text part), with a tower of its own, RICE-ViT:

* no windows: every block attends within each frame (``cu_seqlens``), the Qwen ViT's
  attention reads hold (`QWEN_VIT.Attention`);
* a class token before each frame's patches (``cls_embeddings``), then ``pre_layernorm``:
  the blocks' stream holds ``patches + 1`` rows a frame, and the class rows are dropped
  before the merger, so ``vision.tower_output`` is read-only as on every Qwen ViT.

Videos run through the tower in calls of their own and are written at a second scatter,
which no standard value reads: refused by name (`VIDEOS`).
"""

from __future__ import annotations

from vlreg.plugin import adapter, tower_envoys

QWEN_VIT = adapter("qwen_vit")

#: Videos reach the model but none of their values are served.
VIDEOS = (
    "a video's frames reach the model (its logits and text values are served), but they run through the tower "
    "in calls of their own and are written at a scatter of their own, which no standard value reads; pass the "
    "frames as images=[...] to read them"
)


class RiceVision(QWEN_VIT.Vision):
    """RICE-ViT: the Qwen ViT's sizes, with one class token before each frame's patches."""

    class_tokens = 1


#: The tower's module classes onto the Qwen ViT's envoys.
envoys = tower_envoys(
    "llava_onevision1_5",
    ("LlavaOnevision15VisionModel", "LlavaOnevision15VisionBlock", "LlavaOnevision15VisionAttention",
     "LlavaOnevision15VisionMLP"),
    vision=RiceVision, attention=QWEN_VIT.Attention)
