"""Each image's prompt, as the model is given it, and its id.

A prompt that holds any of the tokenizer's special tokens (``<|im_start|>``, the image
token ``<|image_pad|>`` or ``<image>``) is a full prompt, used as it is, as ``model.trace``
takes it. Plain text is the user's turn: the processor's chat template (or, where the
processor keeps none, the tokenizer's: BLIP-2's) places the image before it (the text may
be empty: the image alone), as the README's first trace writes it. A prompt must then hold
exactly one image, since `collect` gives each prompt one. Where the processor writes each
image's placeholders itself (`Vision.writes_placeholders`: Florence-2, BLIP-2), a prompt
holds none: a task token (``"<CAPTION>"``) or plain text is the whole prompt. A video's
prompt is made the same way with the video in the image's place, and must hold exactly one
video placeholder (``<|video_pad|>``) and no image's.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..core.images.placeholders import placeholder_token
from .sources import Item
from .videos import video_placeholder


def source(prompt: Any, prompt_column: str | None) -> str:
    """How the prompt is chosen, as the manifest records it."""
    if prompt_column is not None:
        return f"the dataset's column {prompt_column!r}" + (f", wrapped: {prompt!r}" if prompt else "")
    if callable(prompt):
        return f"a function, {getattr(prompt, '__qualname__', type(prompt).__name__)}"
    return "" if prompt is None else str(prompt)


def text_of(item: Item, prompt: Any, prompt_column: str | None) -> str:
    """The text the user gave for ``item``'s prompt, before wrapping."""
    if prompt_column is not None:
        if prompt_column not in item.record:
            raise ValueError(f"prompt_column={prompt_column!r} is not a column of the dataset; it has "
                             f"{', '.join(k for k in item.record if k != 'image')}")
        return str(item.record[prompt_column])
    if callable(prompt):
        return str(prompt(item.record))
    return "" if prompt is None else str(prompt)


class Prompts:
    """Full prompts for a model, wrapped once per distinct text."""

    def __init__(self, model: Any, at: str) -> None:
        self.model = model
        self.at = at
        self.token = placeholder_token(model)
        # the processor writes the image's placeholders, or the model puts its tokens before the prompt (`Prefix`)
        self.writes = getattr(model.__dict__.get("vision"), "writes_placeholders", False) or not getattr(
            model.family.entry, "in_prompt", True)
        tokenizer = getattr(model.processor, "tokenizer", None)
        special = set(getattr(tokenizer, "all_special_tokens", ()))
        special |= {added.content for added in getattr(tokenizer, "added_tokens_decoder", {}).values() if added.special}
        self.video = video_placeholder(model)
        self.special = sorted(special | {token for token in (self.token, self.video) if token})
        self._full: dict[tuple[str, str], str] = {}

    def full(self, text: str, kind: str = "image") -> str:
        """The prompt ``text`` gives a file of ``kind`` (``"image"`` or ``"video"``)."""
        if (text, kind) not in self._full:
            self._full[text, kind] = (self._check(self._wrap(text), text) if kind == "image"
                                      else self._check_video(self._wrap(text, "video")))
        return self._full[text, kind]

    def _check_video(self, full: str) -> str:
        counts = {token: full.count(token) for token in (self.video, self.token) if token}
        if self.video is None or counts[self.video] != 1 or counts.get(self.token):
            raise ValueError(f"the prompt {full!r} is given a video, so it must hold one video placeholder "
                             f"({self.video}) and no image's ({self.token}): pass the question alone for the chat "
                             f"template to place the video before it, or a function of the file's record that "
                             f"gives each file its own prompt")
        return full

    def _wrap(self, text: str, kind: str = "image") -> str:
        if any(token in text for token in self.special):
            return text
        templated = next((part for part in (self.model.processor, getattr(self.model.processor, "tokenizer", None))
                          if getattr(part, "chat_template", None)), None)
        if templated is None:
            if self.writes:
                return text  # the processor puts the image before it
            raise ValueError(f"the processor has no chat template to place the image before {text!r}: pass a full "
                             f"prompt that holds the image token ({self.token})")
        content = [{"type": kind}] + ([{"type": "text", "text": text}] if text else [])
        return templated.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                             tokenize=False)

    def _check(self, full: str, text: str) -> str:
        if not self.token:
            return full
        count = full.count(self.token)
        if self.writes:
            if count:
                raise ValueError(f"the prompt {full!r} holds the image placeholder {self.token}, but this processor "
                                 f"writes each image's placeholders itself, before the prompt: leave it out (a task "
                                 f"token such as '<CAPTION>', or plain text, is the whole prompt)")
            return full
        if count == 0:
            what = ("at='image' reads the image's tokens, but" if self.at == "image"
                    else "the image would never reach the model:")
            raise ValueError(f"{what} the prompt {full!r} holds no image (no {self.token}): put {self.token} "
                             f"where the image goes, or pass the question alone for the chat template to place "
                             f"the image before it")
        if count > 1:
            raise ValueError(f"the prompt {full!r} holds {count} images ({self.token}), and collect gives each "
                             f"prompt one image: keep one {self.token}")
        return full


def prompt_id(full: str) -> str:
    """A prompt's id: the first 12 hex digits of its SHA-256, the same in every process."""
    return hashlib.sha256(full.encode()).hexdigest()[:12]

