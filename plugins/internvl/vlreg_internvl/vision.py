"""The InternViT tower (``internvl_vision``), as a vision part any wrapper can host.

Its layout, from the tower: ``embeddings`` (a class token, then the patch convolution's
rows, plus learned positions), ``encoder.layer`` of blocks, ``layernorm`` (an identity
under ``use_mean_pooling``, as InternVL's checkpoints set it). A block is pre-norm with
layer scale::

    h = x + lambda_1 * attention(layernorm_before(x))
    out = h + lambda_2 * mlp(layernorm_after(h))

so what a sublayer adds to the stream is its module's output times its lambda. Those
products are bound to names in the block's forward (``attention_output_0``,
``layer_output_3`` in nnsight's instrumentation of it), and `InternAttention` and
`InternMlp` read ``attention_output`` and ``mlp_output`` there: the block identity
``input + attention_output + mlp_output == layer_output`` holds, and a write to either
is what the stream adds. The modules' own outputs stay at ``self_attn.output`` and
``mlp.output``.

Qianfan-OCR's tower (``qianfan_ocr_vision``) is the InternViT with its classes renamed, its
blocks at ``layers`` and each product assigned to ``hidden_states`` (`QianfanAttention`,
`QianfanMlp`).

The class token is row 0 of every block's sequence (`Vision.class_tokens`); InternVL's
default strategy drops it before the pixel shuffle.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import At, Unavailable, Vision, VisionAttention, VisionMlp, patches, tower_envoys

TOWER_RENAME = {
    "embeddings.patch_embeddings.projection": "patch_embed",
    "encoder.layer": "layers",
    "attention": "self_attn",
    "layernorm_before": "input_layernorm",
    "layernorm_after": "post_attention_layernorm",
}
#: Qianfan-OCR's: its blocks are the tower's own ``layers``.
QIANFAN_RENAME = {name: standard for name, standard in TOWER_RENAME.items() if name != "encoder.layer"}


def _block(envoy: Any) -> Any:
    return envoy.parent


def _bound(name: str):
    """The location of the value the block's forward binds to ``name``."""
    return lambda envoy: f"{_block(envoy).path}.source.{name}.output"


class InternAttention(VisionAttention):
    """InternViT's attention; ``attention_output`` is its output scaled by the block's
    ``lambda_1``, as the stream adds it."""

    attention_output = patches(
        At(_bound("attention_output_0"), inside=_block),
        description="what the attention adds to the stream (its output times lambda_1), [images, patches, hidden]",
    )


class InternMlp(VisionMlp):
    """InternViT's MLP; ``mlp_output`` is its output scaled by the block's ``lambda_2``."""

    mlp_output = patches(
        At(_bound("layer_output_3"), inside=_block),
        description="what the MLP adds to the stream (its output times lambda_2), [images, patches, hidden]",
    )


class QianfanAttention(VisionAttention):
    """Qianfan-OCR's InternViT attention: its block scales the output into ``hidden_states``
    (nnsight's ``hidden_states_1``, not InternVL's ``attention_output_0``), read there."""

    attention_output = patches(
        At(_bound("hidden_states_1"), inside=_block),
        description="what the attention adds to the stream (its output times lambda_1), [images, patches, hidden]",
    )


class QianfanMlp(VisionMlp):
    """Qianfan-OCR's InternViT MLP: ``mlp_output`` is its output times ``lambda_2``, bound to
    ``hidden_states`` (``hidden_states_7``) in the block's forward."""

    mlp_output = patches(
        At(_bound("hidden_states_7"), inside=_block),
        description="what the MLP adds to the stream (its output times lambda_2), [images, patches, hidden]",
    )


def _square(envoy: Any, name: str) -> int:
    """A size the config keeps as (height, width), as one int: InternViT's are square."""
    height, width = getattr(envoy._vision_config, name)
    if height != width:
        raise Unavailable(f"vision.{name} is unavailable: this tower's is {height} x {width}, not square")
    return int(height)


class InternVision(Vision):
    """The InternViT: a class token before the patches; its config keeps the patch and
    image sizes as (height, width) pairs, served as one side."""

    class_tokens = 1

    @property
    def patch_size(self) -> int:
        return _square(self, "patch_size")

    @property
    def image_size(self) -> int:
        return _square(self, "image_size")


#: The InternViT's module classes onto its envoys.
internvl_envoys = tower_envoys(
    "internvl", ("InternVLVisionModel", "InternVLVisionLayer", "InternVLVisionAttention", "InternVLVisionMLP"),
    vision=InternVision, attention=InternAttention, mlp=InternMlp)

class QianfanVision(InternVision):
    """Qianfan-OCR's InternViT. Its constructor reads its drop-path rates off a
    ``torch.linspace`` with ``.item()``, which a lazy build (on the meta device) runs on
    real tensors (`built_for_real`)."""

    built_for_real = ("torch.linspace",)


#: Qianfan-OCR's InternViT (its classes renamed, its blocks at ``layers``, its layer scale
#: bound to ``hidden_states``) onto the same envoys but where the scaled outputs are read.
qianfan_envoys = tower_envoys(
    "qianfan_ocr", ("QianfanOCRVisionModel", "QianfanOCRVisionLayer", "QianfanOCRVisionAttention",
                    "QianfanOCRVisionMLP"),
    vision=QianfanVision, attention=QianfanAttention, mlp=QianfanMlp)
