"""vlreg-kimi: Kimi K2.5, declared against `vlreg.plugin`.

Kimi_K25ForConditionalGeneration holds the text model at ``model.language_model`` (a
``deepseek_v3`` model, served by vlreg-text: latent attention and DeepSeek's group-routed
experts), its own tower at ``model.vision_tower`` (`vision`) and the projector at
``model.mm_projector`` (a norm over each patch, then two linear layers over each 2 x 2 block
of patches); ``model``'s forward writes the projected tokens into the embeddings with its
first ``inputs_embeds.masked_scatter``, a video's with its second.

Videos run through the same tower and projector, each chunk of ``temporal_patch_size`` frames
pooled into one grid of tokens, and are written at the second scatter (`VIDEO_SCATTER`), where
``vision.video_token_mask`` and ``vision.video_features`` are served. Before transformers 5.25,
transformers' forward fails on a chunk of more than one frame: a trace refuses such a video by
name before the model runs (`vision.KimiVision.encoding_refusal`), and serves a video whose every
chunk is one frame (a video of one frame, or ``temporal_patch_size=1``). Their grids
(`geometry.kimi_video_grids`) follow the processor's sampling: a grid a chunk, over the first to
the last frame it pools, with the chunk's written start time. The forward embeds the
prompt with the image and video placeholders replaced by token 0, so ``embed_tokens``' output
at the image tokens is token 0's embedding until the scatter writes the image there.

It publishes the tower's envoy classes, names and image grids as the adapter ``"kimi_vit"``
(`vision.KimiViT`), for the families built on Kimi's blocks (Muse Glimmer, Muse Spark).
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Tower, Wrapper

from . import vision
from .geometry import kimi_image_grids, kimi_video_grids
from .vision import SPLITS_FRAMES

__all__ = ["KIMI_VIT", "SPLITS_FRAMES", "builders", "plugin"]

#: What families on Kimi's tower share, published as the adapter "kimi_vit".
KIMI_VIT = vision.KimiViT(Vision=vision.KimiVision, Attention=vision.KimiVisionAttention,
                          tower_rename=vision.TOWER_RENAME, image_grids=kimi_image_grids)


def builders():
    from .checkpoints import build_kimi_k25

    return {"kimi_k25": build_kimi_k25}


plugin = Plugin(
    Wrapper("kimi_k25", projector="model.mm_projector", entry=VIDEO_SCATTER,
            image_grids=lambda part: kimi_image_grids, video_grids=lambda part: kimi_video_grids),
    Tower("kimi_k25_vision", rename=vision.TOWER_RENAME, envoys=vision.envoys),
    adapters={"kimi_vit": KIMI_VIT},
    checkpoints=builders,
)
