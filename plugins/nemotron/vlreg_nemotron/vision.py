"""RADIO, NemotronH Omni's tower, and what the wrapper does with its output.

The wrapper hands the tower every image's patches flattened into one packed row with
each image's grid (``image_grid_hw``); the tower projects them (`patch_embeddings`), adds
its learned position grid resampled to the image's grid (`position_embeddings`) and puts
its summary (``num_cls_tokens``) and register (``num_registers``) tokens before each
image's patches, so its stream is ``[1, sum over images of (prefix + patches), hidden]``,
and one image attends only to itself. With one image, ``vision.layers[0].input[:,
class_tokens:] == patch_embeddings + position_embeddings``. The wrapper keeps the
patches, folds each 2 x 2 block of them into one token (the pixel shuffle) and projects
the tokens (``model.projector``).

The blocks scale each sublayer's output before the stream adds it (``layer_scale1``,
``layer_scale2``; C-RADIO's scale is 1), so ``attention_output`` and ``mlp_output`` are
read where the block scales them: what the stream adds. ``tower_output`` is the last
block's stream as the tower's encoder returns it, which the wrapper's features are cut
from (the tower's own ``last_hidden_state`` is a copy taken after that).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import (
    At,
    Gate,
    Vision,
    VisionAttention,
    VisionLayer,
    VisionMlp,
    as_patches,
    eager_only,
    inside,
    modeling_envoys,
    patches,
    returned,
    value,
    variable_resolution,
)

#: Names from the tower (the patch embedding is mounted by the wrapper, as ``embeddings``
#: is also the text model's token embedding).
RENAME = {"encoder.layer": "layers", "attention": "self_attn"}


def _block(envoy: Any) -> Any:
    return envoy.parent


def _heads(attention: Any, flat: Any) -> Any:
    return flat.view(*flat.shape[:-1], -1, attention.head_dim)


def images_in_this_trace(envoy: Any) -> int:
    """How many images the model is called with in this trace: the rows of the
    processor's ``image_grid_hw`` among the keyword inputs the host keeps for the run."""
    grids = envoy.run.inputs.get("image_grid_hw")
    return 0 if grids is None else len(grids)


def _one_image(why: str) -> Gate:
    """A gate for a value formed only where a trace holds one image: ``why`` says what
    several images are run through instead."""
    return Gate(lambda asked: f"{why}; read it in a trace with one image" if images_in_this_trace(asked.envoy) > 1
                else None)


def _positions(vision: Any) -> str:
    """The resampling of the position grid, two calls down the embedding's forward; its
    first call is the first image's. nnsight sources nested calls in the trace, by
    waiting for each call to start, so this must run before the embedding does."""
    embed = vision.patch_embed.source.self_embed_image_0.source.self__embed_packed_patches_0
    return inside(embed, "self__interpolate_position_embedding_0.output")


def _projection(vision: Any) -> str:
    # The projection runs inside the same nested calls as the resampling: source them
    # now, so the positions can still be read after the patches.
    _positions(vision)
    return f"{vision.patch_embed.path}.patch_projection.output"


class RadioVision(Vision):
    """The RADIO tower: summary and register tokens before each image's patches."""

    grid_input = "image_grid_hw"

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image so far from square that fitting it to the processor's budget of patches
        leaves its shorter side none, which the processor divides by."""
        image_processor = getattr(self.root.processor, "image_processor", None)
        if not hasattr(image_processor, "min_num_patches"):
            return None
        from transformers.models.nemotron_h_omni.image_processing_nemotron_h_omni import get_patch_grid_size

        ip = image_processor
        merge = round(1 / ip.downsample_ratio)
        budget = max((ip.max_model_len - 4) * merge**2, ip.min_num_patches)  # one image's, as the processor sets it
        budget = max(min(budget, ip.max_num_patches) if ip.max_num_patches else budget, ip.min_num_patches)
        try:
            get_patch_grid_size(height, width, ip.patch_size, merge, ip.min_num_patches, budget)
        except ZeroDivisionError:
            return (f"the processor fits each image to at most {budget} patches of {ip.patch_size} pixels, which "
                    f"leaves this one's shorter side no patch: pass an image closer to square (pad it)")
        return None
    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "tower_output", "image_features")
    refuses = {"position_embeddings": _one_image("the grid is resampled for each image in a call of its own")}

    patch_embeddings = value(
        _projection,
        description="each patch projected, before the learned positions, every image's packed in one row",
    )(lambda vision, raw: as_patches(raw)).writes(lambda vision, raw, new: new.reshape(raw.shape))
    position_embeddings = value(
        At(_positions, inside=lambda vision: vision.patch_embed),
        description="the learned position grid resampled to the image's grid, added to its patches (one image a trace)",
    )(lambda vision, raw: raw).writes(lambda vision, raw, new: new.reshape(raw.shape))
    tower_output = patches(
        lambda vision: f"{vision.path}.encoder.output",
        read=lambda raw: raw.last_hidden_state,
        put=lambda raw, new: raw.__setitem__("last_hidden_state", new) or raw,
        description="the last block's stream, as the tower's encoder returns it (RADIO has no final norm)",
    )

    @property
    def class_tokens(self) -> int:
        """The summary and register tokens before each image's patches."""
        return self._vision_config.num_cls_tokens + self._vision_config.num_registers

    @property
    def intermediate_size(self) -> int:
        return self.layers[0].mlp.intermediate_size

    image_size = property(variable_resolution)



class RadioAttention(VisionAttention):
    """A RADIO block's attention. Queries, keys and values are read where the forward
    forms them and the head outputs where ``o_proj`` takes them, so they are served
    under any attention implementation and any number of images; the scores and the
    pattern are the eager function's, formed where a trace holds one image (with
    several, each image attends to itself in a call of its own)."""

    refuses = dict.fromkeys(("attention_scores", "attention_probabilities"), (eager_only, _one_image(
        "with several images the tower attends within each image in a call of its own and forms no one pattern")))

    attention_queries = returned("source.transpose_0.output", description="the queries, [1, heads, patches, head_dim]")
    attention_keys = returned("source.transpose_1.output", description="the keys, [1, heads, patches, head_dim]")
    attention_values = returned("source.transpose_2.output", description="the values, [1, heads, patches, head_dim]")
    attention_head_outputs = value(
        lambda attention: f"{attention.o_proj.path}.input",
        description="each head's output as o_proj receives it, [1, patches, heads, head_dim]",
    )(lambda attention, raw: _heads(attention, raw[0][0])).writes(
        lambda attention, raw, new: ((new.reshape(raw[0][0].shape), *raw[0][1:]), raw[1])
    )
    attention_output = patches(
        lambda attention: f"{_block(attention).path}.layer_scale1.output",
        description="what the attention adds to the stream (after the layer scale), [images, patches, hidden]",
    )



class RadioMlp(VisionMlp):
    """A RADIO block's MLP, its output read after the layer scale."""

    mlp_output = patches(
        lambda mlp: f"{_block(mlp).path}.layer_scale2.output",
        description="what the MLP adds to the stream (after the layer scale), [images, patches, hidden]",
    )


envoys = modeling_envoys("radio", {"RadioModel": RadioVision, "RadioLayer": VisionLayer, "RadioAttention": RadioAttention,
                                   "RadioMLP": RadioMlp, "RadioSwiGLUFFN": RadioMlp})
