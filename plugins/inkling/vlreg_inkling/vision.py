"""Inkling 2's tower (``Inkling2VisionModel``): every image's rows packed in one
``[rows, hidden]`` sequence, **a class token before each image's patches**.

* ``embeddings`` embeds each patch (a linear map: `vision.patch_embeddings`), one image token's
  ``merge x merge`` patches after another (merge-block order, as the processor cuts them),
  adds a learned square grid of positions resampled bilinearly to the image, then lays each
  image's class token (``class_embedding + cls_position_embedding``) before its patches;
* ``pre_layernorm``, then blocks of InternViT's shape (``layernorm_before``, ``self_attn``,
  ``layernorm_after``, ``mlp``) whose sublayers are scaled by ``lambda_1`` and ``lambda_2``
  before the residual add: ``attention_output`` and ``mlp_output`` are the scaled outputs
  (read as the sublayer's output times its scale, written back divided by it);
* each block's attention calls the attention function once per image over ``cu_seqlens``
  (`vlreg.plugin.PerImageAttention` at its default locations), the class token in its image;
* the merger (``merger``, the projector, inside the tower) drops the class rows and folds each
  token's patches into one row of the text's width.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import (PackedVision, PerImageAttention, Unavailable, Vision, VisionMlp, config_size, first, modeling_envoys,
                          tower_envoys, value, with_first)

RENAME = {
    "embeddings.patch_embedding": "patch_embed",
    "layernorm_before": "input_layernorm",
    "layernorm_after": "post_attention_layernorm",
}


def _scaled(scale: str, description: str) -> value:
    """A sublayer's output times its block's ``scale`` (``lambda_1``, ``lambda_2``), as the
    stream adds it: read as that product, an edit written back divided by the scale (an
    unedited read leaves the model's own tensor). It carries no gradient (`_computed`)."""

    def factor(sublayer: Any) -> torch.Tensor:
        return getattr(sublayer.parent._module, scale)

    def put(sublayer: Any, raw: Any, new: torch.Tensor) -> Any:
        found = first(raw)
        new = new.reshape(found.shape)
        if torch.equal(new, found * factor(sublayer)):
            return raw
        return with_first(sublayer, raw, (new / factor(sublayer)).to(found.dtype))

    def read(sublayer: Any, raw: Any) -> torch.Tensor:
        with torch.no_grad():  # computed for reading: the model goes on with the unscaled output
            return (first(raw) * factor(sublayer)).unsqueeze(0)

    served = value("output", description=description)(read)
    return served.writes(put).transform(lambda sublayer, view, raw: put(sublayer, raw, view))


def _computed(scale: str, output: str):
    """``why_no_gradient`` of a sublayer whose scaled output vlreg computes for reading."""

    def why(sublayer: Any, name: str) -> str | None:
        if name != output:
            return None
        return (f"it is the sublayer's output times {scale}, computed for reading, which the model does not go on "
                f"to use, so no gradient reaches it; read output.grad (the gradient of the scaled output is it "
                f"divided by {scale})")

    return why


class ScaledAttention(PerImageAttention):
    """The tower's attention; ``attention_output`` is its output times the block's ``lambda_1``."""

    why_no_gradient = _computed("lambda_1", "attention_output")

    attention_output = _scaled("lambda_1", "what the attention adds to the stream (its output times lambda_1), "
                                           "[1, rows, hidden]")


class ScaledMlp(VisionMlp):
    """The tower's MLP; ``mlp_output`` is its output times the block's ``lambda_2``."""

    why_no_gradient = _computed("lambda_2", "mlp_output")

    mlp_output = _scaled("lambda_2", "what the MLP adds to the stream (its output times lambda_2), [1, rows, hidden]")


class Inkling2Vision(PackedVision):
    """The packed tower, a class token before each image's patches."""

    class_tokens = 1


envoys = tower_envoys(
    "inkling2", ("Inkling2VisionModel", "Inkling2VisionEncoderLayer", "Inkling2VisionAttention", "Inkling2VisionMLP"),
    vision=Inkling2Vision, attention=ScaledAttention, mlp=ScaledMlp)


def _no_blocks(vision: Vision, size: str) -> Any:
    raise Unavailable(f"vision.{size} is unavailable: {vision.without_blocks()}")


class Inkling1Vision(Vision):
    """Inkling 1's tower: folding layers, no blocks (`wrappers.INKLING1_REFUSES`), so no
    heads; its last layer projects to the text's width (``text_hidden_size``), which its
    output and so ``vision_hidden_size`` are (its config's ``hidden_size`` sizes nothing).
    Its constructor plans each layer's fold from tensors it reads the values of
    (``plan_out_scales``), which a lazy build runs on real tensors."""

    built_for_real = ("transformers.models.inkling.modeling_inkling.plan_out_scales",)

    vision_hidden_size = config_size("text_hidden_size", "The tower's output width: the text model's.")
    num_heads = property(lambda vision: _no_blocks(vision, "num_heads"))
    head_dim = property(lambda vision: _no_blocks(vision, "head_dim"))


inkling1_envoys = modeling_envoys("inkling", {"InklingVisionModel": Inkling1Vision})
