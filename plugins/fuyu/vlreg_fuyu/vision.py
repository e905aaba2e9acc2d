"""Fuyu's vision part: one linear map from each patch's pixels to the text width.

``model.vision_embed_tokens`` (an ``nn.Linear`` of ``patch_size**2 * num_channels`` inputs)
runs once on every image's patches packed into one row, ``[patches, pixels]``, in the
order the placeholders come; what it returns is what the wrapper scatters. There are no
blocks, no norm and no projector after it, so its output is `tower_output` (as
`vlreg.plugin.as_patches` serves a packed row: ``[1, patches, hidden]``) and
``vision.patch_embeddings`` is refused as the same tensor under another name.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Unavailable, Vision, patches, variable_resolution

NO_TOWER = ("Fuyu has no vision tower: one linear map (model.vision_embed_tokens) embeds each patch's pixels at "
            "the text width and nothing follows it, so its output is vision.tower_output; read that")


def _no_tower(vision: Vision, size: str) -> Any:
    raise Unavailable(f"vision.{size} is unavailable: {NO_TOWER}")


class FuyuVision(Vision):
    """``model.vision_embed_tokens``: a `Vision` with no blocks, its config the wrapper's."""

    standard_children: dict = {}
    order = ("image_token_mask", "patch_embeddings", "tower_output", "image_features")
    refuses = {"patch_embeddings": NO_TOWER}
    writes_placeholders = True  # the processor writes the image's placeholders before the prompt's text

    tower_output = patches(
        read=lambda raw: raw,
        put=lambda raw, new: new,
        description="each patch's pixels embedded at the text width (one linear map), [1, patches, hidden], every "
                    "image's patches in one row",
    )

    def image_refusal(self, width: int, height: int) -> str | None:
        """A side the processor's shrinking leaves no pixel of."""
        from .geometry import scaled

        processor = self.root.processor
        if processor is None:
            return None
        new_w, new_h = scaled(processor, width, height)
        if min(new_w, new_h) >= 1:
            return None
        size = processor.image_processor.size
        return (f"the processor shrinks it to fit {size['width']} x {size['height']} pixels, to {new_w} x {new_h}: a "
                f"side of no pixels; pass an image closer to square (pad it)")

    @property
    def _vision_config(self) -> Any:
        return self.root._module.config

    @property
    def num_layers(self) -> int:
        return 0

    @property
    def vision_hidden_size(self) -> int:
        """The width the linear map embeds a patch at: the text model's."""
        return int(self._module.out_features)

    patch_embedding_size = property(lambda vision: _no_tower(vision, "patch_embedding_size"))
    image_size = property(variable_resolution)
    num_heads = property(lambda vision: _no_tower(vision, "num_heads"))
    head_dim = property(lambda vision: _no_tower(vision, "head_dim"))
    qk_head_dim = property(lambda vision: _no_tower(vision, "qk_head_dim"))
    intermediate_size = property(lambda vision: _no_tower(vision, "intermediate_size"))


#: The wrapper's linear map onto `FuyuVision`, by its path (its class is a plain ``nn.Linear``).
envoys = {"model.vision_embed_tokens": FuyuVision}
