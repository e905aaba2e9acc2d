"""vlreg-ernie: ERNIE 4.5-VL-MoE, declared against `vlreg.plugin`.

Ernie4_5_VLMoeForConditionalGeneration is transformers' composite layout with its projector
under its own name: the text model at ``model.language_model``, the tower at
``model.vision_tower``, the projector ``model.resampler_model`` (it folds each 2 x 2 block of
the tower's patches into one token, then an image's frame is read twice as a frame pair), the
projector's output written into the token embeddings by ``model``'s first
``inputs_embeds.masked_scatter`` (a video's by its second).

* The tower is the Qwen ViT (Qwen2.5-VL's blocks, no windows, no merger inside, a final norm
  ``ln``): the tower's names, envoy classes and image grids are the ``"qwen_vit"`` adapter's
  (vlreg-qwen2-vl). Its mounts are not: the projector runs outside this tower, after it has
  returned, so the tower's output takes a write and none of the adapter's read-only rows apply.
* The text blocks are pre-norm Llama-shaped blocks with 3-D rotary positions; an expert block's
  MLP holds two banks of routed experts, ``text_moe`` and ``vision_moe``, each token sent to one
  by its modality (the processor's ``moe_mm_token_type_ids``: the image's tokens and their
  markers to the vision bank), beside shared experts: `vlreg.plugin.ModalityExperts`, its banks
  ``text_experts`` and ``vision_experts`` (`text`).
* A video's mask and features are served at the second scatter (`vlreg.plugin.VIDEO_SCATTER`);
  its frames run through the tower in a call of their own, whose values are refused by name.
  Its geometry is the Qwen ViT's, a grid a pair of frames: the processor resizes every frame
  whole and counts frames in ``video_grid_thw``, the resampler folds each pair into one token
  (the last frame repeated where the count is odd).
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from . import text, vision

QWEN_VIT = adapter("qwen_vit")


def builders():
    from .checkpoints import build_ernie4_5_vl_moe

    return {"ernie4_5_vl_moe": build_ernie4_5_vl_moe}


plugin = Plugin(
    Wrapper("ernie4_5_vl_moe", projector="model.resampler_model", entry=VIDEO_SCATTER,
            image_grids=lambda part: QWEN_VIT.image_grids,
            video_grids=lambda part: QWEN_VIT.video_grids(t_counts_frames=True)),
    Text("ernie4_5_vl_moe_text", rename=text.RENAME, envoys=text.envoys),
    Tower("ernie4_5_vl_moe_vision", rename=QWEN_VIT.tower_rename, envoys=vision.envoys),
    checkpoints=builders,
)
