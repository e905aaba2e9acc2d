"""Granite-Docling against the conformance suite the core ships: a SigLIP-shaped tower over
tiles and a thumbnail with the connector inside it, Granite blocks whose identity scales each
sublayer's output (`vlreg.plugin.ScaledResidualLayer`) and whose first blocks take DeepStack
taps, the embeddings read where the text model scales them."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import CLIP, SIGLIP, composite


class TestGraniteDocling(AnalysisConformance, VisionConformance):
    checkpoint = "granite_docling"
    native = composite(SIGLIP, text="model.text_model", vision="model.vision_model",
                       projector="model.vision_model.connector")
    # transformers' own forward cannot run with the whole tower offloaded (a meta tensor reaches
    # a copy): its blocks go to disk instead
    on_disk = "vision.layers"
    # one tile; two tiles and the thumbnail
    image_sizes = ((64, 64), (200, 120))


class TestGranite4Vision(AnalysisConformance, VisionConformance):
    """CLIP on Granite, LLaVA-NeXT's crops pooled by windowed Q-Formers, the features added
    before text blocks 0 and 1 (`vlreg.plugin.Injections`): the projector's output is
    unpadded and given newline rows, so it is not the features."""

    checkpoint = "granite4_vision"
    native = composite(CLIP, text="model.language_model", projector="model.layerwise_projectors.0")
    projector_output_is_features = False
    analysis_refuses = {"tower_patterns": "windowed Q-Former"}
