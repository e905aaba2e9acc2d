"""Step 3.7 at transformers 5.23's default widths, built on the meta device (no weights).

``Step3p7Config()`` is the class's defaults, read from it (Step-3.7-Flash's shape, as the class
documents it): a text model of 45 blocks, 4096 wide, 64 query heads over 8 key heads of 128
(every block full attention, so the heads agree), three dense blocks with an MLP 11264 wide,
then 8 of 288 experts 1280 wide beside shared experts 1280 wide; the tower of 47 blocks, 1536
wide, 16 heads, 14-pixel patches, an MLP 8960 wide; a projector from the convolutions' 6144."""

import transformers

from vlreg.testing.conformance import PublishedWidths


class TestStep3p7(PublishedWidths):
    config = transformers.Step3p7Config
    checkpoint = "step3p7"
    family = "step3p7"
    parts = {"text": ("step3p5", "vlreg-step3p7"), "vision": ("step3p5_vision", "vlreg-step3p7")}
    published = {
        "num_layers": 45, "hidden_size": 4096, "num_heads": 64, "num_kv_heads": 8, "head_dim": 128,
        "layers.0.mlp.intermediate_size": 11264, "layers.3.mlp.num_experts": 288, "layers.3.mlp.top_k": 8,
        "layers.3.mlp.intermediate_size": 1280, "layers.3.mlp.routed_scaling_factor": 1.0,
        "layers.3.mlp.shared_experts.down_proj.weight.shape": (4096, 1280),
        "vision.num_layers": 47, "vision.vision_hidden_size": 1536, "vision.num_heads": 16, "vision.head_dim": 96,
        "vision.intermediate_size": 8960, "vision.patch_size": 14,
        "projector.weight.shape": (4096, 6144),
    }
    refused = {"layers.3-44.mlp.expert_outputs": "a loop over experts", "vision.local_crops": "a second call"}
    aliases = {"model": {"vision": "model.vision_model", "projector": "model.multi_modal_projector"}}
