"""vlreg-kimi: Kimi K2.5, declared against `vlreg.plugin`.

Kimi_K25ForConditionalGeneration holds the text model at ``model.language_model`` (a
``deepseek_v3`` model, served by vlreg-text: latent attention and DeepSeek's group-routed
experts), its own tower at ``model.vision_tower`` (`vision`) and the projector at
``model.mm_projector`` (a norm over each patch, then two linear layers over each 2 x 2 block
of patches); ``model``'s forward writes the projected tokens into the embeddings with its
first ``inputs_embeds.masked_scatter``, a video's with its second.

Videos run through the same tower and projector and are written at the second scatter, which
no standard value reads: refused by name on the wrapper's claim. The forward embeds the
prompt with the image and video placeholders replaced by token 0, so ``embed_tokens``' output
at the image tokens is token 0's embedding until the scatter writes the image there.

It publishes the tower's envoy classes, names and image grids as the adapter ``"kimi_vit"``
(`vision.KimiViT`), for the families built on Kimi's blocks (Muse Glimmer, Muse Spark).
"""

from vlreg.plugin import Plugin, Tower, Wrapper

from . import vision
from .geometry import kimi_image_grids

#: What families on Kimi's tower share, published as the adapter "kimi_vit".
KIMI_VIT = vision.KimiViT(Vision=vision.KimiVision, Attention=vision.KimiVisionAttention,
                          tower_rename=vision.TOWER_RENAME, image_grids=kimi_image_grids)

#: Videos reach the model but none of their values are served.
VIDEOS = (
    "a video's frames reach the model (its logits and text values are served), but they run through the tower "
    "in a call of their own and are written at a scatter of their own, which no standard value reads; pass the "
    "frames as images=[...] to read them"
)


def builders():
    from .checkpoints import build_kimi_k25

    return {"kimi_k25": build_kimi_k25}


plugin = Plugin(
    Wrapper("kimi_k25", projector="model.mm_projector", refuses={"videos": VIDEOS},
            image_grids=lambda part: kimi_image_grids),
    Tower("kimi_k25_vision", rename=vision.TOWER_RENAME, envoys=vision.envoys),
    adapters={"kimi_vit": KIMI_VIT},
    checkpoints=builders,
)
