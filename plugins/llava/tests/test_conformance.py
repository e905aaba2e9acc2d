"""The LLaVA shapes against the conformance suite the core ships."""

from vlreg.analysis import occlusion, tower_patterns
from vlreg.pictures import overlay
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, image

WRAPPER = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.norm",
    "lm_head": "lm_head",
    "vision": "model.vision_tower",
    "projector": "model.multi_modal_projector",
}
TOWER = {
    "vision.layers": "model.vision_tower.encoder.layers",
    "vision.patch_embed": "model.vision_tower.embeddings.patch_embedding",
    "vision.layers.0.self_attn": "model.vision_tower.encoder.layers.0.self_attn",
    "vision.layers.0.mlp": "model.vision_tower.encoder.layers.0.mlp",
    "vision.layers.0.input_layernorm": "model.vision_tower.encoder.layers.0.layer_norm1",
    "vision.layers.0.post_attention_layernorm": "model.vision_tower.encoder.layers.0.layer_norm2",
}


class TestLlavaInterleave(AnalysisConformance, VisionConformance):
    """SigLIP on Qwen2: the tower's post_layernorm norms the patches, so it is ``norm``."""

    checkpoint = "llava_interleave"
    native = {**WRAPPER, **TOWER, "vision.norm": "model.vision_tower.post_layernorm"}


class TestLlava15(AnalysisConformance, VisionConformance):
    """CLIP on Llama: CLIP's post_layernorm norms the pooled CLS row, so no ``norm``."""

    checkpoint = "llava_1_5"
    native = {**WRAPPER, **TOWER}


class TestLlavaNext(AnalysisConformance, VisionConformance):
    """CLIP on Mistral, with crops: the scatter receives the projector's output unpadded
    and with newline rows, so the projector's output is not the features."""

    checkpoint = "llava_next"
    native = {**WRAPPER, **TOWER}
    projector_output_is_features = False


class TestLlavaOnevision(AnalysisConformance, VisionConformance):
    """SigLIP on Qwen2, with crops: as NeXT, the scatter receives the projector's output
    unpadded, shrunk where the image has many tiles, and with newline rows."""

    checkpoint = "llava_onevision"
    native = {**WRAPPER, **TOWER, "vision.norm": "model.vision_tower.post_layernorm"}
    projector_output_is_features = False
    image_token = "<image>"


class TestLlavaPixtral(AnalysisConformance, VisionConformance):
    """Pixtral-12B's layout: LLaVA's wrapper over vlreg-mistral3's Pixtral tower. Two
    images of different shapes (64 x 48 and 32 x 64) make the tower pad the smaller for
    its convolution and pack both into one row after it."""

    checkpoint = "llava_pixtral"
    native = {
        **WRAPPER,
        "vision.layers": "model.vision_tower.transformer.layers",
        "vision.patch_embed": "model.vision_tower.patch_conv",
        "vision.layers.0.self_attn": "model.vision_tower.transformer.layers.0.attention",
        "vision.layers.0.mlp": "model.vision_tower.transformer.layers.0.feed_forward",
        "vision.layers.0.input_layernorm": "model.vision_tower.transformer.layers.0.attention_norm",
        "vision.layers.0.post_attention_layernorm": "model.vision_tower.transformer.layers.0.ffn_norm",
    }
    image_sizes = ((64, 48), (32, 64))
    image_token = "[IMG]"

    def test_a_small_picture_is_a_token_per_patch_and_draws(self, model):
        """50 x 30 is resized onto 64 x 32 pixels: 2 rows of 4 patches, a token each, which
        the tower's pattern and occlusion's scores cover and `overlay` draws on the picture."""
        picture = image(50, 30)
        prompt = self.image_prompt(model)
        (geometry,) = model.vision.geometry(prompt, [picture])
        assert geometry.tokens == 2 * 4
        assert tower_patterns(model, prompt, [picture]).patterns[0].shape[-1] == geometry.tokens
        scores = occlusion(model, prompt, [picture], batch=4).scores
        assert scores.shape == (geometry.tokens,)
        assert overlay(picture, geometry, scores, bar=False).size == picture.size   # unframed: the picture alone


class TestLlavaNextVideo(AnalysisConformance, VisionConformance):
    """LLaVA-NeXT-Video's images, as NeXT's: CLIP on Llama, crops unpadded with newline
    rows. Its videos are refused by the wrapper's claim (``support()["videos"]``)."""

    checkpoint = "llava_next_video"
    native = {**WRAPPER, **TOWER}
    projector_output_is_features = False


def _image_tower(paths: dict) -> dict:
    return {name: path.replace("model.vision_tower", "model.image_tower") for name, path in paths.items()}


class TestVideoLlava(AnalysisConformance, VisionConformance):
    """Video-LLaVA's images: the image tower (``model.image_tower``; the video tower beside
    it has no standard names), block -2 without the CLS row, on Llama. The processor hands
    the pixels on as ``pixel_values_images``."""

    checkpoint = "video_llava"
    native = {**_image_tower(WRAPPER), **_image_tower(TOWER)}


class TestVipLlava(AnalysisConformance, VisionConformance):
    """VipLLaVA: CLIP on Llama, the projector reading blocks 1 and 0 without their CLS rows
    (``vision_feature_layer`` a list), so the last block and the tower's output are read-only."""

    checkpoint = "vipllava"
    native = {**WRAPPER, **TOWER}
