"""The public plugin API: everything a family plugin declares itself with.

A plugin is a module (registered through the ``vlreg`` entry-point group) that
implements some of the hooks in `vlreg.core.hookspecs` with `hookimpl`, returning the
declarations below. Nothing else in vlreg is promised to plugins.
"""

from .core.calls import PerCall
from .core.cross import CrossAttentionLayer, CrossAttentionMixer
from .core.envoys import Attention, Layer, Mlp, Standard, eager_only
from .core.errors import ReadOnly, Unavailable
from .core.experts import MoeMlp
from .core.feature_layer import hidden_states_read_only
from .core.linear import LinearAttention
from .core.mamba import Mamba
from .core.geometry import ImageGrid, box_grid, clip_boxes
from .core.hookspecs import hookimpl
from .core.plugins import adapter
from .core.mixers import Mixer
from .core.parts import Claim, CrossAttention, Part, QueryTokens, Scatter
from .core.values import argument, copied, first, returned, value, with_first
from .core.packed import PackedVisionAttention
from .core.seq2seq import DecoderLayer, Encoder, OutputProjection, PostNormLayer
from .core.vision import Patches, Vision, VisionAttention, VisionLayer, VisionMlp, as_patches, patches, variable_resolution

__all__ = [
    "hookimpl",
    "adapter",
    "Claim",
    "Part",
    "Scatter",
    "CrossAttention",
    "Mixer",
    "QueryTokens",
    "Standard",
    "Layer",
    "Attention",
    "Mlp",
    "MoeMlp",
    "LinearAttention",
    "Mamba",
    "CrossAttentionLayer",
    "Encoder",
    "DecoderLayer",
    "PostNormLayer",
    "OutputProjection",
    "CrossAttentionMixer",
    "Vision",
    "VisionLayer",
    "VisionAttention",
    "PackedVisionAttention",
    "PerCall",
    "VisionMlp",
    "Patches",
    "as_patches",
    "patches",
    "variable_resolution",
    "hidden_states_read_only",
    "value",
    "argument",
    "returned",
    "copied",
    "first",
    "with_first",
    "eager_only",
    "Unavailable",
    "ReadOnly",
    "ImageGrid",
    "box_grid",
    "clip_boxes",
]
