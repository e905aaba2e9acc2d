"""The special tokens a chat template writes around an image's placeholder (Qwen's
``<|vision_start|>`` and ``<|vision_end|>``), found by rendering the template, and the
warning for a prompt whose placeholder stands without them (`placeholders.check_placeholders`)."""

from __future__ import annotations

import warnings
import weakref
from typing import Any


def warn_unmarked(processor: Any, prompts: list, token: str) -> None:
    """Warn where a placeholder stands without the special tokens the chat template writes
    around an image (Qwen's ``<|vision_start|>`` and ``<|vision_end|>``): the model runs,
    off what it was trained on."""
    markers = image_markers(processor, token)
    if markers is None:
        return
    before, after = markers
    for prompt in prompts:
        at = prompt.find(token)
        while at >= 0:
            if not (prompt[:at].endswith(before) and prompt[at + len(token):].startswith(after)):
                warnings.warn(
                    f"an image placeholder {token!r} in the prompt stands without the markers the chat template "
                    f"writes around an image ({before}{token}{after}): the model runs, but off what it was trained "
                    f"on; write the prompt with the chat template's {{'type': 'image'}} entry",
                    stacklevel=5,
                )
                return
            at = prompt.find(token, at + len(token))


_MARKERS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def image_markers(processor: Any, token: str) -> tuple[str, str] | None:
    """The special tokens the processor's chat template writes right before and after an
    image's placeholder (``("<|vision_start|>", "<|vision_end|>")``), or ``None`` where it
    writes none (or has no template). Kept per processor."""
    try:
        return _MARKERS[processor]
    except (KeyError, TypeError):
        pass
    found = _markers(processor, token)
    try:
        _MARKERS[processor] = found
    except TypeError:  # not weakly referable: found again next time
        pass
    return found


def _markers(processor: Any, token: str) -> tuple[str, str] | None:
    """The special tokens next to the placeholder in the template's rendering of an image
    before a text and after one: only those beside it both ways mark the image (a turn's
    own token that happens to precede the first item does not)."""
    tokenizer = getattr(processor, "tokenizer", None)
    owner = next((part for part in (processor, tokenizer) if getattr(part, "chat_template", None)), None)
    if owner is None:
        return None
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    special |= {added.content for added in getattr(tokenizer, "added_tokens_decoder", {}).values() if added.special}
    special.discard(token)
    sides = []
    for content in ([{"type": "image"}, {"type": "text", "text": "Hello"}],
                    [{"type": "text", "text": "Hello"}, {"type": "image"}]):
        try:
            rendered = owner.apply_chat_template([{"role": "user", "content": content}], tokenize=False)
        except Exception:  # a template that takes no list of content
            return None
        at = rendered.find(token) if isinstance(rendered, str) else -1
        if at < 0:
            return None
        before = max((s for s in special if s and rendered[:at].endswith(s)), key=len, default="")
        after = max((s for s in special if s and rendered[at + len(token):].startswith(s)), key=len, default="")
        sides.append((before, after))
    (before, after), (again_before, again_after) = sides
    before, after = (before if before == again_before else ""), (after if after == again_after else "")
    return (before, after) if before or after else None
