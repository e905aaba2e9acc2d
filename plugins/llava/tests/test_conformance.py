"""The LLaVA shapes against the conformance suite the core ships."""

from vlreg.analysis import occlusion, tower_patterns
from vlreg.pictures import overlay
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, image
from vlreg.testing.conformance.native import CLIP, PIXTRAL, SIGLIP, composite

class TestLlavaInterleave(AnalysisConformance, VisionConformance):
    """SigLIP on Qwen2: the tower's post_layernorm norms the patches, so it is ``norm``."""

    checkpoint = "llava_interleave"
    native = composite(SIGLIP)


class TestLlava15(AnalysisConformance, VisionConformance):
    """CLIP on Llama: CLIP's post_layernorm norms the pooled CLS row, so no ``norm``."""

    checkpoint = "llava_1_5"
    native = composite(CLIP)


class TestLlavaNext(AnalysisConformance, VisionConformance):
    """CLIP on Mistral, with crops: the scatter receives the projector's output unpadded
    and with newline rows, so the projector's output is not the features."""

    checkpoint = "llava_next"
    native = composite(CLIP)
    projector_output_is_features = False


class TestLlavaOnevision(AnalysisConformance, VisionConformance):
    """SigLIP on Qwen2, with crops: as NeXT, the scatter receives the projector's output
    unpadded, shrunk where the image has many tiles, and with newline rows."""

    checkpoint = "llava_onevision"
    native = composite(SIGLIP)
    projector_output_is_features = False
    image_token = "<image>"


class TestLlavaPixtral(AnalysisConformance, VisionConformance):
    """Pixtral-12B's layout: LLaVA's wrapper over vlreg-mistral3's Pixtral tower. Two
    images of different shapes (64 x 48 and 32 x 64) make the tower pad the smaller for
    its convolution and pack both into one row after it."""

    checkpoint = "llava_pixtral"
    native = composite(PIXTRAL)
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
    rows; a video's frames through the same tower, pooled before the projector."""

    checkpoint = "llava_next_video"
    native = composite(CLIP)
    projector_output_is_features = False


class TestVideoLlava(AnalysisConformance, VisionConformance):
    """Video-LLaVA's images: the image tower (``model.image_tower``; the video tower beside
    it has no standard names), block -2 without the CLS row, on Llama. The processor hands
    the pixels on as ``pixel_values_images``."""

    checkpoint = "video_llava"
    native = composite(CLIP, vision="model.image_tower")


class TestVipLlava(AnalysisConformance, VisionConformance):
    """VipLLaVA: CLIP on Llama, the projector reading blocks 1 and 0 without their CLS rows
    (``vision_feature_layer`` a list), so the last block and the tower's output are read-only."""

    checkpoint = "vipllava"
    native = composite(CLIP)
