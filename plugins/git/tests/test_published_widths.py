"""GIT at transformers 5.23's default widths (``GitConfig()``: microsoft/git-base's), built on
the meta device (no weights): a 6-block BERT-style stack 768 wide, 12 heads of 64, and a
12-block CLIP tower 768 wide over 16-pixel patches of a 224-pixel image (a class token and
14 x 14 patches: 197 tokens before every prompt)."""

import transformers

from vlreg.testing.conformance import PublishedWidths


class TestGitBase(PublishedWidths):
    config = transformers.GitConfig
    checkpoint = "git"
    family = "git"
    parts = {"text": ("git", "vlreg-git"), "vision": ("git_vision_model", "vlreg-git")}
    published = {
        "num_layers": 6, "hidden_size": 768, "num_heads": 12, "num_kv_heads": 12, "head_dim": 64,
        "intermediate_size": 3072, "vocab_size": 30522,
        "vision.num_layers": 12, "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.patch_size": 16,
        "projector.visual_projection.0.weight.shape": (768, 768),
        "layers.5.self_attn.o_proj.weight.shape": (768, 768), "layers.5.mlp.intermediate_size": 3072,
    }
    aliases = {"model": {"lm_head": "output", "layers": "git.encoder.layer"}}
