"""The Gemma vision parts: the Gemma 4 tower, Gemma 4 unified's embedder, Gemma 3n's
MobileNetV5 and its embedders.

Gemma 3 and PaliGemma host a SigLIP tower (``siglip_vision_model``), served by
vlreg-llava's claim; nothing of it is here.

**Gemma 4** (``gemma4_vision``, ``Gemma4VisionModel`` at ``model.vision_tower``): the
processor resizes each image, keeping its aspect, to whole ``k`` x ``k`` blocks of
``patch_size`` patches under a budget of patches, cuts it into patches in raster order
and pads every image's row to the budget (``max_soft_tokens * k**2``). The tower projects
each patch (``patch_embedder.input_proj``: `Vision.patch_embeddings`), adds a learned
position looked up per axis (`Gemma4Vision.position_embeddings`), runs its sandwich-normed
blocks (``encoder.layers``) over every row, padding included, masking the padding as keys,
then its pooler averages each ``k`` x ``k`` block of patches into a token and drops the
padding. What the tower returns is therefore already image tokens, so
`Gemma4Vision.tower_output` is read at the encoder's output instead: the last block's
stream, ``[images, budget, vision_hidden_size]``, each image's own patches first, its
padding after (`Vision.padded_patches`). The projector is ``model.embed_vision``.

**Gemma 4 unified** (``gemma4_unified_vision``): no tower. ``model.embed_vision``
(``Gemma4UnifiedVisionEmbedder``) embeds each ``k * patch_size`` pixel square (a token)
with LayerNorm, a linear map and LayerNorm (`Gemma4UnifiedVision.patch_embeddings`), adds a
learned position per axis (`Gemma4UnifiedVision.position_embeddings`), norms
(``pos_norm``: `Vision.tower_output`) and projects (``multimodal_embedder``, the
projector). It is the `Vision`, with no blocks.

**Gemma 3n** (``gemma3n_vision``, timm's MobileNetV5 under transformers'
``TimmWrapperModel`` at ``model.vision_tower``): convolutional stages, the last two with
multi-query attention, whose last two stages' maps a fusion adapter (``msfa``) resizes,
joins and norms into a ``k`` x ``k`` grid (16 x 16 on the published checkpoints). It is
served as a tower with no standard blocks (`Gemma3nVision`): its stages are not blocks of
one residual stream of one width. ``patch_embeddings`` is the stem's map
(``timm_model.conv_stem``: a stride-2 3 x 3 convolution to 64 channels, normed), a row per
position; ``tower_output`` is the adapter's grid, a token a row, served as a copy written
back, because the wrapper scales that tensor in place (by ``sqrt(hidden_size)``) before it
projects it. The projector is ``model.embed_vision`` (`Embedder`), which the forward calls
twice: on the prompt's ids (the vision range of the vocabulary, the end-of-image marker
among it, has an embedding table of its own), then on the grid.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import (
    At,
    PerCall,
    Unavailable,
    Vision,
    VisionAttention,
    VisionMlp,
    config_size,
    patches,
    returned,
    tower_envoys,
    value,
    variable_resolution,
)


def _after(norm: str):
    return lambda sublayer: f"{sublayer.parent.path}.{norm}.output"


def _hidden(raw: Any) -> torch.Tensor:
    return raw.last_hidden_state if hasattr(raw, "last_hidden_state") else raw[0]


def _put_hidden(raw: Any, new: torch.Tensor) -> Any:
    raw["last_hidden_state"] = new
    return raw


class Gemma4Vision(Vision):
    """The Gemma 4 tower (``model.vision_tower``): patches padded to a budget, pooled
    ``k`` x ``k`` into tokens after the last block."""

    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "tower_output", "image_features")
    padded_patches = True

    position_embeddings = value(
        At(lambda vision: f"{vision.path}.patch_embedder.source.self__position_embeddings_0.output",
           inside=lambda vision: vision.patch_embedder),
        description="the learned position of each patch (an x and a y embedding summed), zero on padding",
    )(lambda vision, raw: raw)

    tower_output = patches(
        lambda vision: f"{vision.path}.encoder.output",
        read=_hidden,
        put=_put_hidden,
        description="the last block's stream, [images, patch budget, hidden], before the k x k pooling",
    )

    image_size = property(variable_resolution)

    def image_refusal(self, width: int, height: int) -> str | None:
        """More patches along a side than the tower has learned positions for."""
        from transformers.models.gemma4 import image_processing_gemma4

        table = self.root._module.config.vision_config.position_embedding_size
        return _beyond_positions(self.root.processor, image_processing_gemma4, width, height, table, "patches", 1)


def _beyond_positions(processor: Any, module: Any, width: int, height: int, table: int, unit: str, fold: int) -> str | None:
    """Why Gemma 4's processor, fitting the image to its budget of patches with its aspect
    kept (``module``'s ``get_aspect_ratio_preserving_size``), makes more ``unit`` (``fold`` x
    ``fold`` patches each) along a side than ``table`` positions reach, or cannot fit it."""
    ip = getattr(processor, "image_processor", None)
    if ip is None or not hasattr(ip, "pooling_kernel_size"):
        return None
    kernel, patch = ip.pooling_kernel_size, ip.patch_size
    try:
        resized = module.get_aspect_ratio_preserving_size(height=height, width=width, patch_size=patch,
                                                          max_patches=ip.max_soft_tokens * kernel**2,
                                                          pooling_kernel_size=kernel)
    except ValueError as error:
        return f"the processor cannot fit it to its budget of patches ({error}): pass an image closer to square"
    along = max(resized) // (patch * fold)
    if along <= table:
        return None
    return (f"the processor resizes it to {resized[1]} x {resized[0]} pixels, {along} {unit} along its longer side, "
            f"past the {table} positions this checkpoint has learned: pass an image closer to square (pad it)")


class Gemma4VisionAttention(VisionAttention):
    """The tower attention; what it adds to the stream is the post-attention norm's output."""

    attention_output = patches(_after("post_attention_layernorm"),
                               description="what the attention adds to the stream, [images, patches, hidden]")


class Gemma4VisionMlp(VisionMlp):
    """The tower MLP; what it adds to the stream is the post-feedforward norm's output."""

    mlp_output = patches(_after("post_feedforward_layernorm"),
                         description="what the MLP adds to the stream, [images, patches, hidden]")


def _no_blocks(vision: Vision, size: str) -> Any:
    raise Unavailable(
        f"vision.{size} is unavailable: Gemma 4 unified has no vision tower (its embedder has no "
        f"attention and no MLP blocks)"
    )


def _first_input(raw: Any) -> torch.Tensor:
    args, kwargs = raw
    return args[0] if args else kwargs["inputs_embeds"]


def _put_first_input(raw: Any, new: torch.Tensor) -> Any:
    args, kwargs = raw
    if args:
        return (new, *args[1:]), kwargs
    return args, {**kwargs, "inputs_embeds": new}


class Gemma4UnifiedVision(Vision):
    """Gemma 4 unified's embedder (``model.embed_vision``), a `Vision` with no blocks: one
    row per image token (a ``k * patch_size`` pixel square), padded to the budget."""

    sourced = True  # position_embeddings is read at an operation in the embedder's forward
    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "tower_output", "image_features")
    padded_patches = True

    def image_refusal(self, width: int, height: int) -> str | None:
        """More tokens along a side than the embedder has learned positions for."""
        from transformers.models.gemma4_unified import image_processing_gemma4_unified

        table = self.root._module.config.vision_config.mm_posemb_size
        kernel = getattr(getattr(self.root.processor, "image_processor", None), "pooling_kernel_size", 1)
        return _beyond_positions(self.root.processor, image_processing_gemma4_unified, width, height, table,
                                 "tokens", kernel)

    patch_embeddings = returned(
        lambda vision: f"{vision.path}.patch_ln2.output",
        description="each token's pixels embedded (LayerNorm, linear, LayerNorm), [images, budget, hidden]",
    )
    position_embeddings = returned(
        lambda vision: f"{vision.path}.source.sum_0.output",
        description="the learned position of each token (an x and a y embedding summed), zero on padding",
    )
    # Read where the projector takes it: what the embedder returns beside the projection
    # is not what the projection was computed from, so a write there would land nowhere.
    tower_output = patches(
        lambda vision: f"{vision.path}.multimodal_embedder.input",
        read=_first_input,
        put=_put_first_input,
        description="the embedded tokens with their positions, normed (pos_norm), before the projector",
    )

    @property
    def num_layers(self) -> int:
        return 0

    vision_hidden_size = config_size("mm_embed_dim")
    patch_size = config_size("model_patch_size",
                             "The side in pixels of the square each token embeds (``patch_size * pooling_kernel_size``).")

    image_size = property(variable_resolution)
    num_heads = property(lambda vision: _no_blocks(vision, "num_heads"))
    head_dim = property(lambda vision: _no_blocks(vision, "head_dim"))
    intermediate_size = property(lambda vision: _no_blocks(vision, "intermediate_size"))

    @property
    def _vision_config(self) -> Any:
        return self.root._module.config.vision_config


#: The Gemma 4 tower's module classes onto its envoys.
gemma4_tower_envoys = tower_envoys(
    "gemma4", ("Gemma4VisionModel", "Gemma4VisionEncoderLayer", "Gemma4VisionAttention", "Gemma4VisionMLP"),
    vision=Gemma4Vision, attention=Gemma4VisionAttention, mlp=Gemma4VisionMlp)


def embedder_envoys(part: Any) -> dict[type, type]:
    """Gemma 4 unified's embedder onto its `Vision` with no blocks."""
    from transformers.models.gemma4_unified import modeling_gemma4_unified as unified

    return {unified.Gemma4UnifiedVisionEmbedder: Gemma4UnifiedVision}


#: Names inside the Gemma 4 tower, from the tower. Its blocks already use the standard
#: names; ``patch_embed`` is the patch projection, before positions are added.
TOWER_RENAME = {"encoder.layers": "layers", "patch_embedder.input_proj": "patch_embed"}


# -- Gemma 3n ---------------------------------------------------------------------------

#: Names inside Gemma 3n's tower, from the tower: the stem is the patch embedding.
GEMMA3N_RENAME = {"timm_model.conv_stem": "patch_embed"}

NO_BLOCKS = ("Gemma 3n's tower is timm's MobileNetV5: convolutional and multi-query-attention stages of "
             "different widths, with no standard block's shape (read vision.timm_model.blocks natively, or "
             "vision.patch_embeddings and vision.tower_output)")


def _grid_rows(raw: Any) -> torch.Tensor:
    """The fusion adapter's grid, ``[images, channels, k, k]``, as rows ``[images, k * k, channels]``."""
    return _hidden(raw).flatten(2).transpose(1, 2)


def _put_grid_rows(raw: Any, rows: torch.Tensor) -> Any:
    """``raw`` holding a copy of ``rows`` as its grid: the wrapper scales the grid in place,
    which must not reach the tensor the user holds."""
    grid = _hidden(raw)
    raw["last_hidden_state"] = rows.transpose(1, 2).reshape(grid.shape).to(grid.dtype, copy=True)
    return raw


def _convolutional(vision: Vision, size: str) -> Any:
    raise Unavailable(f"vision.{size} is unavailable: {NO_BLOCKS}")


class Gemma3nVision(Vision):
    """Gemma 3n's MobileNetV5 (``model.vision_tower``, a ``TimmWrapperModel``): no standard
    blocks; its output is the fusion adapter's ``k`` x ``k`` grid."""

    standard_children: dict = {}
    order = ("image_token_mask", "patch_embeddings", "tower_output", "image_features")
    refuses = {"layers": NO_BLOCKS}

    tower_output = value(
        "output",
        description="the fusion adapter's grid (msfa, normed), a token a row, [images, k * k, hidden], before "
                    "the wrapper scales it by sqrt(hidden) and projects it",
    )(lambda vision, raw: _grid_rows(raw).clone()).writes(
        lambda vision, raw, new: _put_grid_rows(raw, new)
    ).transform(lambda vision, view, raw: _put_grid_rows(raw, view))

    @property
    def num_layers(self) -> int:
        return 0

    @property
    def patch_embedding_size(self) -> int:
        """The stem's channels: what its strided 3 x 3 convolution embeds each position to."""
        return self._module.timm_model.conv_stem.conv.out_channels

    @property
    def image_size(self) -> int:
        """The side of the square the processor resizes every image to."""
        processor = self.root.processor
        if processor is None:
            raise Unavailable("vision.image_size is unavailable: a text-only load has no image processor")
        return int(processor.image_processor.size["height"])

    patch_size = property(lambda vision: _convolutional(vision, "patch_size"))
    num_heads = property(lambda vision: _convolutional(vision, "num_heads"))
    head_dim = property(lambda vision: _convolutional(vision, "head_dim"))
    qk_head_dim = property(lambda vision: _convolutional(vision, "qk_head_dim"))
    intermediate_size = property(lambda vision: _convolutional(vision, "intermediate_size"))


class Embedder(PerCall):
    """A Gemma 3n embedder, called on the prompt's ids (its range of the vocabulary has a
    table of its own), then where the input carries its medium on the soft tokens:
    ``input`` and ``output`` are those calls, in order. ``embed_vision`` (the projector) embeds
    the tower's grid once, what the scatter writes; ``embed_audio``, which shares the class,
    embeds the audio's frames and then its padding token (audio has no standard names, but
    its calls are counted right)."""

    def calls(self, inputs: dict) -> int:
        if self._module is self.root._module.model.embed_vision:
            return 1 + (inputs.get("pixel_values") is not None)
        audio = inputs.get("input_features") is not None and inputs.get("input_features_mask") is not None
        return 1 + 2 * audio


def gemma3n_refusal(part: Any) -> str | None:
    """A Gemma 3n whose timm tower is not a MobileNetV5 (transformers' own tests build one
    on a ViT): vlreg serves MobileNetV5's stem and fusion grid, and transformers' Gemma 3n
    reads any tower's output as such a grid (a ViT's patches come out transposed)."""
    architecture = str(getattr(part.config, "architecture", ""))
    if architecture.startswith("mobilenetv5"):
        return None
    return (f"its vision tower is timm's {architecture!r}, not a MobileNetV5: vlreg-gemma serves Gemma 3n's "
            f"MobileNetV5 (its stem as vision.patch_embeddings, its fusion adapter's grid as vision.tower_output), "
            f"and transformers' Gemma 3n reads any other tower's last_hidden_state as that grid, so a ViT's patches "
            f"come out transposed; load a checkpoint with the published tower (mobilenetv5_300m_enc)")


def gemma3n_tower_envoys(part: Any) -> dict[type, type]:
    """Gemma 3n's tower onto `Gemma3nVision`."""
    from transformers.models.timm_wrapper.modeling_timm_wrapper import TimmWrapperModel

    return {TimmWrapperModel: Gemma3nVision}


def gemma3n_wrapper_envoys(part: Any) -> dict[type, type]:
    """Gemma 3n's embedders onto `Embedder` (one of them is the projector)."""
    from transformers.models.gemma3n import modeling_gemma3n as gemma3n

    return {gemma3n.Gemma3nMultimodalEmbedder: Embedder}
