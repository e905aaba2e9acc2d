"""What every analysis shares: the image tokens' rows and positions, per-image splits,
layers in forward order, token ids, and copies of a prompt in one batch."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..core.images.geometry import ImageGeometry
from ..core.images.processing import leaves


def _images(images: Any) -> list:
    """``images`` as the trace takes them, in the form given: a list, flat or one list per
    prompt (``[[a, b], [c]]``). The form is kept, since a processor may encode them
    differently (LLaVA-OneVision tiles an image only when it is alone in its list), so the
    helpers analyse what a trace of the same arguments runs. `_count` counts them."""
    return list(images) if isinstance(images, (list, tuple)) else [images]


def _count(images: list) -> int:
    """How many images ``images`` holds, whatever its nesting."""
    return len(leaves(images))


def in_stream(model: Any, helper: str) -> None:
    """Refuse ``helper``, which works on the image's tokens in the text stream, where the
    image reaches the text model by cross-attention and has no tokens there (Mllama)."""
    from ..core.errors import Unavailable

    entry = model.family.entry
    reason = entry.not_in_stream() if entry is not None else None
    if reason:
        raise Unavailable(
            f"{helper} is unavailable: it works on the image's tokens in the text stream, and the "
            f"{model.family.name!r} family's {reason}; in a trace, edit or read vision.image_features[geometry.row, geometry.features] "
            f"and the blocks' cross_attn values (model.cross_attention_layers)"
        )


def stream_written(model: Any, helper: str, blocks: Sequence[Any], values: Sequence[str] = ("layer_output",),
                   gradients: bool = False) -> None:
    """Refuse ``helper``, which writes ``values`` of ``blocks`` (or, with ``gradients``,
    estimates writing them from their gradients), where one takes no write or carries no
    gradient of its own (the collapse of several streams that mix: use every stream)."""
    from ..core.errors import Unavailable

    for block in blocks:
        for name in values:
            if "." in name:
                continue
            reason = block.why_read_only(name)
            if reason:
                raise Unavailable(f"{helper} is unavailable: it writes {block.label(name)}, which cannot be "
                                  f"written: {reason}")
            why = getattr(type(block), "why_no_gradient", None)
            reason = why(block, name) if gradients and why is not None else None
            if reason:
                raise Unavailable(f"{helper} is unavailable: it reads the gradient of {block.label(name)}, and {reason}")


def _where(geometry: Sequence[ImageGeometry]) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch rows and positions of every image token, in ``image_features`` order."""
    rows = torch.cat([torch.full_like(image.positions, image.row) for image in geometry])
    return rows, torch.cat([image.positions for image in geometry])


def _split(tensor: torch.Tensor, geometry: Sequence[ImageGeometry], dim: int = -1) -> list[torch.Tensor]:
    """``tensor``'s axis ``dim`` (every image token) cut into one piece per image."""
    return list(tensor.split([image.tokens for image in geometry], dim=dim))


def _layers(model: Any, layers: Sequence[int] | None, stack: Any = None) -> tuple[int, ...]:
    """Blocks of ``stack`` (the text blocks, ``model.layers``, by default) in forward order:
    values are served in the order the model makes them."""
    count = len(model.layers if stack is None else stack)
    chosen = range(count) if layers is None else layers
    return tuple(sorted({range(count)[i] for i in chosen}))


def token_id(model: Any, token: "int | str") -> int:
    """A token id, from an id or from a string that is one token: that encodes as one, or
    that is a piece of the vocabulary (Fuyu's ``|SPEAKER|``, which its tokenizer encodes
    after the word-start piece ``▁`` it prepends to every text)."""
    if isinstance(token, int):
        return token
    ids = model.tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1 and (whole := model.tokenizer.get_vocab().get(token)) is not None:
        return whole
    if len(ids) != 1:
        raise ValueError(f"{token!r} is {len(ids)} tokens here, not one; pass a token id")
    return ids[0]


def _logits(model: Any, prompt: Any, images: list, row: int, position: int) -> torch.Tensor:
    with torch.no_grad(), model.trace(prompt, images=images):
        logits = model.logits[row, position].save()
    return logits.detach()


def _copies(model: Any, prompt: Any, images: list, count: int) -> tuple[list, list, list[ImageGeometry]]:
    """``count`` copies of a one-row prompt with its images, a copy a batch row, and the
    batch's geometry: image ``j`` of copy ``k`` is ``geometry[k * _count(images) + j]``.
    The images go a list per copy, the form most processors take for several prompts
    (SmolVLM's needs it: a flat list would be one prompt's), unless that changes how an
    image is encoded (LLaVA-OneVision tiles an image only when it is its list's one
    image): then as one flat list. Each copy must encode its images as the prompt alone
    does, or the edits would land on other tokens."""
    if not isinstance(prompt, str):
        raise ValueError("one token at a time runs copies of one prompt in a batch: pass the prompt as a string")
    def shapes(geometry: list) -> list:
        return [[(grid.rows, grid.columns) for grid in image.grids] for image in geometry]

    alone = shapes(model.vision.geometry(prompt, images))
    prompts, flat = [prompt] * count, leaves(images)
    for pictures in ([list(flat) for _ in range(count)], flat * count):
        geometry = model.vision.geometry(prompts, pictures)
        if shapes(geometry) == alone * count:
            return prompts, pictures, geometry
    raise ValueError(
        "the processor encodes the prompt's images differently in a batch of copies than alone, so "
        "its tokens cannot be edited one at a time: pass one image, or edit with ablate_image(tokens=...)"
    )


def _chunks(count: int, size: int) -> list[list[int]]:
    return [list(range(start, min(count, start + size))) for start in range(0, count, size)]


_MARK = "vlreg-turn-mark"


def _turn_end(model: Any) -> "tuple[str, str] | None":
    """What the chat template writes after a user turn (``"<|im_end|>\\n"``) and what
    ``add_generation_prompt=True`` adds after that; ``None`` where it tells them not apart."""
    cached = model.__dict__.get("_vlreg_turn_end", False)
    if cached is not False:
        return cached
    found = None
    # the processor's template, else the tokenizer's (IDEFICS keeps its there); the user's text as the
    # owner's usual form first (a list of parts, a string), else the other, whichever the template writes out
    parts = [{"type": "text", "text": _MARK}]
    tried = [(model.processor, (parts, _MARK)), (model.tokenizer, (_MARK, parts))]
    for owner, content in ((owner, content) for owner, forms in tried if getattr(owner, "chat_template", None)
                           for content in forms):
        try:
            closed, opened = (owner.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                        add_generation_prompt=flag) for flag in (False, True))
        except Exception:  # a template that needs more than a user turn, or the other form of content
            continue
        if _MARK not in closed:
            continue
        end, generation = closed[closed.rindex(_MARK) + len(_MARK):], opened[len(closed):]
        if end.strip() and generation.strip() and opened.startswith(closed):
            found = (end, generation)
        break
    model.__dict__["_vlreg_turn_end"] = found
    return found


def warn_if_turn_ended(model: Any, prompt: Any, position: int, helper: str) -> None:
    """Warn where ``helper`` reads position -1 of a prompt that ends a chat turn (made
    without ``add_generation_prompt=True``): position -1 is then the turn's end token, not
    the position the assistant's answer is predicted from. A prompt given as an encoding
    (a processor's, where it takes no prompt without an image) is read as its rows' text."""
    import warnings

    if position != -1:
        return
    prompts = [prompt] if isinstance(prompt, str) else _decoded(model, prompt) if _encoded(prompt) else prompt
    if not isinstance(prompts, (list, tuple)) or not all(isinstance(each, str) for each in prompts):
        return
    ending = _turn_end(model)
    if ending is None:
        return
    end = ending[0].rstrip()
    if any(each.rstrip().endswith(end) for each in prompts):
        warnings.warn(
            f"{helper} reads position -1, and the prompt ends its turn ({end.strip()!r}) with no assistant turn "
            f"opened after it, so position -1 is the end of the user's turn, not where the answer is predicted "
            f"from: build the prompt with apply_chat_template(..., add_generation_prompt=True), or pass "
            f"position= explicitly",
            UserWarning,
            stacklevel=3,
        )


def _encoded(prompt: Any) -> bool:
    """Whether ``prompt`` is a processor's or tokenizer's encoding (a mapping with ``input_ids``)."""
    return hasattr(prompt, "keys") and "input_ids" in prompt.keys()


def _decoded(model: Any, encoding: Any) -> list[str]:
    """Each row of an encoding as text, its padding left out: what the prompt ends with."""
    ids, mask = encoding["input_ids"], encoding.get("attention_mask")
    rows = ids.tolist() if hasattr(ids, "tolist") else [list(ids)] if ids and isinstance(ids[0], int) else list(ids)
    kept = mask.tolist() if hasattr(mask, "tolist") else [[1] * len(row) for row in rows]
    return [model.tokenizer.decode([token for token, keep in zip(row, flags) if keep]) for row, flags in zip(rows, kept)]
