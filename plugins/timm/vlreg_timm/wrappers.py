"""The wrappers over a timm tower: Perception LM and FastVLM.

Both hold their parts the same way: the text model at ``model.language_model`` (Llama on
Perception LM, Qwen2 on FastVLM; vlreg-llava serves both), the ``TimmWrapperModel`` tower at
``model.vision_tower`` (`vision`) and the projector at ``model.multi_modal_projector``; and
both write the projector's output into the embeddings at the image tokens with the first
``inputs_embeds.masked_scatter(mask, features)`` of ``model``'s forward.

* ``perception_lm`` (PerceptionLMForConditionalGeneration): every crop of every image (its
  thumbnail, then its tiles) runs through the tower in one batch; the class token is dropped
  (``vision_use_cls_token``); the projector maps each patch (``linear_1``, GELU, ``linear_2``)
  and then averages each ``projector_pooling_ratio`` x ``projector_pooling_ratio`` block of a
  crop's patches into one token. The pooling hands the scatter a transposed tensor, which no
  flat view can take: ``vision.image_features`` has the model hold a flat copy of it first and
  serves a view of that (`vlreg.plugin.value.viewable`), so edits land. A video's frames run
  through the same tower in a call of their own and are written at the second scatter
  (``vision.video_features``, served the same way).
* ``fast_vlm`` (FastVlmForConditionalGeneration): LLaVA's shape over FastViT: the tower's
  last grid, each cell a row, through a two-layer MLP, a token per cell. FastViT's stages are
  no standard blocks, so ``vision.layers`` is refused by name (`REFUSES`).
"""

FASTVIT_BLOCKS = (
    "its blocks are FastViT's stages (model.vision.timm_model.stages[s].blocks[b]: convolutional RepMixer blocks, "
    "then attention blocks, over a 2-D grid whose width grows and whose side halves stage by stage), which have no "
    "standard block's shape; read them natively, or read vision.patch_embeddings (the stem's grid) and "
    "vision.tower_output (the last grid, what the projector reads)"
)

#: What each wrapper's claim refuses (`Claim.refuses`), by model type.
REFUSES = {
    "fast_vlm": {"vision.layers": FASTVIT_BLOCKS},
}
