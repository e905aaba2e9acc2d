"""Processor options given to a trace: routed to the processor, or refused by name.

nnsight hands the processor only a trace's text, images and videos; every other keyword
goes to the model's forward, whose ``**kwargs`` swallow what it does not name. So
``model.trace(prompt, images=[image], max_pixels=56 * 56)`` would run at the processor's
default resolution and say nothing. vlreg takes the keywords the processor declares it
takes (its typed kwargs, per modality, and its image processor's) out of each invoke and
hands them to the processor (`split`); `vision.geometry` and the analysis helpers take the
same keywords, so they analyse what a trace of the same arguments runs. A keyword that
neither the processor nor the model's forward names is refused (`refuse_unknown`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Iterator

from .inputs import takes_flat
from .processing import MEDIA, OWN, configured, leaves, processor_options


def split(processor: Any, kwargs: dict, generating: bool = False) -> tuple[dict, dict]:
    """``kwargs`` as (the processor's options, the rest). In a generation, a keyword
    ``generate`` takes stays with it (``max_length`` is both a tokenizer's and a
    generation's)."""
    taken = processor_options(processor) - (_generation_keywords() if generating else frozenset())
    options = {key: value for key, value in kwargs.items() if key in taken}
    return options, {key: value for key, value in kwargs.items() if key not in taken}


@functools.lru_cache(maxsize=1)
def _generation_keywords() -> frozenset[str]:
    from transformers import GenerationConfig

    return frozenset(GenerationConfig().to_dict())


def route(model: Any, inputs: tuple, kwargs: dict, generating: bool = False) -> tuple[tuple, dict, dict]:
    """An invoke's ``(inputs, kwargs)`` as ``(inputs, kwargs without the processor's
    options, those options)``, refusing a keyword nothing takes (a generation's own
    keywords, ``max_new_tokens=``, go to ``generate``, which checks them itself)."""
    options, rest = split(model.processor, kwargs, generating)
    options = {**given(model), **options}
    if not generating:
        refuse_unknown(model, rest)
    if options and not (kwargs.keys() & MEDIA):
        text = sorted(options.keys() & (processor_options(model.processor, "text_kwargs") | {"text_kwargs"}))
        if text:
            raise TypeError(
                f"{', '.join(text)} given with a prompt that carries no images: text options reach the "
                f"processor with images only; tokenize the prompt yourself (model.tokenizer(prompt, "
                f"{text[0]}=..., return_tensors='pt')) and trace the encoding"
            )
        options = {}  # image and video options: nothing here for them to act on
    return inputs, rest, options


def same_options(routed: list) -> dict:
    """The processor options of a trace's invokes that carry images, which one processor
    call encodes together: they must agree."""
    given = [options for _, kwargs, options in routed if kwargs.keys() & MEDIA]
    if any(repr(sorted(options.items())) != repr(sorted(given[0].items())) for options in given[1:]):
        raise ValueError(
            "the invokes that carry images give the processor different options, and one processor call "
            "encodes every invoke's images together: give each invoke the same options, or trace them apart"
        )
    return given[0] if given else {}


def encode_invoke(model: Any, prompts: Any, kwargs: dict, options: dict) -> dict:
    """One invoke's prompts and images through the processor, with its options, padded
    on the tokenizer's side; the invoke's other keywords kept for the forward. The
    processor runs as `geometry.configured` makes it (its image processor holding the
    options), so a processor that reads a setting off its image processor, as Idefics2's
    reads ``do_image_splitting`` to write the image tokens, writes them for the frames the
    options make."""
    media = {key: value for key, value in kwargs.items() if key in MEDIA}
    if media.get("images") is not None and takes_flat(model):
        media["images"] = leaves(media["images"])
    rest = {key: value for key, value in kwargs.items() if key not in MEDIA | {"text"}}
    text = list(prompts) if isinstance(prompts, (list, tuple)) else prompts
    processor = configured(model.processor, options)
    if media.get("images") is not None:
        check_settings(model, processor)
    encoding = processor(text=text, **media, **options, padding=True, return_tensors="pt")
    return {**encoding, **rest}


def check_settings(model: Any, processor: Any) -> None:
    """Refuse, before it runs, a processor the options configure into a setting the family
    says this process cannot run (`Vision.processor_refusal`: a path needing a library not
    installed)."""
    vision = model.__dict__.get("vision")
    why = vision.processor_refusal(processor) if vision is not None else None
    if why:
        raise ValueError(f"the processor ({type(processor).__name__}) cannot run as configured: {why}")


def check_options(processor: Any, options: dict, where: str) -> None:
    """Refuse keywords given to ``where`` (a helper, `vision.geometry`) that the processor
    does not take."""
    unknown = sorted(set(options) - processor_options(processor))
    if unknown:
        import difflib

        near = [difflib.get_close_matches(key, sorted(processor_options(processor)), n=1) for key in unknown]
        hints = "; ".join(f"did you mean {found[0]!r}?" for found in near if found)
        raise TypeError(
            f"{', '.join(repr(key) for key in unknown)} given to {where}: not an option of the processor "
            f"({type(processor).__name__}){' (' + hints + ')' if hints else ''}; {where} takes the processor's "
            f"options, as a trace does (max_pixels=, size=, images_kwargs=, ...)"
        )


def forward_keywords(module: Any) -> frozenset[str] | None:
    """The keywords ``module``'s forward names, with transformers' shared forward kwargs
    (``output_attentions``, ...); ``None`` when it takes any keyword by name only."""
    from transformers.utils.generic import TransformersKwargs

    parameters = inspect.signature(module.forward).parameters.values()
    named = {p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    return frozenset(named | set(TransformersKwargs.__annotations__) | {"use_cache", "return_dict"})


def refuse_unknown(model: Any, kwargs: dict, where: str = "the trace") -> None:
    """Refuse a keyword given to ``where`` that neither the processor nor the model's
    forward names: the forward's ``**kwargs`` would swallow it and the run would ignore it."""
    known = forward_keywords(model._module)
    taken = processor_options(model.processor)
    unknown = sorted(key for key in kwargs if key not in known and key not in taken and key not in OWN)
    if not unknown:
        return
    import difflib

    names = ", ".join(repr(key) for key in unknown)
    near = {key: difflib.get_close_matches(key, sorted(known | taken), n=1) for key in unknown}
    hints = "; ".join(f"did you mean {found[0]!r} for {key!r}?" for key, found in near.items() if found)
    taker = (f"by the processor ({type(model.processor).__name__}) nor" if model.processor is not None
             else "by a processor (this is a text-only load) nor")
    raise TypeError(
        f"{names} given to {where} {'is' if len(unknown) == 1 else 'are'} taken neither {taker} by "
        f"{type(model._module).__name__}.forward, which would ignore {'it' if len(unknown) == 1 else 'them'}"
        f"{': ' + hints if hints else ''}. Processor options (max_pixels=, size=, images_kwargs=, ...) go "
        f"with images= on a load with task='image-text-to-text'"
    )


def given(model: Any) -> dict:
    """The processor options a helper running now was given (`processing`), which its
    traces, geometry and caches use."""
    return model.__dict__.get("_vlreg_options") or {}


@contextlib.contextmanager
def processing(model: Any, options: dict, where: str) -> Iterator[None]:
    """Run a helper's traces, geometry and tower caches with the processor's ``options``
    (checked first), holding the model's lock so no other thread's trace sees them."""
    if not options:
        yield
        return
    check_options(model.processor, options, where)
    with model._lock:
        previous = given(model)
        model.__dict__["_vlreg_options"] = {**previous, **options}
        try:
            yield
        finally:
            model.__dict__["_vlreg_options"] = previous


def takes_processor_options(helper: Callable | None = None, *, model_of: Callable = lambda first: first) -> Any:
    """A helper ``helper(first, ...)`` that also takes the processor's options as keywords
    (``max_pixels=``, ``images_kwargs=``), as a trace does, and runs with them on the model
    ``model_of(first)`` (``first`` itself, or a dictionary's model)."""
    if helper is None:
        return functools.partial(takes_processor_options, model_of=model_of)
    names = set(inspect.signature(helper).parameters)

    @functools.wraps(helper)
    def run(first: Any, *args: Any, **kwargs: Any) -> Any:
        options = {key: kwargs.pop(key) for key in list(kwargs) if key not in names}
        with processing(model_of(first), options, helper.__name__):
            return helper(first, *args, **kwargs)

    return run
