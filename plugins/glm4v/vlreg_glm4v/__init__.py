"""vlreg-glm4v: the GLM-V line, declared against `vlreg.plugin`.

Five wrappers share Qwen2-VL's layout (the text model at ``model.language_model``, the
tower at ``model.visual`` with its merger, the ``masked_scatter`` in ``model``'s forward,
images resized whole into 2 x 2 blocks of 14-pixel patches), so the mounts, the image grids and the tower's attention come from the ``"qwen_vit"`` adapter that
vlreg-qwen2-vl publishes:

* ``glm4v`` (GLM-4.1V): sandwich-normed text blocks (`text`), the tower with learned
  positions and a downsampling convolution (`vision`);
* ``glm4v_moe`` (GLM-4.5V): plain pre-norm blocks, dense then routed by a sigmoid group
  router beside a shared expert (`vlreg.plugin.GroupRoutedMoe`); GLM-4.1V's tower;
* ``glm46v`` (GLM-4.6V) and ``glmga``: GLM-4.1V's classes with parts chosen by their model
  types (``glm4v_text`` or ``glm4v_moe_text``; ``glm4v_vision``), each part served as above;
* ``glm_ocr`` (GLM-OCR): GLM-4.1V's text block; a tower without learned positions whose
  attention norms its queries and keys;
* ``glm5_next`` (GLM-5-Next): GLM-OCR's tower (its MLPs clamped) over a text model of
  hyper-connection streams, Kimi delta attention and DSA-indexed latent attention
  (`text`).

GLM writes a video's frames with the image's own placeholder (``<|image|>``); the processor's
``mm_token_type_ids`` tell them apart (1 at an image's token, 2 at a video frame's), and the
entry reads the masks off them (`ENTRY`): ``vision.image_token_mask`` marks the images' tokens
only, ``vision.video_token_mask`` the video's, whose features are written by the second
``masked_scatter``.
"""

import attrs

from vlreg.plugin import Plugin, Scatter, Text, Tower, Wrapper, adapter

from .geometry import padded_image_grids
from .text import SANDWICHED, glm5_next_envoys, moe_envoys, sandwich_envoys
from .vision import TOWERS, tower_envoys

QWEN_VIT = adapter("qwen_vit")

WRAPPERS = ("glm4v", "glm4v_moe", "glm46v", "glmga", "glm_ocr")

#: The whole seconds GLM's processor writes after each frame of a video (two frames a temporal patch).
SECONDS = r"<\|end_of_image\|>(\d+)"

#: The image's features at ``model``'s first ``masked_scatter``, a video's at its second, the
#: two told apart by the processor's token types; transformers' wrapper does not tell them
#: apart itself (`Scatter.apart`).
ENTRY = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", videos="inputs_embeds_masked_scatter_1",
                token_types="mm_token_type_ids", apart=(
                    "GLM's forward writes an image's features, and a video's, at every <|image|> placeholder (its "
                    "get_placeholder_mask ignores mm_token_type_ids), so a forward holding both fails inside "
                    "transformers"))


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(WRAPPERS, **QWEN_VIT.mounts, entry=ENTRY, image_grids=lambda part: QWEN_VIT.image_grids,
            video_grids=lambda part: QWEN_VIT.video_grids(SECONDS)),
    Text(tuple(SANDWICHED), envoys=sandwich_envoys),
    # GLM-5-Next: GLM-OCR's tower and GLM's entry; the text model repeats the embeddings the
    # scatter left into its streams, so they are read where it is handed them
    Wrapper("glm5_next", **QWEN_VIT.mounts, entry=attrs.evolve(ENTRY, videos=None, embeddings_to="model.language_model"),
            image_grids=lambda part: padded_image_grids),
    Text("glm4v_moe_text", envoys=moe_envoys),
    Text("glm5_next_text", envoys=glm5_next_envoys),
    Tower(tuple(TOWERS), rename=QWEN_VIT.tower_rename, envoys=tower_envoys),
    checkpoints=builders,
)
