"""vlreg-hunyuan-vl: HunYuan-VL, declared against `vlreg.plugin`.

HunYuanVLForConditionalGeneration holds the text model at ``model.language_model``
(``hunyuan_vl_text``: HunYuan-Dense-V1's blocks, queries and keys normed per head, M-RoPE) and
the tower at ``model.vision_tower``: SigLIP's block names over every image's patches packed in
one ``[1, patches, hidden]`` row, in raster order, one attention call per image
(`vlreg.plugin.RasterPackedVision`, `PerImageAttention`), a learned position grid resampled to
each image (`LearnedPositions`), and its merger, the projector, run inside the tower once per
image (``model.vision_tower.patch_merger``, `PerCall`). ``model``'s first
``inputs_embeds.masked_scatter`` writes the merger's outputs into the embeddings.

Each image's tokens are a begin token, then each row of 2 x 2 patch blocks followed by a
newline token, then an end token, all at the image placeholder and all written by the merger
(`geometry`): the begin, newline and end tokens cover no pixels. The model reads no videos.

HY-V4-VL (``hy_v4_vl``, HYV4VLForConditionalGeneration, transformers 5.25) keeps HunYuan-VL's
tower and its layout (its tower ``hy_v4_vl_vision`` served as HunYuan-VL's), with three
differences: its merger projects each frame's 2 x 2 blocks straight to the text width and writes
each row's newline but no begin or end token; its text model (``hy_v4_vl_text``, `text`) is
HY-V4's: hyper-connection streams, gated latent attention with sinks whose keys a DSA indexer
selects, experts; and it reads videos, each frame through the tower and merger as an image,
written in by ``model``'s second ``masked_scatter`` (`VIDEO_SCATTER`; `geometry.hy_v4_video_grids`).
"""

import attrs

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, read_only

from . import text, vision
from .geometry import hunyuan_image_grids, hy_v4_image_grids, hy_v4_video_grids

#: The merger runs inside the tower and reads the last block's stream before the tower
#: returns it: a write to the tower's output reaches nothing.
READ_ONLY = {
    "vision.tower_output": read_only(
        "the merger (model.projector) runs inside the tower and has read the stream before the tower returns it; "
        "edit vision.layers[-1].layer_output, the same stream before the merger"
    )
}


def builders():
    from .checkpoints import build_hunyuan_vl, build_hy_v4_vl

    return {"hunyuan_vl": build_hunyuan_vl, "hy_v4_vl": build_hy_v4_vl}


plugin = Plugin(
    Wrapper("hunyuan_vl", vision="model.vision_tower", projector="model.vision_tower.patch_merger",
            refuses=READ_ONLY, envoys=vision.wrapper_envoys, image_grids=lambda part: hunyuan_image_grids),
    Text("hunyuan_vl_text", envoys=text.envoys),
    Tower("hunyuan_vl_vision", rename=vision.RENAME, envoys=vision.envoys),
    # the text model repeats the embeddings the scatter left into its streams: they are read
    # where it is handed them
    Wrapper("hy_v4_vl", vision="model.vision_tower", projector="model.vision_tower.patch_merger",
            entry=attrs.evolve(VIDEO_SCATTER, embeddings_to="model.language_model"),
            refuses=READ_ONLY, envoys=vision.hy_v4_wrapper_envoys,
            image_grids=lambda part: hy_v4_image_grids, video_grids=lambda part: hy_v4_video_grids),
    Text("hy_v4_vl_text", envoys=text.hy_v4_envoys),
    Tower("hy_v4_vl_vision", rename=vision.RENAME, envoys=vision.hy_v4_envoys),
    checkpoints=builders,
)
