"""The public plugin API: everything a family plugin declares itself with.

A plugin is one declaration, `Plugin` over its parts (`Wrapper`, `Text`, `Tower`), found
through the ``vlreg`` entry-point group (``qwen2_vl = "vlreg_qwen2_vl:plugin"``); the
declarations it is made of are below: the image's entries (`Scatter`, `Injections`, `QueryTokens`,
`ImageCodes`, `CrossAttention`, `Prefix`), the standard envoy classes a family maps its modules
onto, the value descriptors a family serves a value from elsewhere with, and image grids.
A `Wrapper` states only what differs from transformers' composite layout (`SCATTER` is its
entry; `VIDEO_SCATTER` where a video is written in too); `modeling_envoys`, `tower_envoys` and
`FEATURE_LAYER_READ_ONLY` are what many families declare alike.
A block the text model runs several passes a forward (a looped model's) is declared on its
block class (`Layer.passes`): ``layers`` is then the blocks' calls in forward order, each
read at its own call (`vlreg.core.envoys.blocks`).
A module of hook functions (`hookimpl`, `vlreg.core.host.hookspecs`) registers too: the
escape hatch.

What vlreg promises plugins is this module and `vlreg.testing` (checkpoint builders'
helpers, the tiny widths, plugins registered for a test, and the conformance suite a
family's tests subclass); nothing else in vlreg is a promise.
"""

from importlib import import_module
from typing import Any, Callable

from .core.envoys.interleaved import Interleaved
from .core.envoys.calls import PerCall
from .core.envoys.codes import CodeEmbedding, CodesVision
from .core.envoys.vq_encoder import VqEncoder, resize_ratio_refusal
from .core.envoys.cross import CrossAttentionLayer, CrossAttentionMixer
from .core.envoys.experts import GroupRoutedMoe, MoeMlp, SharedExpertsAfter, VisionMoeMlp
from .core.envoys.feature_layer import hidden_states_read_only
from .core.envoys.indexers import SparseAttention
from .core.envoys.latent import LatentAttention
from .core.envoys.linear import LinearAttention
from .core.envoys.mamba import Mamba
from .core.envoys.mixers import Mixer
from .core.envoys.modality import ExpertBank, ModalityExperts
from .core.envoys.packed import PackedVisionAttention
from .core.envoys.per_image import PACKED_SIGLIP_RENAME, PackedVision, PerImageAttention, RasterPackedVision
from .core.envoys.positions import LearnedPositions
from .core.envoys.seq2seq import DecoderLayer, Encoder, MergedAttention, OutputProjection, PostNormLayer
from .core.envoys.standard import Standard
from .core.envoys.readout import UNNORMED, Readout
from .core.envoys.streams import MixingStreamsLayer, StreamsLayer
from .core.envoys.text import Attention, Layer, Mlp, ScaledResidualLayer, eager_only
from .core.envoys.patches import Patches, VisionAttention, VisionLayer, VisionMlp, as_patches, patches
from .core.envoys.towers import as_second_tower
from .core.envoys.vision import Vision, config_size, variable_resolution
from .core.errors import ReadOnly, Unavailable
from .core.host.declaration import Other, Plugin, Text, Tower, Wrapper
from .core.host.hookspecs import hookimpl
from .core.host.parts import Claim, Part
from .core.host.plugins import adapter
from .core.images.codes import ImageCodes
from .core.images.cross_attention import CrossAttention
from .core.images.entries import Entry
from .core.images.scatter import SCATTER, VIDEO_SCATTER, Scatter
from .core.images.injections import Injections
from .core.images.prefix import Prefix
from .core.images.query_tokens import QueryTokens
from .core.images.geometry import ImageGrid, box_grid, clip_boxes, tile_grids
from .core.images.video_geometry import VideoGrid, frame_grids, frame_size, kept_frames
from .core.serving.drilled import inside
from .core.serving.refusals import IMAGES, Gate, prefill_only, read_only
from .core.serving.sites import At, Site
from .core.serving.values import argument, copied, first, returned, value, with_first

__all__ = [
    "Plugin",
    "Wrapper",
    "SCATTER",
    "VIDEO_SCATTER",
    "tower_envoys",
    "modeling_envoys",
    "FEATURE_LAYER_READ_ONLY",
    "Text",
    "Interleaved",
    "Tower",
    "Other",
    "hookimpl",
    "adapter",
    "Entry",
    "Claim",
    "Part",
    "Scatter",
    "Injections",
    "CrossAttention",
    "Prefix",
    "Mixer",
    "QueryTokens",
    "ImageCodes",
    "CodesVision",
    "VqEncoder",
    "CodeEmbedding",
    "Standard",
    "Layer",
    "ScaledResidualLayer",
    "Attention",
    "LatentAttention",
    "SparseAttention",
    "Mlp",
    "MoeMlp",
    "VisionMoeMlp",
    "SharedExpertsAfter",
    "GroupRoutedMoe",
    "ModalityExperts",
    "ExpertBank",
    "LinearAttention",
    "Mamba",
    "CrossAttentionLayer",
    "Encoder",
    "DecoderLayer",
    "MergedAttention",
    "PostNormLayer",
    "StreamsLayer",
    "MixingStreamsLayer",
    "Readout",
    "UNNORMED",
    "OutputProjection",
    "CrossAttentionMixer",
    "Vision",
    "VisionLayer",
    "VisionAttention",
    "PackedVisionAttention",
    "PerImageAttention",
    "PackedVision",
    "RasterPackedVision",
    "PACKED_SIGLIP_RENAME",
    "LearnedPositions",
    "PerCall",
    "VisionMlp",
    "Patches",
    "as_patches",
    "as_second_tower",
    "patches",
    "config_size",
    "resize_ratio_refusal",
    "variable_resolution",
    "hidden_states_read_only",
    "value",
    "inside",
    "At",
    "Site",
    "argument",
    "returned",
    "copied",
    "first",
    "with_first",
    "eager_only",
    "read_only",
    "prefill_only",
    "IMAGES",
    "Gate",
    "Unavailable",
    "ReadOnly",
    "ImageGrid",
    "VideoGrid",
    "frame_grids",
    "frame_size",
    "kept_frames",
    "box_grid",
    "clip_boxes",
    "tile_grids",
]


def modeling_envoys(module: str, classes: dict[str, type]) -> Callable[[Any], dict[type, type]]:
    """``envoys=`` as data: ``{class name in transformers' modeling_<module>: envoy class}``
    (``modeling_envoys("lfm2", {"Lfm2DecoderLayer": Layer, ...})``). The module is imported
    when a checkpoint resolves, not with the plugin."""

    def envoys(part: Any) -> dict[type, type]:
        modeling = import_module(f"transformers.models.{module}.modeling_{module}")
        return {getattr(modeling, name): envoy for name, envoy in classes.items()}

    return envoys


def tower_envoys(module: str, names: tuple[str, str, str, str], *, vision: type = Vision, layer: type = VisionLayer,
                 attention: type = VisionAttention, mlp: type = VisionMlp) -> Callable[[Any], dict[type, type]]:
    """``envoys=`` for a tower of four classes, named in transformers' ``modeling_<module>``:
    the tower, its block, the block's attention and its MLP (``("SiglipVisionModel",
    "SiglipEncoderLayer", "SiglipAttention", "SiglipMLP")``), onto `Vision`, `VisionLayer`,
    `VisionAttention` and `VisionMlp` or the subclasses given (`modeling_envoys`)."""
    return modeling_envoys(module, dict(zip(names, (vision, layer, attention, mlp))))


#: The refusal table of a wrapper whose projector reads ``hidden_states[vision_feature_layer]``
#: of the tower (LLaVA's layout): the tower's output and the blocks after the one read take no
#: write (`hidden_states_read_only`, read off the checkpoint when asked; nothing where the
#: config names no ``vision_feature_layer``).
FEATURE_LAYER_READ_ONLY = hidden_states_read_only()
