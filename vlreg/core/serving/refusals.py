"""Why something is not served: the refusal table, and `refusal`, the one function that reads it.

Everything vlreg does not serve, on a load or in a run, is an entry of a table
``{name: reason}``:

* a **name** is a value of an envoy class (``"attention_probabilities"``); in a family's
  table, a row of `support` from the part that declares it (``"self_attn.attention_probabilities"``
  on the text part is every text block's; ``"vision.*"`` a pattern of rows), a standard child
  (``"vision.layers"``), a trace input (``"videos"``) or a part of the model that has no
  standard names (``"vision.decoder"``);
* a **reason** is the sentence a user reads (the name is never served there), a predicate
  of the envoy giving that sentence where it refuses and ``None`` where it serves (it reads
  the load: the attention implementation, the config, the envoy's place), a `Gate` (a
  predicate of the read itself: the run's images, the generation step, the invoke), or a
  tuple of them, asked in order. `read_only` wraps a reason that refuses writes only.

A standard envoy class declares the entries of its own values (`Standard.refuses`); a family
declares the rest once, on its declaration (``refuses=`` of a `Wrapper`, `Text` or `Tower`),
and its entry adds its own (`Entry.refuses`); the gates every value shares are this module's
(`LOAD`, `RUN`). `refusal` asks them in one order: the load's reasons first (no image reaches
the model on this load, then the tables' sentences and predicates: the envoy class's, then the
family's), then the run's (the tables' gates, then `RUN`: an encoder past the first step, no
image in the run or its invoke, an image value past the first step, a replayed tower, a tower
shared by several invokes). The first reason that answers is the refusal.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Callable, Iterator, Mapping, Union

from attrs import frozen

Predicate = Callable[[Any], "str | None"]


@frozen
class Asked:
    """What a gate is asked about: ``name`` (a value, a child, an input) on ``envoy``, read
    in the trace now running."""

    envoy: Any
    name: str

    @property
    def value(self) -> Any:
        """The value descriptor ``name`` is on ``envoy``'s class, or ``None`` (a child, an input)."""
        found = getattr(type(self.envoy), self.name, None)
        return found if hasattr(found, "layout_on") else None

    @property
    def run(self) -> Any:
        """What the host knows of the trace's batch (`Run`)."""
        return self.envoy.run

    def _mediator(self) -> Any:
        from nnsight.intervention.interleaver import Mediator

        return Mediator.current(self.envoy.label(self.name))

    @property
    def step(self) -> int:
        """The generation step the read is at (0 at the first, and outside a generation)."""
        return self._mediator().iteration or 0

    @property
    def group(self) -> Any:
        """This invoke's rows where several invokes are batched, else ``None``."""
        mediator = self._mediator()
        batcher = getattr(mediator.interleaver, "batcher", None)
        return mediator.batch_group if batcher is not None and batcher.batching else None

    @property
    def cached(self) -> bool:
        """Whether the generation keeps a cache: after the first step each token runs alone."""
        return self.run.inputs.get("use_cache", True) is not False


@frozen
class Gate:
    """A reason that reads the read itself (`Asked`: the run, the step, the invoke), not
    only the load. A table's gates are asked for a read in a trace, never of the load, so
    `support` lists what the load serves; `LOAD` is asked of both."""

    answer: Callable[[Asked], "str | None"]

    def __call__(self, asked: Asked) -> str | None:
        return self.answer(asked)


@frozen
class ReadOnlyReason:
    """A reason that refuses writes only (`read_only`): the value is served, but a write to
    it would land nowhere."""

    reason: Any


Reason = Union[str, Predicate, Gate, ReadOnlyReason]


def read_only(reason: "str | Predicate") -> ReadOnlyReason:
    """``reason`` (a sentence, or a predicate of the envoy) refusing writes only: the value
    is served, and an assignment or in-place edit of it raises `vlreg.ReadOnly` with why and
    what to edit instead."""
    return ReadOnlyReason(reason)


def reasons_of(entry: Any) -> tuple:
    """A table entry as a tuple of reasons."""
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def matching(table: Mapping[str, tuple], row: str) -> Iterator[Any]:
    """The reasons of ``table`` (keys rows or ``fnmatch`` patterns of rows) on ``row``."""
    for pattern, reasons in table.items():
        if pattern == row or fnmatchcase(row, pattern):
            yield from reasons


def sentences(table: Any) -> dict[str, str]:
    """The entries of ``table`` that are plain sentences on a name (not a pattern): what is
    never served there, whatever the load, which `support` lists and a claim declares."""
    if not isinstance(table, Mapping):
        return {}
    return {name: entry for name, entry in table.items()
            if isinstance(entry, str) and not any(mark in name for mark in "*?[")}


def first_sentences(table: Mapping[str, tuple]) -> dict[str, str]:
    """The first plain sentence (`sentences`) of a merged table on each name."""
    return {name: found[0] for name, reasons in table.items()
            if (found := [why for why in reasons if sentences({name: why})])}


def merge(table: dict[str, tuple], entries: Any, prefix: str = "") -> None:
    """Add a part's ``entries`` (rows relative to the part, under ``prefix`` from the root) to
    a family's merged ``table``: each row's reasons in the order declared, a reason declared
    twice (by the claim and the declaration) once."""
    for row, entry in (entries or {}).items():
        known = table.setdefault(prefix + row, ())
        table[prefix + row] = known + tuple(reason for reason in reasons_of(entry) if reason not in known)


def _own(envoy: Any, name: str) -> tuple:
    """The envoy class's entry for its value ``name``: that of the nearest class, from the
    envoy's own to the one that defines the value, whose table has one (a class that
    redefines a value states its reasons with it)."""
    for klass in type(envoy).__mro__:
        table = vars(klass).get("refuses")
        if table and name in table:
            return reasons_of(table[name])
        if name in vars(klass):
            return ()
    return ()


def _declared(envoy: Any, name: str) -> Iterator[Any]:
    """The reasons the tables declare for ``name`` on ``envoy``: its class's, then its
    family's (rows from the root)."""
    yield from _own(envoy, name)
    family = getattr(envoy.root, "family", None)
    if family is not None:
        yield from matching(family.refuses, envoy.place.row + name)


def _answer(reason: Any, asked: Asked) -> str | None:
    if isinstance(reason, str):
        return reason
    if isinstance(reason, Gate):
        return reason(asked)
    return reason(asked.envoy)


def refusal(envoy: Any, name: str, *, run: bool = False, write: bool = False) -> str | None:
    """Why ``name`` is not served on ``envoy`` (with ``write``: why a write to it would
    land nowhere), or ``None``. ``run``: asked for a read in the trace now running, so the
    gates answer too; else asked of the load (`support`, the forward order)."""
    declared = list(_declared(envoy, name))
    if write:
        ordered = [entry.reason for entry in declared if isinstance(entry, ReadOnlyReason)]
    else:
        kept = [entry for entry in declared if not isinstance(entry, ReadOnlyReason)]
        gates = [entry for entry in kept if isinstance(entry, Gate)]
        ordered = [*LOAD, *(entry for entry in kept if not isinstance(entry, Gate)), *((*gates, *RUN) if run else ())]
    asked = Asked(envoy, name)
    for reason in ordered:
        found = _answer(reason, asked)
        if found:
            return found
    return None


# -- the gates every value shares ------------------------------------------------


def _is_value(asked: Asked) -> bool:
    return asked.value is not None


def _no_image_on_this_load(envoy: Any) -> str | None:
    """A value of the tower, or of a block run only on images, where no image reaches the
    model on this load (a text-only load, a family with no entry)."""
    place = envoy.place
    for gate in (place.tower, place.image_block):
        reason = gate.no_images() if gate is not None else None
        if reason:
            return reason
    return None


def _load(asked: Asked) -> str | None:
    return _no_image_on_this_load(asked.envoy) if _is_value(asked) else None


#: Asked first, of every value, of the load and of a read: what no image on this load takes away.
LOAD: tuple = (Gate(_load),)


def _later_step_of_once(asked: Asked) -> str | None:
    once = asked.envoy.place.once
    step = asked.step if once is not None and _is_value(asked) else 0
    return once.later_step(step) if step else None


def no_image_in_run(asked: Asked) -> str | None:
    """Why the run (or, where several invokes are batched, this invoke) carries no image,
    so the tower does not run for it and no features are scattered; else ``None``.
    Decided from the input, before the model runs."""
    group = asked.group
    run, family = asked.run, getattr(asked.envoy.root, "family", None)
    if run.images_in(group) is not False:
        return None
    where = "this invoke's prompts carry" if group is not None else "this trace's input carries"
    if run.inputs.get("pixel_values_videos") is not None:
        videos = refusal(asked.envoy.root, "videos") if family is not None else None
        if videos:
            return f"{where} no images, only videos: {videos}"
        return (
            f"{where} no images, only videos, and this value is an image's alone: a video's values are "
            f"vision.video_token_mask, vision.video_features and the tower's; pass the frames as images=[...] "
            f"to read it on them"
        )
    return (
        f"{where} no images, so the tower does not run for them and no features are "
        f"scattered; pass images=[...] with a prompt that has the image placeholder"
    )


def no_video_in_run(asked: Asked) -> str | None:
    """Why the run (or this invoke) carries no video, so no video's features are written in;
    else ``None``. Decided from the input, before the model runs."""
    if asked.run.videos_in(asked.group) is not False:
        return None
    where = "this invoke's prompts carry" if asked.group is not None else "this trace's input carries"
    return (
        f"{where} no video, so no video's features are written in; pass videos=[...] (each a list of "
        f"frames) with a prompt that has the video placeholder (the chat template's {{'type': 'video'}})"
    )


def on_a_videos_call(asked: Asked) -> bool:
    """Whether the tower's values are a video's call: the run carries no image (so the
    tower's one call is the videos'), this invoke carries a video, and the family's tower
    reads a video's frames (its entry writes a video in, and no claim refuses ``videos``).
    Where the run carries images too, the tower's values are the images' call."""
    run, vision = asked.run, asked.envoy.place.tower
    if asked.name in vision.video_values.values():  # the image's own mask and features: never a video's
        return False
    if run.images_in(None) is not False or not run.videos_in(asked.group):
        return False
    entry = vision.place.entry
    if entry is None or entry.video_features(vision) is None or getattr(entry, "video_tower", None) is not None:
        return False  # no video's call, or one through a tower of its own (its values gated by `_image_values`)
    return not refusal(vision.root, "videos")


def _image_after_the_first_step(asked: Asked) -> str | None:
    step = asked.step
    if not (step and asked.cached):
        return None
    # the value's module is never called at this step: nnsight would wait for it to the end
    # of the run, cutting the loop short and losing the step's values
    return (
        f"this is a generation step after the first (step {step}): the image is read at the first "
        "step only, and after it the prompt's tokens, the image's among them, are in the cache, so "
        "the tower and the scatter do not run; read image values at the first step (before "
        "tracer.iter, or at tracer.iter[0])"
    )


def _needs_images(asked: Asked) -> str | None:
    return no_image_in_run(asked) or _image_after_the_first_step(asked)


#: A value that exists only where the run carries an image, and only at a generation's
#: first step (DeepStack's additions, on the text blocks): what every tower value is.
IMAGES = Gate(_needs_images)


def _image_values(asked: Asked) -> str | None:
    """The tower's values, and a block's run only on images (not at later steps: such a
    block runs at every step, on the keys and values it cached)."""
    place = asked.envoy.place
    # a value read off the model's own inputs (the image-token mask, off the prompt) is there whatever the run carries
    if not _is_value(asked) or (place.tower is None and place.image_block is None) or asked.value.reads_model_inputs:
        return None
    if place.tower is not None:
        if place.tower.videos_only:  # a tower only a video's frames run through (`Scatter.video_tower`)
            return no_video_in_run(asked) or _image_after_the_first_step(asked)
        if asked.name.startswith("video_"):  # a video's values, at its own scatter: a video's run, not an image's
            return no_video_in_run(asked) or _image_after_the_first_step(asked)
        if on_a_videos_call(asked):
            return _image_after_the_first_step(asked)
        return _needs_images(asked)
    reason = no_image_in_run(asked)
    return f"{reason}; {place.image_block.skipped}" if reason else None


def _tower_layout(asked: Asked) -> bool:
    return _is_value(asked) and asked.value.layout_on(asked.envoy) == "tower"


def _replayed(asked: Asked) -> str | None:
    if asked.run.replaying and _tower_layout(asked):
        return "this trace replays the tower's cached output (TowerCache.replay), so the tower does not run"
    return None


def _shared_tower(asked: Asked) -> str | None:
    if _tower_layout(asked) and asked.group is not None and asked.run.invokes_with_images() > 1:
        return (
            "images in several invokes run through the tower together, and which of its rows are "
            "this invoke's is not declared; read tower values in a trace where one invoke carries "
            "the images (the features at the scatter, vision.image_features, are cut per invoke)"
        )
    if (asked.group is not None and asked.run.invokes_with_videos() > 1 and asked.envoy.place.tower is not None
            and asked.name not in asked.envoy.place.tower.video_values and on_a_videos_call(asked)):
        return (
            "videos in several invokes run through the tower together, and which of its rows are this "
            "invoke's is not declared; read tower values in a trace where one invoke carries the videos "
            "(vision.video_features is cut per invoke)"
        )
    return None


def _one_image_a_call(asked: Asked) -> str | None:
    tower = asked.envoy.place.tower
    if tower is None or not tower.per_image or not _tower_layout(asked):
        return None
    pixels = asked.run.inputs.get("pixel_values")
    if pixels is None or int(pixels.shape[0]) < 2:
        return None
    return (
        f"the tower runs on each image alone (a call an image), and this run holds {int(pixels.shape[0])} "
        f"images; read tower values in a trace of one image (vision.image_features holds every image's)"
    )


def _whole_batch(asked: Asked) -> str | None:
    if _is_value(asked) and asked.group is not None and asked.value.layout_on(asked.envoy) == "whole":
        return (
            "it holds the whole batch's tokens in an order of the model's own, from which no invoke's rows "
            "are cut; read it in a trace of one invoke"
        )
    return None


#: Asked last, in a run, in this order.
RUN: tuple = (Gate(_later_step_of_once), Gate(_image_values), Gate(_replayed), Gate(_shared_tower),
              Gate(_one_image_a_call), Gate(_whole_batch))


def prefill_only(instead: str, call: str, whole: str) -> Gate:
    """A gate for a value read at a call the prefill makes and a cached generation's later
    steps do not (a convolution, a chunked scan, where each later token runs a cached update
    instead): refused there, unless the generation runs without a cache. ``instead`` is what
    each later step runs, ``call`` the call the value is read at, ``whole`` what
    ``use_cache=False`` runs over the whole sequence."""

    def answer(asked: Asked) -> str | None:
        step = asked.step
        if not (step and asked.cached):
            return None
        return (
            f"at step {step}, after the prefill, each token runs {instead}, not {call} it is read at; "
            f"read it at the prefill (step 0), or generate with use_cache=False, which runs {whole} over "
            f"the whole sequence at every step"
        )

    return Gate(answer)
