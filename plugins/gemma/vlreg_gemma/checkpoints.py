"""Tiny random-weight Gemma checkpoints, written to disk and loaded like real ones.

Each builder writes what a hub checkpoint holds: the config, random weights, a tokenizer
with the family's special tokens (`vlreg.testing.tokenizer`), the family's real processor
class and a chat template in the family's prompt format. Text models are 64 wide with 4
query heads over 2 key/value heads of 16 (`vlreg.testing.TINY_TEXT`; PaliGemma's over 1, as
on the real ones); towers are 32 wide, two blocks (`vlreg.testing.TINY_VISION`, 4 heads).

* ``gemma3``: SigLIP sees 56 x 56 pixels as 4 x 4 patches of 14, pooled 2 x 2 to 4 tokens;
  a sliding-window block (8 tokens), then a global one.
* ``shieldgemma2``: that Gemma 3 saved as ``ShieldGemma2ForImageClassification`` (under the
  classifier's ``model.``), with the real ShieldGemma2Processor and the classifier's prompt.
* ``paligemma`` (Gemma text) and ``paligemma2`` (Gemma 2 text, sliding then global): SigLIP
  on 56 x 56 pixels, a token per patch (16).
* ``gemma4``: the Gemma 4 tower on 4-pixel patches pooled 2 x 2 (8-pixel tokens) under the
  smallest budget (70 tokens, 280 patches); four text blocks (sliding, global, sliding,
  global) whose last two reuse the first two's keys and values, with per-layer inputs
  (PLE), learned ``layer_scalar``s other than 1, and image tokens that see each other on
  the sliding blocks (``use_bidirectional_attention="vision"``).
* ``gemma4_unified``: the embedder on 8-pixel tokens (4-pixel patches merged 2 x 2), 70 at
  most; three text blocks (sliding, sliding, global).
* ``gemma3n``: four text blocks as Gemma 4's (the last two reusing the first two's keys and
  values, per-layer inputs 8 wide) of four AltUp streams, a laurel of rank 8, the first
  block's MLP sparse (0.95) as the published first ten are; timm's MobileNetV5
  (``mobilenetv5_base``, channels x 1/8) on 64 x 64 pixels, its fusion adapter leaving a
  32-wide 2 x 2 grid (4 soft tokens an image; 16 x 16 on the published 768 x 768); a
  two-block audio conformer the checkpoint carries and vlreg refuses. The vocabulary is
  laid out as the published one: the text tokens, then the vision range (end-of-image, the
  image soft token), then the audio range; the per-layer inputs cover the text tokens.

Where a family's initialisation would hide the image (Gemma 3's zero projection) or an
effect the tests check (Gemma 4's unit ``layer_scalar``, Gemma 3n's zero AltUp correction
scale, which cuts the per-layer inputs off), the weight is drawn at random.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from vlreg.testing import CORPUS, TINY_TEXT, TINY_VISION, save, tokenizer

BOS, EOS, PAD = "<bos>", "<eos>", "<pad>"
TEXT = {**TINY_TEXT, "head_dim": 16}
SIGLIP = {
    "model_type": "siglip_vision_model",
    **TINY_VISION,
    "num_attention_heads": 4,
    "image_size": 56,
    "patch_size": 14,
    "vision_use_head": False,
}
#: SigLIP's side and patch on the tiny towers: 4 x 4 patches.
IMAGE_SIZE, PATCH_SIZE = 56, 14


def _ids(tok: Any, tokens: tuple[str, ...]) -> dict[str, int]:
    return dict(zip(tokens, tok.convert_tokens_to_ids(list(tokens))))


def _generation(ids: dict, *eos: str) -> Any:
    from transformers import GenerationConfig

    return GenerationConfig(eos_token_id=[ids[token] for token in eos], pad_token_id=ids[PAD], bos_token_id=ids[BOS])


def _texts(item: str = "item") -> str:
    """Jinja: the text parts of a message's content (a string, or a list of parts)."""
    return (
        "{% if message['content'] is string %}{{ message['content'] | trim }}"
        "{% else %}{% for " + item + " in message['content'] %}"
    )


# -- Gemma 3 --------------------------------------------------------------------

GEMMA3_TOKENS = (PAD, EOS, BOS, "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
                 "<image_soft_token>")

#: Gemma 3's turn format. A system message has no turn of its own: its text opens the
#: first user turn. Each image is written as the begin-of-image token, which the
#: processor expands into the image's soft tokens between begin and end markers.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% set preamble = namespace(text='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% set preamble.text = (message['content'] if message['content'] is string "
    "else message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('')) "
    "+ '\n\n' %}"
    "{% else %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' }}"
    "{% if message['role'] == 'user' %}{{ preamble.text }}{% set preamble.text = '' %}{% endif %}"
    + _texts() +
    "{% if item['type'] == 'image' %}<start_of_image>"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}"
    "{% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


GEMMA3_TOKENS_PER_IMAGE = 4  # 4 x 4 patches pooled 2 x 2


def _gemma3_parts(overrides: dict, processor_class: type, template: str, *words: str) -> tuple[Any, dict, dict]:
    """Gemma 3's processor (``words`` added to its tokenizer's corpus), token ids and config
    fields (``overrides`` in)."""
    from transformers import Gemma3ImageProcessor

    tok = tokenizer(GEMMA3_TOKENS, (*CORPUS, "user model user model", *words), bos_token=BOS, eos_token=EOS,
                    pad_token=PAD, boi_token="<start_of_image>", eoi_token="<end_of_image>",
                    image_token="<image_soft_token>")
    processor = processor_class(image_processor=Gemma3ImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}),
                                tokenizer=tok, chat_template=template, image_seq_length=GEMMA3_TOKENS_PER_IMAGE)
    ids = _ids(tok, GEMMA3_TOKENS)
    special = {"pad_token_id": ids[PAD], "eos_token_id": ids["<end_of_turn>"], "bos_token_id": ids[BOS]}
    fields = dict(
        text_config={**TEXT, "vocab_size": len(tok), "query_pre_attn_scalar": 32,
                     "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8, **special,
                     **overrides.pop("text_config", {})},
        vision_config={**SIGLIP, **overrides.pop("vision_config", {})},
        mm_tokens_per_image=GEMMA3_TOKENS_PER_IMAGE,
        boi_token_index=ids["<start_of_image>"],
        eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"],
        **overrides,
    )
    return processor, ids, fields


def build_gemma3(path: Path, **overrides: Any) -> Path:
    """Gemma3ForConditionalGeneration: scores scaled by ``query_pre_attn_scalar ** -0.5``
    with a scalar that is not the head width (as on 27B). ``overrides``: ``text_config``
    and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor

    processor, ids, fields = _gemma3_parts(overrides, Gemma3Processor, GEMMA3_TEMPLATE)
    torch.manual_seed(0)
    model = Gemma3ForConditionalGeneration(Gemma3Config(**fields)).eval()
    with torch.no_grad():
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(std=0.1)  # zero at init
    model.save_pretrained(path)
    processor.save_pretrained(path)
    _generation(ids, "<end_of_turn>", EOS).save_pretrained(path)
    return Path(path)


# -- ShieldGemma 2 ---------------------------------------------------------------

#: ShieldGemma 2's classifier prompt, in its published one's shape: the task, the image, the
#: turn's texts as the policy, the question; then the model's turn (Yes or No comes next).
SHIELDGEMMA2_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}<start_of_turn>model\n"
    + _texts() + "{% if item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>\n{% else %}"
    "<start_of_turn>user\nYou judge whether an image breaks the safety policy below, by its words alone.\n\n"
    "{% if message['content'] is not string %}"
    "{% for item in message['content'] if item['type'] == 'image' %}<start_of_image>{% endfor %}{% endif %}"
    "{{ '\\n\\nThe safety policy:\\n\\n* ' }}"
    + _texts() + "{% if item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "{{ '\\n\\nDoes the image break the policy? Answer Yes or No.<end_of_turn>\\n' }}"
    "{% endif %}{% endfor %}{{ '<start_of_turn>model\\n' }}"
)


def build_shieldgemma2(path: Path, **overrides: Any) -> Path:
    """The tiny Gemma 3 under a ShieldGemma2Config, saved as transformers saves ShieldGemma 2
    (``ShieldGemma2ForImageClassification``, the Gemma 3 model at ``model``), with the real
    ShieldGemma2Processor (its default policies). ``overrides`` as `build_gemma3`'s."""
    from transformers import ShieldGemma2Config, ShieldGemma2ForImageClassification, ShieldGemma2Processor

    processor, ids, fields = _gemma3_parts(overrides, ShieldGemma2Processor, SHIELDGEMMA2_TEMPLATE,
                                           "policy image safety Yes No Yes No Yes No")
    # the classifier reads its scores at the answer's first token, Yes or No (10784 and 3771 published)
    answers = processor.tokenizer.convert_tokens_to_ids(["Yes", "No"])
    fields = {"yes_token_index": answers[0], "no_token_index": answers[1], **fields}
    torch.manual_seed(0)
    classifier = ShieldGemma2ForImageClassification(ShieldGemma2Config(**fields)).eval()
    with torch.no_grad():
        classifier.model.model.multi_modal_projector.mm_input_projection_weight.normal_(std=0.1)  # zero at init
    classifier.save_pretrained(path)
    processor.save_pretrained(path)
    _generation(ids, "<end_of_turn>", EOS).save_pretrained(path)
    return Path(path)


# -- PaliGemma -------------------------------------------------------------------

PALIGEMMA_TOKENS = (PAD, EOS, BOS, "<image>")

#: PaliGemma is not a chat model: its prompt is the images, then the task prefix
#: ("caption en"); the processor puts ``<bos>`` after the last image and ends the prefix
#: with a newline. This template writes the messages' images, then their texts.
PALIGEMMA_TEMPLATE = (
    "{% for message in messages %}{% if message['content'] is not string %}"
    "{% for item in message['content'] if item['type'] == 'image' %}<image>{% endfor %}"
    "{% endif %}{% endfor %}"
    "{% for message in messages %}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for item in message['content'] if item['type'] == 'text' %}{{ item['text'] | trim }}{% endfor %}"
    "{% endif %}{% if not loop.last %} {% endif %}{% endfor %}"
)


def _paligemma(text_model: str, text_extra: dict):
    def build(path: Path, **overrides: Any) -> Path:
        from transformers import PaliGemmaConfig, PaliGemmaProcessor, SiglipImageProcessor

        tok = tokenizer(PALIGEMMA_TOKENS, bos_token=BOS, eos_token=EOS, pad_token=PAD, image_token="<image>")
        image_processor = SiglipImageProcessor(
            size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, image_mean=[0.5] * 3, image_std=[0.5] * 3
        )
        image_processor.image_seq_length = (IMAGE_SIZE // PATCH_SIZE) ** 2
        processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=tok, chat_template=PALIGEMMA_TEMPLATE)
        ids = _ids(tok, PALIGEMMA_TOKENS)  # after the processor added its <loc> and <seg> tokens
        special = {"pad_token_id": ids[PAD], "eos_token_id": ids[EOS], "bos_token_id": ids[BOS]}
        text = {**TEXT, "model_type": text_model, "num_key_value_heads": 1, "vocab_size": len(tok), **text_extra,
                **special, **overrides.pop("text_config", {})}
        config = PaliGemmaConfig(
            text_config=text,
            vision_config={**SIGLIP, **overrides.pop("vision_config", {})},
            image_token_index=ids["<image>"],
            projection_dim=text["hidden_size"],
            hidden_size=text["hidden_size"],
            vocab_size=len(tok),
            **overrides,
        )
        return save(path, config, processor, _generation(ids, EOS))

    build.__doc__ = (
        f"PaliGemmaForConditionalGeneration on a ``{text_model}`` text model, a token per SigLIP patch. "
        "``overrides``: ``text_config``/``vision_config`` dicts, other fields of the top-level config."
    )
    return build


# -- Gemma 4 ----------------------------------------------------------------------

GEMMA4_TOKENS = (PAD, EOS, BOS, "<|turn>", "<turn|>", "<|image>", "<image|>", "<|image|>", "<|audio>", "<audio|>",
                 "<|audio|>")

#: Gemma 4's turn format (``<|turn>role ... <turn|>``, the model's turns as ``model``); each
#: image is written as the image token, which the processor expands into the image's soft
#: tokens between begin- and end-of-image markers.
GEMMA4_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' }}"
    + _texts() +
    "{% if item['type'] == 'image' %}<|image|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}"
    "{% endif %}{% endfor %}{% endif %}"
    "<turn|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)
#: The tiny Gemma 4 image processors: 4-pixel patches, 2 x 2 to a token, the smallest budget.
GEMMA4_IMAGES = {"patch_size": 4, "pooling_kernel_size": 2, "max_soft_tokens": 70}


def _gemma4(unified: bool):
    def build(path: Path, **overrides: Any) -> Path:
        """Gemma 4 (or Gemma 4 unified) as the module describes. ``overrides``:
        ``text_config``/``vision_config`` dicts, other fields of the top-level config."""
        import transformers

        prefix = "Gemma4Unified" if unified else "Gemma4"
        tok = tokenizer(GEMMA4_TOKENS, (*CORPUS, "user model user model"), bos_token=BOS, eos_token=EOS,
                        pad_token=PAD, boi_token="<|image>", eoi_token="<image|>", image_token="<|image|>",
                        boa_token="<|audio>", eoa_token="<audio|>", audio_token="<|audio|>")
        feature_extractor = getattr(transformers, f"{prefix}AudioFeatureExtractor")()
        processor = getattr(transformers, f"{prefix}Processor")(
            feature_extractor=feature_extractor,
            image_processor=getattr(transformers, f"{prefix}ImageProcessor")(**GEMMA4_IMAGES),
            video_processor=getattr(transformers, f"{prefix}VideoProcessor")(**GEMMA4_IMAGES),
            tokenizer=tok,
            chat_template=GEMMA4_TEMPLATE,
            image_seq_length=GEMMA4_IMAGES["max_soft_tokens"],
        )
        ids = _ids(tok, (*GEMMA4_TOKENS, "<|video|>"))  # the processor adds <|video|>
        special = {"pad_token_id": ids[PAD], "eos_token_id": ids["<turn|>"], "bos_token_id": ids[BOS]}
        text = {**TEXT, "vocab_size": len(tok), "global_head_dim": 16, "sliding_window": 8, **special}
        if unified:
            text.update(num_hidden_layers=3, layer_types=["sliding_attention", "sliding_attention", "full_attention"])
            vision = {"patch_size": 4, "pooling_kernel_size": 2, "mm_embed_dim": 32, "mm_posemb_size": 64,
                      "output_proj_dims": 32}
        else:
            text.update(num_hidden_layers=4, num_kv_shared_layers=2, hidden_size_per_layer_input=8,
                        vocab_size_per_layer_input=len(tok), use_bidirectional_attention="vision",
                        layer_types=["sliding_attention", "full_attention"] * 2)
            vision = {**TINY_VISION, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 8, "patch_size": 4,
                      "pooling_kernel_size": 2, "position_embedding_size": 64}
        config = getattr(transformers, f"{prefix}Config")(
            text_config={**text, **overrides.pop("text_config", {})},
            vision_config={**vision, **overrides.pop("vision_config", {})},
            audio_config=None,
            image_token_id=ids["<|image|>"],
            boi_token_id=ids["<|image>"],
            eoi_token_id=ids["<image|>"],
            video_token_id=ids["<|video|>"],
            audio_token_id=ids["<|audio|>"],
            boa_token_id=ids["<|audio>"],
            eoa_token_index=ids["<audio|>"],
            **overrides,
        )
        torch.manual_seed(0)
        model = getattr(transformers, f"{prefix}ForConditionalGeneration")(config).eval()
        with torch.no_grad():
            for block in model.model.language_model.layers:
                block.layer_scalar.uniform_(0.5, 1.5)
        model.save_pretrained(path)
        processor.save_pretrained(path)
        _generation(ids, "<turn|>", EOS).save_pretrained(path)
        return Path(path)

    return build


# -- Gemma 3n ---------------------------------------------------------------------

GEMMA3N_TOKENS = (PAD, EOS, BOS, "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<start_of_audio>")
#: After the text vocabulary, in this order: the vision range, then the audio range.
GEMMA3N_RANGES = ("<end_of_image>", "<image_soft_token>", "<end_of_audio>", "<audio_soft_token>")
#: Gemma 3's turns, an image written as the image soft token (the processor expands it
#: between begin- and end-of-image markers), an audio as the audio soft token.
GEMMA3N_TEMPLATE = GEMMA3_TEMPLATE.replace(
    "{% if item['type'] == 'image' %}<start_of_image>",
    "{% if item['type'] == 'image' %}<image_soft_token>{% elif item['type'] == 'audio' %}<audio_soft_token>",
)
#: The tiny MobileNetV5: its side in pixels, and its fusion adapter's grid (GRID x GRID tokens).
GEMMA3N_IMAGE, GRID = 64, 2


def build_gemma3n(path: Path, **overrides: Any) -> Path:
    """Gemma3nForConditionalGeneration as the module describes. ``overrides``:
    ``text_config``, ``vision_config`` and ``audio_config`` dicts, other fields of the
    top-level config."""
    from transformers import (Gemma3nAudioFeatureExtractor, Gemma3nConfig, Gemma3nForConditionalGeneration,
                              Gemma3nProcessor, SiglipImageProcessor)

    tok = tokenizer(GEMMA3N_TOKENS, (*CORPUS, "user model user model"), bos_token=BOS, eos_token=EOS, pad_token=PAD)
    text_tokens = len(tok)
    tok.add_special_tokens({"additional_special_tokens": [*GEMMA3N_TOKENS[3:], *GEMMA3N_RANGES]})
    roles = dict(boi_token="<start_of_image>", eoi_token="<end_of_image>", image_token="<image_soft_token>",
                 boa_token="<start_of_audio>", eoa_token="<end_of_audio>", audio_token="<audio_soft_token>")
    tok = type(tok)(tokenizer_object=tok.backend_tokenizer, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                    extra_special_tokens=roles)
    ids = _ids(tok, (*GEMMA3N_TOKENS, *GEMMA3N_RANGES))
    assert [ids[token] for token in GEMMA3N_RANGES] == list(range(text_tokens, text_tokens + 4))
    # MobileNetV5 takes pixels in [0, 1] (the published processor's mean 0 and std 1)
    images = SiglipImageProcessor(size={"height": GEMMA3N_IMAGE, "width": GEMMA3N_IMAGE}, image_mean=[0.0] * 3,
                                  image_std=[1.0] * 3)
    processor = Gemma3nProcessor(feature_extractor=Gemma3nAudioFeatureExtractor(feature_size=16),
                                 image_processor=images, tokenizer=tok, chat_template=GEMMA3N_TEMPLATE,
                                 image_seq_length=GRID * GRID, audio_seq_length=4)
    special = {"pad_token_id": ids[PAD], "eos_token_id": ids["<end_of_turn>"], "bos_token_id": ids[BOS]}
    text = {**TEXT, "num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2,
            "sliding_window": 8, "num_kv_shared_layers": 2, "hidden_size_per_layer_input": 8, "laurel_rank": 8,
            "altup_num_inputs": 4, "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0],
            "vocab_size": text_tokens + 4, "vocab_size_per_layer_input": text_tokens, **special}
    vision = {"architecture": "mobilenetv5_base", "hidden_size": TINY_VISION["hidden_size"], "vocab_size": 2,
              "vocab_offset": text_tokens, "model_args": {"channel_multiplier": 0.125, "msfa_output_resolution": GRID,
                                                          "num_features": TINY_VISION["hidden_size"]}}
    audio = {"hidden_size": 32, "input_feat_size": 16, "conf_num_attention_heads": 2, "conf_num_hidden_layers": 2,
             "sscp_conv_channel_size": [8, 4], "vocab_size": 2, "vocab_offset": text_tokens + 2}
    config = Gemma3nConfig(
        text_config={**text, **overrides.pop("text_config", {})},
        vision_config={**vision, **overrides.pop("vision_config", {})},
        audio_config={**audio, **overrides.pop("audio_config", {})},
        vision_soft_tokens_per_image=GRID * GRID, audio_soft_tokens_per_image=4,
        boi_token_id=ids["<start_of_image>"], eoi_token_id=ids["<end_of_image>"],
        image_token_id=ids["<image_soft_token>"], boa_token_id=ids["<start_of_audio>"],
        eoa_token_id=ids["<end_of_audio>"], audio_token_id=ids["<audio_soft_token>"],
        **overrides,
    )
    torch.manual_seed(0)
    model = Gemma3nForConditionalGeneration(config).eval()
    with torch.no_grad():
        for block in model.model.language_model.layers:
            block.altup.correct_output_scale.uniform_(0.5, 1.5)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    _generation(ids, "<end_of_turn>", EOS).save_pretrained(path)
    return Path(path)


BUILDERS = {
    "gemma3": build_gemma3,
    "shieldgemma2": build_shieldgemma2,
    "paligemma": _paligemma("gemma", {}),
    "paligemma2": _paligemma("gemma2", {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8,
                                        "query_pre_attn_scalar": 32}),
    "gemma4": _gemma4(unified=False),
    "gemma4_unified": _gemma4(unified=True),
    "gemma3n": build_gemma3n,
}
