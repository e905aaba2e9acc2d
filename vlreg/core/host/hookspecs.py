"""Every hook a vlreg plugin can implement, on one page (docs/writing-a-plugin.md says more).

A checkpoint's config has *parts* (`parts`: the wrapper, text, vision and any other config it
holds), each served by the plugin that claims its ``model_type``, so one plugin's tower can
serve another's wrapper. `vlreg.plugin.Plugin` answers these from a declaration; a module of
hook functions registers as well. A hook taking a ``part`` is asked only of the plugin that
claimed it and answers ``None`` for what it does not contribute; its paths are from the part
(the wrapper's from the root, a text part's from a block, a tower's from the tower).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import pluggy

if TYPE_CHECKING:
    from ..images.entries import Entry
    from .parts import Claim, Part

PROJECT = "vlreg"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def vlreg_claims() -> list[Claim]:
    """The parts this plugin serves, ``[Claim(kind, model_type)]``, asked once at registration
    (and of a plugin held back, to name it). ``overrides=`` a plugin's name beats that
    plugin's claim; two claims neither overriding the other leave the part served by neither."""


@hookspec(firstresult=True)
def vlreg_declines(part: Part) -> str | None:
    """Why this plugin declines the whole checkpoint though it claims the part (the load
    stops): one sentence saying what is not served and what would load, or ``None``. Asked
    as the part's claim is found, the wrapper's first, before any weight is read."""


@hookspec(firstresult=True)
def vlreg_rename(part: Part) -> dict[str, str] | None:
    """nnsight ``rename`` entries, ``{native path: standard name}``: the wrapper's mounts
    from the root (``layers``, ``embed_tokens``, ``norm``, ``vision``, ``projector``), names
    inside a text block, or the tower's names from the tower. A single-name key binds on
    every module that has it: never one a block of another part has too."""


@hookspec(firstresult=True)
def vlreg_envoys(part: Part) -> dict[type, type] | None:
    """nnsight ``envoys`` entries, ``{module class: envoy class}``: the part's module classes
    onto vlreg's standard envoys (`Layer`, `Attention`, `Vision`, ...) or subclasses of them."""


@hookspec(firstresult=True)
def vlreg_entry(part: Part) -> Entry | None:
    """Where and how the image enters the text model (the wrapper's): a `Scatter` into the
    embeddings, `QueryTokens`, `ImageCodes`, a `CrossAttention` argument. ``None``: no image
    reaches this model, and every vision value is `Unavailable`."""


@hookspec(firstresult=True)
def vlreg_image_grids(part: Part) -> Callable[..., list] | None:
    """How the wrapper lays each image's tokens out: ``grids(encoding, images, processor)``
    giving, per image, its `ImageGrid` (or several in sequence order), each token's box in the
    original image (NaN where it covers no pixels); their tokens add up to the image's in the
    encoding, which `vision.geometry` checks. ``None``: `vision.geometry` is `Unavailable`."""


@hookspec(firstresult=True)
def vlreg_video_grids(part: Part) -> Callable[..., list] | None:
    """How the wrapper lays each video's tokens out: ``grids(encoding, videos, processor)``
    giving, per video, its `VideoGrid` runs in sequence order (frames covered, boxes in the
    frames, the time written before them); their tokens add up to the video's in the
    encoding. ``None``: `vision.geometry` refuses ``videos=``."""


@hookspec(firstresult=True)
def vlreg_load_options(part: Part) -> dict[str, dict[str, Any]] | None:
    """``{task: {keyword: value}}`` a load of that task needs for its weights to land, passed
    to ``from_pretrained`` where the user set no such keyword (Emu3's text-only class finds
    its weights only through a ``key_mapping``). The wrapper's."""


@hookspec(firstresult=True)
def vlreg_processor(part: Part) -> Callable[[Any], Any] | None:
    """Where the checkpoint's processor does not encode the prompt it is given (ShieldGemma
    2's writes prompts of its own and drops the text): ``adapt(processor)``, giving the
    processor ``model.processor`` becomes from the one transformers loaded; given one it
    made, it gives it back. The wrapper's."""


@hookspec(firstresult=True)
def vlreg_suppressed_tokens(part: Part) -> Sequence[int] | None:
    """Ids whose logits the wrapper's forward sets lowest after ``lm_head`` (Chameleon's image
    codes): vlreg applies the same edit wherever it reads a stream out itself (the logit lens),
    so every probability it reports is the model's. The wrapper's."""


@hookspec(firstresult=True)
def vlreg_readout(part: Part) -> Any:
    """How a stream becomes the logits, where not ``lm_head(norm(stream))``: a
    `vlreg.plugin.Readout` (no final norm, a transform after ``lm_head``), or a sentence
    refusing the logit lens by name (`logit_lens`, `project_on_vocab`). The wrapper's."""


@hookspec(firstresult=True)
def vlreg_layers(part: Part) -> Any:
    """Where the text model keeps its blocks in two lists it runs in turn (IDEFICS's): a
    `vlreg.plugin.Interleaved` naming them, so ``layers`` is both in call order. The wrapper's."""


@hookspec(firstresult=True)
def vlreg_refuses(part: Part) -> dict[str, Any] | None:
    """The part's refusal table (`vlreg.core.serving.refusals`), ``{name: reason}``: what of it
    is not served, or takes no write, and why. A name is a row as
    `StandardizedTransformer.support` names it, relative to the part (the wrapper's from the
    root, so it can speak of its tower), an ``fnmatch`` pattern of rows, a standard child
    (``"vision.layers"``), a trace input (``"videos"``) or a path without standard names. A
    reason is a sentence (never served: `support` lists it, the claim repeats it), a predicate
    of the envoy (``None`` where served), a `Gate` of the read (its run, step, invoke), a tuple
    of them, or `read_only(reason)`: served, but a write raises `vlreg.ReadOnly`."""


@hookspec
def vlreg_adapters() -> dict[str, Any]:
    """What this plugin publishes for other plugins to build on, ``{name: object}``, asked
    with ``vlreg.plugin.adapter(name)`` (the Qwen ViT as ``"qwen_vit"``): its public API to
    other plugins, to keep stable."""


@hookspec
def vlreg_checkpoints() -> dict[str, Callable[..., Any]]:
    """Builders of small random-weight checkpoints for tests, ``{name: builder}``:
    ``builder(path, **overrides)`` writes a folder ``from_pretrained`` loads (config, weights,
    tokenizer, processor, chat template). One is named after each served model type."""
