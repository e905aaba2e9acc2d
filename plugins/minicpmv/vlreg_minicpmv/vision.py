"""The MiniCPM-V tower: SigLIP's names over every slice packed in one row, attending per
slice, its grid halved after block ``insert_layer_id``.

Every slice of every image (an image's source image, then its slices) is one run of the
row ``[1, patches, hidden]``, each run its own patches in raster order; the attention
computes queries, keys and values for the whole row, then calls the attention function once
per slice over ``cu_seqlens`` and joins the results, as the Qwen ViT's does, so it serves
what the ``"qwen_vit"`` adapter's attention serves (`MiniCPMAttention`), read where this
forward prepares them (``transpose_0..2``).

After block ``insert_layer_id`` the tower calls its ``vit_merger``: a windowed attention over
2 x 2 patches, then an MLP folding each window into one row, so the blocks after it run on
a quarter of the rows, each row a 2 x 2 block of patches in raster order over the halved
grid (`MiniCPMVision.layer_fold`). With ``downsample_mode="4x"`` (MiniCPM-OCR's default) the
merger is skipped and every block runs on the patches. The learned positions (a square
table looked up at each slice's nearest cells) are added before block 0:
`MiniCPMVision.position_embeddings`, so that ``layers[0].input == patch_embeddings +
position_embeddings``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vlreg.plugin import Vision, VisionLayer, VisionMlp, adapter, as_patches, returned, value, variable_resolution

QWEN_VIT = adapter("qwen_vit")

#: Each tower's ``model_type`` -> (transformers module, class-name prefix).
TOWERS = {
    "minicpmv4_6_vision": ("minicpmv4_6", "MiniCPMV4_6"),
    "minicpmv4_7_vision": ("minicpmv4_7", "MiniCPMV4_7"),
    "minicpm_ocr_vision": ("minicpm_ocr", "MiniCPMOcr"),
}


def merges_mid_tower(config: Any) -> bool:
    """Whether the tower calls its ``vit_merger`` after block ``insert_layer_id`` (the
    wrapper's config: ``downsample_mode`` other than ``"4x"``)."""
    return config.downsample_mode != "4x" and config.insert_layer_id >= 0


class MiniCPMVision(Vision):
    """The MiniCPM-V tower (``model.vision_tower``): every slice packed in one row."""

    batch_axis = 1
    image_size = property(variable_resolution)
    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "tower_output",
             "image_features")

    position_embeddings = value(
        "embeddings.position_embedding.output",
        description="the learned positions looked up at each slice's nearest cells, added before block 0",
    )(lambda vision, raw: as_patches(raw)).writes(lambda vision, raw, new: new.reshape(raw.shape))

    def processor_refusal(self, processor: Any) -> str | None:
        """MiniCPM-OCR's ``small_image_upsize="adaptive"`` sizes each image and slice by its
        glyphs, measured with OpenCV: refused where OpenCV is not installed."""
        from transformers.utils import is_cv2_available

        if getattr(processor.image_processor, "small_image_upsize", None) != "adaptive" or is_cv2_available():
            return None
        return ("its image processor's small_image_upsize='adaptive' measures each image's glyphs with OpenCV (cv2), "
                "which is not installed: pass small_image_upsize='always' (the default) or 'never', or install "
                "opencv-python")

    def layer_fold(self, index: int) -> int:
        """Block ``index``'s rows are 2 x 2 patches after ``insert_layer_id`` where the
        ``vit_merger`` runs, else patches."""
        config = self.root._module.config
        return 2 if merges_mid_tower(config) and index > config.insert_layer_id else 1


#: Why no one pattern is served.
PER_SLICE = (
    "the attention runs once per slice (an image's source image and each of its slices), so no one tensor is "
    "the block's pattern; split attention_queries and attention_keys at self_attn.inputs[1]['cu_seqlens'], "
    "which self_attn.patterns(queries, keys, cu_seqlens) does, or call vlreg.analysis.tower_patterns"
)


class MiniCPMAttention(QWEN_VIT.Attention):
    """Queries, keys and values ``[1, heads, patches, head_dim]`` where the projections are
    split into heads; head outputs ``[1, patches, heads, head_dim]`` where the calls' outputs
    are joined; no one pattern (a call per slice: `patterns` computes them)."""

    refuses = {**QWEN_VIT.Attention.refuses, "attention_scores": PER_SLICE, "attention_probabilities": PER_SLICE}
    attention_queries = returned("source.transpose_0.output", description="the queries, split into heads")
    attention_keys = returned("source.transpose_1.output", description="the keys, split into heads")
    attention_values = returned("source.transpose_2.output", description="the values, split into heads")


#: The tower's names (SigLIP's, from the ``"siglip"`` adapter).
rename = adapter("siglip").rename


def envoys(part: Any) -> dict[type, type]:
    """The tower's classes, in its own modeling module, onto the envoys above."""
    module, prefix = TOWERS[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    found = {"VisionModel": MiniCPMVision, "VisionEncoderLayer": VisionLayer, "VisionAttention": MiniCPMAttention,
             "VisionMLP": VisionMlp}
    return {getattr(modeling, prefix + name): envoy for name, envoy in found.items()}
