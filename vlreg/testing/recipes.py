"""What most tiny checkpoint builders share, said once: `tiny` writes a checkpoint from its
recipe (special tokens, the family's real processor, the config's fields), and
`chat_template` writes the chat template of the families whose prompts are turns.

Most builders are the same shape: a tokenizer trained with the family's special tokens, the
family's real processor around it, a composite config whose text part takes the vocabulary
and the special ids, and a generation config that stops where the tokenizer does. A family
states the rows that differ (its tokens, processor, widths, token-id fields) and `tiny` does
the rest, writing what a hand-written builder would, byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .checkpoints import save, tokenizer

#: The tokenizer roles whose ids a text config and a generation config carry.
SPECIAL = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "pad_token": "pad_token_id"}


def tiny(
    path: str | Path,
    config: Callable[..., Any],
    processor: Callable[[Any], Any],
    *,
    tokens: tuple[str, ...],
    roles: dict[str, str],
    text: dict[str, Any],
    vision: dict[str, Any] | None = None,
    ids: dict[str, str] | None = None,
    fields: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    stops: dict[str, str] | None = None,
    special_at_root: bool = False,
    dtype: Any = None,
    weights: Callable[[Any], None] | None = None,
) -> Path:
    """Write a tiny checkpoint to ``path`` and return it.

    ``tokens`` are trained into the tokenizer first (`tokenizer`), ``roles`` name some of them
    (``{"eos_token": "<|im_end|>"}``); ``processor(tok)`` builds the family's real processor
    around it. The special ids are the ``bos_token``, ``eos_token`` and ``pad_token`` of
    ``stops`` where given (a model that stops at another token than its tokenizer's end),
    else of ``roles``. ``config`` (the family's config class) gets ``text_config`` (``text`` with the
    vocabulary's size and the special ids), ``vision_config`` (``vision``), a field per entry
    of ``ids`` (``{"image_token_index": "<image>"}``: the token's id; a tuple of tokens, their ids), ``fields``, the special
    ids too where ``special_at_root``, and last ``overrides``, a builder's keyword arguments
    (``text_config`` and ``vision_config`` dicts update those parts). The generation config
    carries the special ids that are set; the weights are random (`save`), in ``dtype``, then
    set by ``weights(model)`` where given (`save`).
    """
    from transformers import GenerationConfig

    overrides = dict(overrides or {})
    tok = tokenizer(tokens, **roles)
    token_ids = dict(zip(tokens, tok.convert_tokens_to_ids(list(tokens))))
    stops = roles if stops is None else stops
    special = {name: token_ids[stops[role]] if role in stops else None for role, name in SPECIAL.items()}
    parts = {"text_config": {"vocab_size": len(tok), **text, **special, **overrides.pop("text_config", {})}}
    if vision is not None:
        parts["vision_config"] = {**vision, **overrides.pop("vision_config", {})}
    found = config(**parts, **{field: token_ids[token] if isinstance(token, str) else [token_ids[t] for t in token]
                                for field, token in (ids or {}).items()},
                   **{**(fields or {}), **(special if special_at_root else {}), **overrides})
    generation = GenerationConfig(**{name: value for name, value in special.items() if value is not None})
    return save(Path(path), found, processor(tok), generation, dtype, weights)


def _literal(text: str) -> str:
    """``text`` as a Jinja string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def chat_template(turn: str, end: str, image: str, video: str | None = None, *, bos: bool = False) -> str:
    """A chat template of turns: each message as ``turn`` (``{role}`` in it is the message's
    role), then its content (a string as it is; a list of parts in order, an image as
    ``image``, a video as ``video``, a text as it is), then ``end``; the generation prompt
    opens an assistant turn. ``bos``: the tokenizer's BOS token first.

    ``chat_template("<|im_start|>{role}\\n", "<|im_end|>\\n", "<image>")`` is ChatML.
    """
    before, _, after = turn.partition("{role}")
    videos = "" if video is None else f"{{% elif part['type'] == 'video' %}}{{{{ {_literal(video)} }}}}"
    return (
        ("{{ bos_token }}" if bos else "")
        + f"{{% for message in messages %}}{{{{ {_literal(before)} + message['role'] + {_literal(after)} }}}}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
        f"{{% if part['type'] == 'image' %}}{{{{ {_literal(image)} }}}}{videos}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
        f"{{{{ {_literal(end)} }}}}{{% endfor %}}"
        f"{{% if add_generation_prompt %}}{{{{ {_literal(before + 'assistant' + after)} }}}}{{% endif %}}"
    )
