"""The Qwen ViT, shared by every Qwen vision-language line that uses it.

The tower runs on ``[patches, vision_hidden_size]`` with every image of the invoke in
one row, in merge-block order, and its attention computes queries, keys and values for
the whole row, then calls the attention function once per image (once per window on
Qwen2.5-VL's windowed blocks) and concatenates the results: vlreg's packed per-image
attention (`vlreg.plugin.PerImageAttention`) serves it as it is.
"""

from __future__ import annotations

from typing import Callable

from attrs import frozen

from vlreg.plugin import PerImageAttention, Vision, config_size, resize_ratio_refusal, variable_resolution
from vlreg.plugin import tower_envoys as standard_tower_envoys


class QwenVision(Vision):
    """The Qwen ViT tower. Its config names the width ``embed_dim`` on Qwen2-VL (where
    ``hidden_size`` is the merger's output) and ``hidden_size`` on Qwen2.5-VL."""

    image_size = property(variable_resolution)

    @property
    def vision_hidden_size(self) -> int:
        config = self._vision_config
        return getattr(config, "embed_dim", None) or config.hidden_size

    num_heads = config_size("num_heads")

    @property
    def intermediate_size(self) -> int:
        config = self._vision_config
        size = getattr(config, "intermediate_size", None)
        return size if size is not None else int(config.embed_dim * config.mlp_ratio)

    spatial_merge_size = config_size("spatial_merge_size",
                                     "The side of the block of patches the merger folds into one image token.")

    @property
    def window_size(self) -> int | None:
        """The side of an attention window in pixels (Qwen2.5-VL), else None."""
        return getattr(self._vision_config, "window_size", None)

    def image_refusal(self, width: int, height: int) -> str | None:
        """The processor's resize (Qwen2-VL's, and every processor built on it) refuses an
        image far longer one way than the other, in its own words: refused before it runs."""
        return resize_ratio_refusal(width, height)


class QwenVisionAttention(PerImageAttention):
    """The Qwen ViT's attention: `vlreg.plugin.PerImageAttention` at its default locations
    (``unsqueeze_0..2`` after the rotary embedding, ``torch_cat_0`` joining the calls)."""


@frozen
class QwenViT:
    """The adapter ``"qwen_vit"``: what every Qwen VL line shares, for their plugins to
    build on (`vlreg.plugin.adapter`). A public promise of vlreg-qwen2-vl.

    * ``Vision``, ``Attention``: the envoy classes of the tower and of its blocks'
      attention (`QwenVision`, `QwenVisionAttention`), to map a line's own module classes
      onto or to subclass;
    * ``image_grids``: `vlreg_image_grids` for a line whose processor is
      ``Qwen2VLImageProcessor``-like (``image_grid_thw``, ``merge_size``);
    * ``mounts``: where the wrapper's tower and projector sit, ``Wrapper(..., **mounts)``
      (the tower at ``model.visual``, its merger the projector; the rest is transformers'
      layout: the text model at ``model.language_model``, the scatter in ``model``'s forward);
    * ``tower_rename``: the tower's names (``blocks``, ``attn``, ``norm1``, ``norm2``);
    * ``refuses``: the wrapper's refusal table (the merger runs inside the tower, so the
      tower's output takes no write);
    * ``video_grids``: ``video_grids(times=None, t_counts_frames=False)`` gives
      `vlreg_video_grids` for a ``Qwen2VLVideoProcessor``-like video processor (``times``:
      the pattern of the time it writes at each temporal patch; ``t_counts_frames``: its
      ``video_grid_thw`` counts frames, ERNIE 4.5-VL's).
    """

    Vision: type
    Attention: type
    image_grids: Callable
    mounts: dict
    tower_rename: dict
    refuses: dict
    video_grids: Callable | None = None


#: The Qwen2-VL tower's module classes onto the Qwen ViT's envoys.
tower_envoys = standard_tower_envoys(
    "qwen2_vl", ("Qwen2VisionTransformerPretrainedModel", "Qwen2VLVisionBlock", "VisionAttention", "VisionMlp"),
    vision=QwenVision, attention=QwenVisionAttention)
