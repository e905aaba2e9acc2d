"""Kimi K2.5's tower (``kimi_k25_vision``, ``Kimi_K25VisionModel``) under the standard names.

The tower runs on every image's patches packed in one row, ``[patches, hidden]``, each image's
patches in raster order (the processor cuts the image row by row), through:

* ``patch_embed``: a convolution over each 14-pixel patch (``proj``), then ``pos_emb``, which
  adds a learned grid of positions resampled to each image (bicubic) plus a per-frame
  sinusoid (nothing on a still image). `KimiVision` serves the convolution's rows as
  ``patch_embeddings`` and what ``pos_emb`` adds as ``position_embeddings``, so
  ``vision.layers[0].input == patch_embeddings + position_embeddings``;
* the blocks (``layers``: ``norm1``, ``attn``, ``norm2``, ``mlp``, Qwen2-VL's names), whose
  attention projects queries, keys and values for the whole row and then calls the attention
  function once per image (`KimiVisionAttention`: the Qwen ViT's reads at Kimi's operations);
* ``final_layernorm``, whose output is ``tower_output``; then the forward gathers each 2 x 2
  block of patches (``merge_kernel_size``) into a token, ``[tokens, 4, hidden]``, averaged
  over a video's frames, which the projector (``model.mm_projector``) norms, flattens and
  projects. A write to ``tower_output`` reaches that gather.

The tower's rows are in raster order, where the image tokens are in raster order of the 2 x 2
blocks: `KimiVision.to_scatter_order` puts rows of patches in the tokens' order (each token's
four patches together), as the Qwen ViT holds them, so the helpers that fold patches onto
tokens read the tower as they read a Qwen one.
"""

from __future__ import annotations

from typing import Any

import torch
import transformers
from attrs import frozen
from packaging.version import Version

from vlreg.plugin import At, VisionLayer, VisionMlp, adapter, as_patches, config_size, modeling_envoys, returned, value

QWEN_VIT = adapter("qwen_vit")

#: transformers before 5.25 splits a video's projected tokens by every frame's patches, though the
#: tower pooled the frames of each chunk into one grid: its forward fails on a chunk of more than
#: one frame (a chunk a frame, as in a video of one frame, runs), so before 5.25 a trace refuses it.
SPLITS_FRAMES = Version(transformers.__version__) < Version("5.25")
CHUNKS = (
    "transformers before 5.25 cannot run a Kimi K2.5 video chunk of more than one frame (its get_image_features "
    "splits the projected tokens by every frame's patches after the tower pooled each chunk of frames into one "
    "grid), and the processor made a chunk of {frames} frames: install transformers 5.25, or pass the frames as "
    "images=[...], or pass temporal_patch_size=1 (a chunk a frame, each its own grid of tokens)"
)

#: The tower's names, from the tower: none is a name a text block has.
TOWER_RENAME = {"attn": "self_attn", "norm1": "input_layernorm", "norm2": "post_attention_layernorm"}


def _pos_emb(vision: Any) -> Any:
    return vision.patch_embed.pos_emb


def _patch_rows(vision: Any, raw: Any) -> torch.Tensor:
    args, kwargs = raw
    return as_patches(args[0])


def _put_patch_rows(vision: Any, raw: Any, new: torch.Tensor) -> Any:
    args, kwargs = raw
    return (new.reshape(args[0].shape), *args[1:]), kwargs


class KimiVision(QWEN_VIT.Vision):
    """The Kimi K2.5 tower: packed rows of raster-ordered patches, learned positions."""

    sourced = True
    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "tower_output", "image_features")

    patch_embeddings = value(
        lambda vision: f"{_pos_emb(vision).path}.input",
        description="the patch embedding's output (the convolution's, before the positions), one row per patch",
    )(_patch_rows).writes(_put_patch_rows)

    position_embeddings = value(
        At(lambda vision: f"{_pos_emb(vision).path}.source.pos_to_0.output", inside=_pos_emb),
        description="the learned position grid resampled to each image (plus a video frame's sinusoid), "
                    "added before block 0",
    )(lambda vision, raw: as_patches(raw)).writes(lambda vision, raw, new: new.reshape(raw.shape))

    tower_output = returned(
        lambda vision: f"{vision.final_layernorm.path}.output",
        description="the last block's stream after the tower's final norm (final_layernorm), before the 2 x 2 gather",
    )

    vision_hidden_size = config_size("hidden_size")
    num_heads = config_size("num_attention_heads")

    @property
    def intermediate_size(self) -> int:
        return int(self._vision_config.intermediate_size)

    @property
    def spatial_merge_size(self) -> int:
        """The side of the block of patches gathered into one image token."""
        return int(self._vision_config.merge_kernel_size[0])

    window_size = None

    def encoding_refusal(self, encoding: Any) -> str | None:
        """Before transformers 5.25, a video chunk of more than one frame (`SPLITS_FRAMES`)."""
        grids = encoding.get("video_grid_thw") if SPLITS_FRAMES else None
        frames = int(grids[:, 0].max()) if grids is not None and len(grids) else 1
        return CHUNKS.format(frames=frames) if frames > 1 else None

    def to_scatter_order(self, tensor: torch.Tensor, grid_thw: Any, dim: int = -2) -> torch.Tensor:
        """``tensor`` (rows of patches in the tower's raster order along ``dim``: a block's
        value, ``tower_output``, a pattern's axis) regrouped so each image token's 2 x 2 block
        of patches is consecutive, blocks in the tokens' order. Returns a copy."""
        side, order, start = self.spatial_merge_size, [], 0
        for frames, height, width in torch.as_tensor(grid_thw).tolist():
            raster = torch.arange(start, start + frames * height * width).view(frames, height // side, side,
                                                                               width // side, side)
            order.append(raster.permute(0, 1, 3, 2, 4).reshape(-1))
            start += frames * height * width
        return tensor.index_select(dim, torch.cat(order))


class KimiVisionAttention(QWEN_VIT.Attention):
    """The Qwen ViT's attention values, read at Kimi's operations: queries and keys after the
    rotary embedding and values, ``[1, heads, patches, head_dim]``, where they are transposed
    for the calls; each image's call of the attention function, joined at ``torch_cat_0``."""

    attention_queries = returned("source.query_states_transpose_0.output",
                                 description="the queries, after the rotary embedding")
    attention_keys = returned("source.key_states_transpose_0.output", description="the keys, after the rotary embedding")
    attention_values = returned("source.value_states_transpose_0.output", description="the values")


@frozen
class KimiViT:
    """The adapter ``"kimi_vit"``: Kimi K2.5's tower for the families built on its blocks (Muse
    Glimmer's and Muse Spark's attention is Kimi's, op for op). A public promise of vlreg-kimi.

    * ``Vision``, ``Attention``: `KimiVision` and `KimiVisionAttention`, to map a family's own
      module classes onto or to subclass;
    * ``tower_rename``: the tower's names (``attn``, ``norm1``, ``norm2``);
    * ``image_grids``: `vlreg_image_grids` for ``Kimi_K25ImageProcessor``'s resize and padding.
    """

    Vision: type
    Attention: type
    tower_rename: dict
    image_grids: Any


#: The tower's module classes onto their envoys.
envoys = modeling_envoys("kimi_k25", {"Kimi_K25VisionModel": KimiVision, "Kimi_K25VisionEncoderLayer": VisionLayer,
                                      "Kimi_K25VisionAttention": KimiVisionAttention, "Kimi_K25VisionMLP": VisionMlp})
