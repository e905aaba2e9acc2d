"""vlreg-qwen2-vl: the Qwen2-VL family, declared against `vlreg.plugin`.

Qwen2VLForConditionalGeneration holds the text model at ``model.language_model`` and
the Qwen ViT at ``model.visual``; its forward scatters the merger's output into the
token embeddings with ``inputs_embeds.masked_scatter(image_mask, image_embeds)``.

It publishes the Qwen ViT to the other Qwen lines as the adapter ``"qwen_vit"``
(`vision.QwenViT`): they ask for it with ``vlreg.plugin.adapter("qwen_vit")`` rather than
importing this package's modules.
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, read_only

from .geometry import qwen_image_grids, qwen_video_grids
from .vision import QwenViT, QwenVision, QwenVisionAttention, tower_envoys

#: The tower and its merger (the projector); the rest is transformers' layout, the merger's
#: output written into the embeddings in Qwen2VLModel.forward, an image's by its first
#: ``masked_scatter``, a video's by its second.
MOUNTS = {"vision": "model.visual", "projector": "model.visual.merger"}

#: The merger runs inside the tower's forward, before the tower returns: a write to
#: the tower's output reaches nothing. The same stream, before the merger, is the last
#: block's output.
READ_ONLY = {
    "vision.tower_output": read_only(
        "the merger (model.projector) runs inside the tower and has read the stream before the "
        "tower returns it; edit vision.layers[-1].layer_output, the same stream before the merger"
    )
}

#: The Qwen ViT's names, from the tower: none is a name a text block has.
TOWER_RENAME = {
    "blocks": "layers",
    "attn": "self_attn",
    "norm1": "input_layernorm",
    "norm2": "post_attention_layernorm",
}

#: What the Qwen VL lines share, published as the adapter "qwen_vit".
QWEN_VIT = QwenViT(
    Vision=QwenVision,
    Attention=QwenVisionAttention,
    image_grids=qwen_image_grids,
    mounts=MOUNTS,
    tower_rename=TOWER_RENAME,
    refuses=READ_ONLY,
    video_grids=qwen_video_grids,
)


def text_envoys(part):
    from transformers.models.qwen2_vl import modeling_qwen2_vl as qwen2_vl

    from vlreg.plugin import Attention, Layer, Mlp

    return {qwen2_vl.Qwen2VLDecoderLayer: Layer, qwen2_vl.Qwen2VLAttention: Attention, qwen2_vl.Qwen2MLP: Mlp}


def builders():
    from .checkpoints import build_qwen2_vl

    return {"qwen2_vl": build_qwen2_vl}


plugin = Plugin(
    Wrapper("qwen2_vl", **MOUNTS, entry=VIDEO_SCATTER, refuses=READ_ONLY, image_grids=lambda part: qwen_image_grids,
            video_grids=lambda part: qwen_video_grids()),
    Text("qwen2_vl_text", envoys=text_envoys),
    Tower("qwen2_vl_vision", rename=TOWER_RENAME, envoys=tower_envoys),
    adapters={"qwen_vit": QWEN_VIT},
    checkpoints=builders,
)
