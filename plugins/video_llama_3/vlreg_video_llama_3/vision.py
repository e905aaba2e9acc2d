"""VideoLLaMA 3's tower (``VideoLlama3VisionModel``): SigLIP's blocks over every image's
patches packed in one ``[patches, hidden]`` row.

* ``embeddings`` projects each patch with a convolution over that patch alone
  (`vision.patch_embeddings`, served a row a patch); no learned positions: the attention
  rotates queries and keys by each patch's row and column;
* each block's attention calls the attention function once per image over ``cu_seqlens``
  (`vlreg.plugin.PerImageAttention` at its default locations, after the rotation);
* ``post_layernorm``, then ``pixel_unshuffle`` by each image's merge size (1 for images: the
  stream as it is), give `vision.tower_output`, which the projector outside the tower reads.
"""

from vlreg.plugin import PACKED_SIGLIP_RENAME, PackedVision, PerImageAttention, tower_envoys

RENAME = PACKED_SIGLIP_RENAME


class VideoLlama3Vision(PackedVision):
    """The packed SigLIP tower."""

    max_aspect_ratio = 200  # the image processor's smart_resize, Qwen2-VL's

    @property
    def spatial_merge_size(self) -> int:
        """The side of the block of patches an image token is: the image processor's
        ``merge_size`` (1 as published, a token a patch; the config holds none)."""
        return getattr(getattr(self.root.processor, "image_processor", None), "merge_size", 1)


envoys = tower_envoys(
    "video_llama_3",
    ("VideoLlama3VisionModel", "VideoLlama3VisionEncoderLayer", "VideoLlama3VisionAttention", "VideoLlama3VisionMLP"),
    vision=VideoLlama3Vision, attention=PerImageAttention)
