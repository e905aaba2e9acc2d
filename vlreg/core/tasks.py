"""What a text-generation load of a vision-language checkpoint builds, checked before it
is built: transformers' pipelines build the class the config names where the task's auto
class has none, which may need an image on every call or not generate at all."""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Any, Iterator

from .host.family import vision_config
from .loading import IMAGE_TEXT, TEXT


def check_needs_images(family: Any, task: str) -> None:
    """Refuse a text-generation load of a wrapper whose forward needs an image on every call
    (`Entry.needs_images`, BLIP-2's): it has no processor, so no call could run."""
    entry = family.entry
    if task == TEXT and entry is not None and entry.needs_images:
        model_type = family.parts["wrapper"].model_type
        raise ValueError(
            f"{model_type!r} runs its vision tower on every forward (its wrapper takes pixel_values with every "
            f"prompt), so a {TEXT!r} load, which has no processor, could run nothing: load with "
            f"task={IMAGE_TEXT!r} and pass images=[...] with each prompt"
        )


def text_task_fallback(config: Any, task: str, dispatch: bool) -> contextlib.AbstractContextManager:
    """Refuse or warn about a text-generation load that no image can reach.

    Where transformers has no causal-LM class for the config, its text-generation
    pipeline loads the class the config names (``architectures``), the wrapper itself,
    with a tokenizer and no processor; that cannot be built lazily, and where the class
    named does not generate (ShieldGemma 2's config names its classifier) it cannot be
    loaded at all (`_named_class`). Where the causal-LM class of a vision-language config
    is the wrapper (Gemma 3's), the load is the same but can be lazy. Either way it is
    warned about. Returns a context that silences the pipeline's own complaint about
    a missing class, which lists every causal-LM class and says nothing useful here.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    if task != TEXT:
        return contextlib.nullcontext()
    quiet: contextlib.AbstractContextManager = contextlib.nullcontext()
    if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING:
        if vision_config(config) is None:
            return quiet
        loaded = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)].__name__
        what = f"{TEXT!r} loads {config.model_type!r} as {loaded}"
    elif _named_class(config) is not None and not _named_class(config).can_generate():
        raise ValueError(
            f"transformers has no text-only class for {config.model_type!r}, and its {TEXT!r} pipeline would build "
            f"{_named_class(config).__name__} (the class the checkpoint's config names), which does not generate "
            f"text: load with task={IMAGE_TEXT!r} (text prompts run there too)"
        )
    elif not dispatch:
        raise ValueError(
            f"transformers has no text-only class for {config.model_type!r}, so it cannot "
            f"be built lazily for {TEXT!r}: load with task={IMAGE_TEXT!r} (the wrapper "
            f"with its processor), or with dispatch=True (the wrapper, text prompts only)."
        )
    else:
        what = f"transformers has no text-only class for {config.model_type!r}: loading the wrapper"
        quiet = _silenced(logging.getLogger("transformers.pipelines.base"))
    warnings.warn(
        f"{what} with a tokenizer and no processor, so no image reaches the model. "
        f"Load with task={IMAGE_TEXT!r} to trace images.",
        stacklevel=3,
    )
    return quiet


def _named_class(config: Any) -> type | None:
    """The first class ``config.architectures`` names that transformers has: what its
    pipelines build where their task's auto class has none for the config."""
    import transformers

    for name in getattr(config, "architectures", None) or ():
        found = getattr(transformers, name, None)
        if isinstance(found, type):
            return found
    return None


@contextlib.contextmanager
def _silenced(logger: logging.Logger) -> Iterator[None]:
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
