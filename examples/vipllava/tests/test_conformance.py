"""VipLLaVA against vlreg's conformance suite, run on the installed plugin."""

from vlreg.testing.conformance import VisionConformance

TOWER = "model.vision_tower"


class TestVipLlava(VisionConformance):
    """A CLIP tower and a Llama text model served by vlreg-llava; the projector reads two
    of the tower's three blocks, so the last block and the tower's output are read-only."""

    checkpoint = "vipllava"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.norm",
        "lm_head": "lm_head",
        "vision": TOWER,
        "projector": "model.multi_modal_projector",
        "vision.layers": f"{TOWER}.encoder.layers",
        "vision.patch_embed": f"{TOWER}.embeddings.patch_embedding",
        "vision.layers.0.input_layernorm": f"{TOWER}.encoder.layers.0.layer_norm1",
    }
