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
  attention norms its queries and keys.

Videos are not served, and the wrappers' claims refuse them (``videos``, and the row
``vision.video_features``) saying why, so `vlreg plugins --coverage` marks each partial: GLM writes a
video's frames with the image's own placeholder (``<|image|>``; only the processor's
``mm_token_type_ids`` tell them apart), and vlreg finds a prompt's image tokens as
``input_ids == image_token_id``, so on a prompt that carries a video those tokens include
the video's: trace a video's frames as images (``images=[...]``).
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper, adapter

from .text import SANDWICHED, moe_envoys, sandwich_envoys
from .vision import NO_VIDEOS, TOWERS, tower_envoys

QWEN_VIT = adapter("qwen_vit")

WRAPPERS = ("glm4v", "glm4v_moe", "glm46v", "glmga", "glm_ocr")


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(WRAPPERS, **QWEN_VIT.mounts, image_grids=lambda part: QWEN_VIT.image_grids,
            refuses={"videos": NO_VIDEOS, "vision.video_features": NO_VIDEOS}),
    Text(tuple(SANDWICHED), envoys=sandwich_envoys),
    Text("glm4v_moe_text", envoys=moe_envoys),
    Tower(tuple(TOWERS), rename=QWEN_VIT.tower_rename, envoys=tower_envoys),
    checkpoints=builders,
)
