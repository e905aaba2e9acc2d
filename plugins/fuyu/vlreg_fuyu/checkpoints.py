"""A tiny Fuyu checkpoint for tests: random weights, through the real ``FuyuProcessor``.

The tokenizer behaves as the published one where the processor depends on it: a unigram
model over pieces that mark a word's start with ``▁`` (a ``▁`` prepended to each text), in
which ``|SPEAKER|`` and ``|NEWLINE|`` are pieces of the vocabulary, not added tokens. The
processor encodes an image's placeholders and its ``<s>`` on their own and drops the first
piece, the ``▁`` such a tokenizer writes before them; a tokenizer that writes none would
lose a placeholder. A prompt without an image is encoded with ``<s>`` first by the
tokenizer's template (its post-processor), which survives a save and reload because the
saved tokenizer config asks for it (``add_bos_token``).

Fuyu's published checkpoint ships no chat template; the one here writes the user's text
alone and a newline, as Fuyu's prompts are written ("Generate a coco-style caption.\\n"):
the processor puts the image's placeholders before the text itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import CORPUS, TINY_TEXT

SPECIAL = ("<unk>", "<s>", "|ENDOFTEXT|")
PIECES = ("|SPEAKER|", "|NEWLINE|", "<0x04>")
CHAT_TEMPLATE = ("{% for message in messages %}{% if message['content'] is string %}{{ message['content'] }}"
                 "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
                 "{% endif %}{% endfor %}{% endif %}{{ '\\n' }}{% endfor %}")
#: The tiny processor: 8-pixel patches, images shrunk to fit 64 x 48 pixels (8 x 6 patches).
PATCH, SIZE = 8, {"height": 48, "width": 64}


def tokenizer() -> Any:
    """The tokenizer the module describes, trained on vlreg's corpus, the pieces of
    `PIECES` added to its unigram model's vocabulary."""
    import json

    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    trained = Tokenizer(models.Unigram())
    trained.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.UnigramTrainer(vocab_size=200, special_tokens=list(SPECIAL), unk_token="<unk>",
                                      show_progress=False)
    trained.train_from_iterator(list(CORPUS), trainer)
    state = json.loads(trained.to_str())
    state["model"]["vocab"] += [[piece, 0.0] for piece in PIECES]
    state["model"]["byte_fallback"] = False
    built = Tokenizer.from_str(json.dumps(state))
    bos = built.token_to_id("<s>")
    built.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                         special_tokens=[("<s>", bos)])
    built.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=built, bos_token="<s>", eos_token="|ENDOFTEXT|",
                                   unk_token="<unk>", add_bos_token=True)


def build_fuyu(path: Path, **overrides: Any) -> Path:
    """Write a random-weight FuyuForCausalLM checkpoint to ``path``: a Persimmon text model 64
    wide, 2 blocks, 4 heads of 16 with q/k LayerNorms and half of each head rotated; 8-pixel
    patches embedded by one linear map. ``overrides``: a ``text_config`` dict, other fields
    of the top-level config."""
    from transformers import FuyuConfig, FuyuImageProcessor, FuyuProcessor, GenerationConfig

    from vlreg.testing.checkpoints import save

    overrides = dict(overrides)
    tok = tokenizer()
    ids = {role: tok.convert_tokens_to_ids(token) for role, token in
           (("bos_token_id", "<s>"), ("eos_token_id", "|ENDOFTEXT|"), ("pad_token_id", "<unk>"))}
    text = {"model_type": "persimmon", **{k: v for k, v in TINY_TEXT.items() if k != "num_key_value_heads"},
            "vocab_size": len(tok), "hidden_act": "relu2", "qk_layernorm": True,
            "rope_parameters": {"rope_type": "default", "rope_theta": 25000.0, "partial_rotary_factor": 0.5},
            **ids, **overrides.pop("text_config", {})}
    config = FuyuConfig(text_config=text, patch_size=PATCH, num_channels=3,
                        image_token_id=tok.convert_tokens_to_ids("|SPEAKER|"), **overrides)
    tok.chat_template = CHAT_TEMPLATE  # FuyuProcessor keeps no template of its own: the tokenizer's is used
    processor = FuyuProcessor(image_processor=FuyuImageProcessor(size=SIZE, patch_size={"height": PATCH, "width": PATCH}),
                              tokenizer=tok)
    return save(Path(path), config, processor, GenerationConfig(**ids))


BUILDERS = {"fuyu": build_fuyu}
