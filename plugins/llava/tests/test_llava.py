"""What the LLaVA plugin promises beyond the conformance suite.

The three LLaVA shapes: where the projector reads (the stream ``vision_feature_layer``
selects, CLS dropped or not), what NeXT does between the projector and the scatter, the
tower's attention interior, the tower's sizes, and the chat formats the tiny checkpoints
stand for.

The plugin as a distribution: what it claims, that its adapters serve other wrappers,
and that it works with no other family installed.

The LLaVA lines built for videos are in ``test_llava_next_video.py``.
"""

from __future__ import annotations
import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable
from vlreg.core.host import plugins
from vlreg.plugin import Attention, Claim, Layer, Mlp, Scatter, Vision, VisionLayer, hookimpl
from vlreg.testing import registered, tokenizer
from vlreg.testing.conformance import image
from vlreg_llava import plugin

SHAPES = ("llava_interleave", "llava_1_5", "llava_next")
CLIP_SHAPES = ("llava_1_5", "llava_next")
QUESTION = "What is in this image?"


def image_prompt(model: StandardizedTransformer) -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def trace(model: StandardizedTransformer, size: tuple[int, int] = (112, 84)):
    return model.trace(image_prompt(model), images=[image(*size)])


# -- chat formats -------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        ("llava_interleave", "<|im_start|>user\n<image>\nWhat is in this image?<|im_end|>\n<|im_start|>assistant\n"),
        ("llava_1_5", "<s>USER: <image>\nWhat is in this image? ASSISTANT:"),
        ("llava_next", "<s>[INST] <image>\nWhat is in this image? [/INST]"),
    ],
)
def test_chat_template_gives_the_checkpoint_format(loaded, name, expected):
    model = loaded(name)
    assert image_prompt(model) == expected
    encoded = model.processor(text=expected, images=[image(112, 84)], return_tensors="pt")
    image_tokens = int((encoded["input_ids"] == model._module.config.image_token_id).sum())
    with model.trace(expected, images=[image(112, 84)]):
        features = model.vision.image_features.save()
    assert image_tokens == features.shape[0] > 1


CONVERSATION = [
    {"role": "system", "content": [{"type": "text", "text": "You are a helpful assistant."}]},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the picture."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "A red square."}]},
    {"role": "user", "content": "And the circle?"},
]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("llava_1_5", "<s>You are a helpful assistant. USER: <image>\nDescribe the picture. "
                      "ASSISTANT: A red square.</s>USER: And the circle? ASSISTANT:"),
        ("llava_next", "<s>[INST] You are a helpful assistant.\n\n<image>\nDescribe the picture. "
                       "[/INST] A red square.</s>[INST] And the circle? [/INST]"),
    ],
)
def test_chat_template_renders_a_conversation(loaded, name, expected):
    processor = loaded(name).processor
    assert processor.apply_chat_template(CONVERSATION, add_generation_prompt=True, tokenize=False) == expected


# -- where the projector reads --------------------------------------------------


def test_interleave_projects_the_last_block_before_post_layernorm(loaded):
    model = loaded("llava_interleave")
    with trace(model):
        last = model.vision.layers[-1].layer_output.save()
        normed = model.vision.norm.output.save()
        tower = model.vision.tower_output.save()
        fed = model.projector.input.save()
    assert torch.equal(fed, last)
    assert torch.equal(tower, normed), "tower_output is after SigLIP's post_layernorm"
    assert not torch.allclose(fed, tower)
    assert tower.shape[1] == (model.vision.image_size // model.vision.patch_size) ** 2


@pytest.mark.parametrize("name", CLIP_SHAPES)
def test_clip_shapes_project_block_minus_2_without_the_cls_row(loaded, name):
    model = loaded(name)
    with trace(model):
        patches = model.vision.patch_embeddings.save()
        second_last = model.vision.layers[-2].layer_output.save()
        last = model.vision.layers[-1].layer_output.save()
        tower = model.vision.tower_output.save()
        fed = model.projector.input.save()
    assert torch.equal(fed, second_last[:, 1:])
    assert torch.equal(tower, last), "CLIP's post_layernorm norms only the pooled CLS row"
    assert tower.shape[1] == patches.shape[1] + 1 == (model.vision.image_size // model.vision.patch_size) ** 2 + 1


def test_clip_tower_has_no_norm(loaded):
    for name in CLIP_SHAPES:
        model = loaded(name)
        assert "norm" not in model.vision._aliases
        with pytest.raises(AttributeError):
            model.vision.norm


def test_next_features_are_the_crops_unpadded_with_newline_rows(loaded):
    """NeXT runs the tower on the whole image resized to one crop, then on a grid of
    crops; the scatter receives the first crop's rows, then the grid's rows cut to the
    image's aspect, one newline row after each row of the grid."""
    model = loaded("llava_next")
    with trace(model, (112, 84)):
        tower = model.vision.tower_output.save()
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    crops, per_crop, hidden = projected.shape
    assert tower.shape[0] == crops > 1
    assert torch.equal(features[:per_crop], projected[0])
    newline = model._module.model.image_newline.detach()
    rest = features[per_crop:]
    is_newline = (rest == newline).all(-1)
    rows = int(is_newline.sum())
    assert rows > 0 and rest.shape[0] % rows == 0
    grid = rest.reshape(rows, -1, hidden)
    assert (grid[:, -1] == newline).all() and not (grid[:, :-1] == newline).all(-1).any()
    kept = grid[:, :-1].reshape(-1, hidden)
    from_crops = projected[1:].reshape(-1, hidden)
    assert (kept[:, None] == from_crops[None]).all(-1).any(-1).all(), "a grid row that no crop produced"
    assert kept.shape[0] < from_crops.shape[0], "nothing was unpadded"


# -- the tower's attention ----------------------------------------------------


@pytest.mark.parametrize("name", SHAPES)
def test_tower_pattern_is_a_distribution_over_patches_with_no_causal_mask(loaded, name):
    model = loaded(name)
    attention = model.vision.layers[0].self_attn
    with trace(model):
        queries = attention.attention_queries.save()
        pattern = attention.attention_probabilities.save()
        heads = attention.attention_head_outputs.save()
        output = attention.attention_output.save()
    images, patches = output.shape[:2]
    vision = model.vision
    assert tuple(queries.shape) == (images, vision.num_heads, patches, vision.head_dim)
    assert tuple(pattern.shape) == (images, vision.num_heads, patches, patches)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(images, vision.num_heads, patches))
    later = torch.ones(patches, patches, dtype=torch.bool).triu(1)
    assert (pattern[..., later] > 0).all(), "a patch does not attend to a later one"
    torch.testing.assert_close(attention.out_proj._module(heads.reshape(images, patches, -1)), output)


@pytest.mark.parametrize("name", SHAPES)
def test_tower_interior_asks_for_eager_otherwise(loaded, name):
    model = loaded(name, attn_implementation="sdpa")
    rows = model.support()
    for value in ("attention_scores", "attention_probabilities", "attention_queries"):
        assert "attn_implementation='eager'" in rows[f"vision.self_attn.{value}"]
    with pytest.raises(Unavailable, match="attn_implementation='eager'"):
        with trace(model):
            model.vision.layers[0].self_attn.attention_probabilities.save()
    with trace(model):
        out = model.vision.layers[0].layer_output.save()
        features = model.vision.image_features.save()
    assert out.shape[-1] == model.vision.vision_hidden_size and features.shape[-1] == model.hidden_size


# -- sizes --------------------------------------------------------------------


@pytest.mark.parametrize("name", SHAPES)
def test_tower_sizes_agree_with_its_weights(loaded, name):
    model = loaded(name)
    vision = model.vision
    weight = vision.patch_embed.weight
    assert vision.vision_hidden_size == weight.shape[0] != model.hidden_size
    assert vision.patch_size == weight.shape[-1]
    block = vision.layers[0]
    assert block.self_attn.q_proj.weight.shape[0] == vision.num_heads * vision.head_dim
    assert block.mlp.fc1.weight.shape[0] == vision.intermediate_size
    assert model.projector.linear_1.weight.shape[1] == vision.vision_hidden_size
    assert model.projector.linear_2.weight.shape[0] == model.hidden_size
    with trace(model):
        patches = vision.patch_embeddings.save()
    assert patches.shape[1:] == ((vision.image_size // vision.patch_size) ** 2, vision.vision_hidden_size)


# -- the plugin as a distribution ---------------------------------------------


CLAIMS = {
    Claim("wrapper", "llava"),
    Claim("wrapper", "llava_next"),
    Claim("wrapper", "vipllava"),
    Claim("wrapper", "llava_onevision"),
    Claim("wrapper", "llava_next_video"),
    Claim("wrapper", "video_llava"),
    Claim("text", "qwen2"),
    Claim("text", "llama"),
    Claim("text", "mistral"),
    Claim("vision", "siglip_vision_model"),
    Claim("vision", "clip_vision_model"),
}


def test_claims_are_the_installed_plugins_and_no_other_holds_them():
    assert set(plugin.vlreg_claims()) == CLAIMS
    held = plugins.claims()
    for claim in CLAIMS:
        assert held[(claim.kind, claim.model_type)] is plugin
    assert plugins.distribution(plugin).name == "vlreg-llava"


class Gemma3ByHand:
    """A third-party wrapper plugin: it claims Gemma 3's wrapper and text model and
    nothing about its SigLIP tower."""

    @hookimpl
    def vlreg_claims(self):
        # Overrides the Gemma 3 example where it is installed too (examples/ collected).
        return [Claim("wrapper", "gemma3", overrides="gemma3"), Claim("text", "gemma3_text", overrides="gemma3")]

    @hookimpl
    def vlreg_rename(self, part):
        if part.kind == "wrapper":
            return {
                "model.language_model.embed_tokens": "embed_tokens",
                "model.language_model.layers": "layers",
                "model.language_model.norm": "norm",
                "model.vision_tower": "vision",
                "model.multi_modal_projector": "projector",
            }
        return None

    @hookimpl
    def vlreg_envoys(self, part):
        from transformers.models.gemma3 import modeling_gemma3 as gemma3

        if part.kind == "text":
            return {gemma3.Gemma3DecoderLayer: Layer, gemma3.Gemma3Attention: Attention, gemma3.Gemma3MLP: Mlp}
        return None

    @hookimpl
    def vlreg_entry(self, part):
        return Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


def test_another_wrapper_reuses_the_siglip_tower_adapter():
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    config = Gemma3Config(
        text_config={"vocab_size": 300, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "image_size": 56, "patch_size": 14},
        mm_tokens_per_image=4, image_token_index=299, boi_token_index=298, eoi_token_index=297,
    )
    module = Gemma3ForConditionalGeneration(config).eval()
    by_hand = Gemma3ByHand()
    # any installed plugin serving Gemma 3 (vlreg-gemma, the example) steps aside for it
    others = [p for p in map(plugins.plugin_manager().get_plugin, ("gemma", "gemma3")) if p is not None]
    with registered(by_hand, name="gemma3-by-hand", replacing=others):
        with pytest.warns(UserWarning, match="no image reaches the model"):  # a text-generation load
            model = StandardizedTransformer(module, dispatch=True, tokenizer=tokenizer(["<pad>", "<eos>"]))
    assert model.family.plugins["vision"] is plugin
    assert model.family.plugins["wrapper"] is by_hand
    assert type(model.vision) is Vision
    assert model.vision._aliases == {
        "patch_embed": "embeddings.patch_embedding", "layers": "encoder.layers", "norm": "post_layernorm",
    }
    assert all(type(block) is VisionLayer for block in model.vision.layers)
    assert model.vision.layers[0]._aliases == {"input_layernorm": "layer_norm1", "post_attention_layernorm": "layer_norm2"}
    assert model.vision.vision_hidden_size == 32 and model.hidden_size == 64
    for block in model.layers:
        assert not set(block._aliases.values()) & {"layer_norm1", "layer_norm2", "post_layernorm"}
