"""Step 3.7's tower (``Step3p7VisionModel``, ``step3p5_vision``): batch-first ``[views, patches,
hidden]``, CLIP-named blocks with layer scale, then two downsampling convolutions.

* ``embeddings`` projects each patch (`vision.patch_embeddings`) and adds the learned square
  grid of positions, bilinearly interpolated to the view's grid (`vision.position_embeddings`);
  ``pre_layernorm`` norms the sum before block 0;
* a block is pre-norm with layer scale (InternViT's)::

      h = x + lambda_1 * self_attn(layernorm_before(x))
      out = h + lambda_2 * mlp(layernorm_after(h))

  so ``attention_output`` and ``mlp_output`` are read where the block binds the products
  (nnsight's ``hidden_states_1`` and ``hidden_states_5``);
* the attention rotates queries and keys by each patch's row and column, then calls the
  attention function once over the view;
* ``downsampler1`` and ``downsampler2`` (3 x 3 convolutions of stride 2) fold the last block's
  grid into tokens, each over a 4 x 4 block of patches and 4 times as wide:
  `vision.tower_output`, which the projector (one linear map) reads.

The image processor cuts an image whose long side passes its global view's (``size``) or that
is elongated into local crops, which the model runs through the tower in a second call: the
tower's values would hold the global view's only, so such an image is refused by name.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import At, LearnedPositions, Vision, VisionAttention, VisionMlp, patches, tower_envoys

RENAME = {"embeddings.patch_embedding": "patch_embed", "layernorm_before": "input_layernorm",
          "layernorm_after": "post_attention_layernorm"}


def _block(envoy: Any) -> Any:
    return envoy.parent


def _bound(name: str):
    """The location of the value the block's forward binds to ``name``."""
    return lambda envoy: f"{_block(envoy).path}.source.{name}.output"


class ScaledAttention(VisionAttention):
    """The attention; ``attention_output`` is its output times the block's ``lambda_1``."""

    attention_output = patches(
        At(_bound("hidden_states_1"), inside=_block),
        description="what the attention adds to the stream (its output times lambda_1), [views, patches, hidden]",
    )


class ScaledMlp(VisionMlp):
    """The MLP; ``mlp_output`` is its output times the block's ``lambda_2``."""

    mlp_output = patches(
        At(_bound("hidden_states_5"), inside=_block),
        description="what the MLP adds to the stream (its output times lambda_2), [views, patches, hidden]",
    )


class Step3p7Vision(LearnedPositions, Vision):
    """The tower over each image's global view."""

    positions_module = "embeddings"
    positions_call = "self_interpolate_pos_encoding_0"
    positions_add_to_patches = False  # pre_layernorm norms the sum before block 0

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image the processor would cut into local crops (a second tower call)."""
        processor = getattr(self.root.processor, "image_processor", None)
        if processor is None or not processor.get_number_of_image_patches(height, width):
            return None
        side = processor.size["height"]
        return (f"the processor cuts a {width} x {height} image into local crops, which the model runs through the "
                f"tower in a second call that no tower value reads; resize it so its long side is at most {side} "
                f"pixels and at most 1.5 times its short side")


envoys = tower_envoys(
    "step3p7", ("Step3p7VisionModel", "Step3p7VisionEncoderLayer", "Step3p7VisionAttention", "Step3p7VisionMLP"),
    vision=Step3p7Vision, attention=ScaledAttention, mlp=ScaledMlp)
