"""The public plugin API: everything a family plugin declares itself with.

A plugin is one declaration, `Plugin` over its parts (`Wrapper`, `Text`, `Tower`), found
through the ``vlreg`` entry-point group (``qwen2_vl = "vlreg_qwen2_vl:plugin"``); the
declarations it is made of are below: the image's entries (`Scatter`, `QueryTokens`,
`CrossAttention`), the standard envoy classes a family maps its modules onto, the value
descriptors a family serves a value from elsewhere with, and image grids. A module of
hook functions (`hookimpl`, `vlreg.core.hookspecs`) registers too: the escape hatch.

What vlreg promises plugins is this module and `vlreg.testing` (checkpoint builders'
helpers, the tiny widths, plugins registered for a test, and the conformance suite a
family's tests subclass); nothing else in vlreg is a promise.
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
from .core.parts import Claim, CrossAttention, Entry, Part, QueryTokens, Scatter
from .core.declaration import Plugin, Text, Tower, Wrapper
from .core.values import argument, copied, first, returned, value, with_first
from .core.packed import PackedVisionAttention
from .core.seq2seq import DecoderLayer, Encoder, OutputProjection, PostNormLayer
from .core.vision import Patches, Vision, VisionAttention, VisionLayer, VisionMlp, as_patches, patches, variable_resolution

__all__ = [
    "Plugin",
    "Wrapper",
    "Text",
    "Tower",
    "hookimpl",
    "adapter",
    "Entry",
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
