"""What a standard envoy and everything under it serves: `Supported`, the rows of
`support` and `read_only`, and `walk`, all read off the one walk over the standard tree
(`vlreg.core.envoys.tree`)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .tree import tree


class Supported:
    """`Standard`'s tables: what it and everything under it serves (`support`), what
    takes no write (`read_only`), and every value in forward order (`walk`)."""

    def support(self) -> dict[str, str | None]:
        """Every standard value here and below, in forward order: ``None`` if served,
        else why not.

        Blocks share rows (``"self_attn.attention_probabilities"``); where blocks
        disagree, each gets its own row (``"layers.3.self_attn.attention_probabilities"``).
        What the family's claims refuse that is no value (`vlreg.plugin.Claim`'s
        ``refuses``: a trace input such as ``"videos"``, a path without standard names) is a
        row too, with its reason: beside the rows of the part it names, or before the
        readout.
        """
        return _with_refusals(self, rows(self, lambda envoy, name: envoy.why_unavailable(name)))

    def read_only(self) -> dict[str, str]:
        """The values here and below that can be read but not written, with why and what
        to edit instead (the rows of `support` that refuse writes)."""
        served = self.support()
        found = rows(self, lambda envoy, name: envoy.why_read_only(name))
        return {row: reason for row, reason in found.items() if reason is not None and served.get(row) is None}

    def walk(self) -> Iterator[tuple[Any, str]]:
        """Every ``(envoy, value name)`` here and below, every block's, in the order the
        forward computes them: reading them in this order in one trace is in order.
        Includes values this load cannot serve (`why_unavailable` says which)."""
        done: set[tuple[int, str]] = set()
        for visit in tree(self):
            if visit.name is not None and (id(visit.envoy), visit.name) not in done:
                done.add((id(visit.envoy), visit.name))
                yield visit.envoy, visit.name


def rows(envoy: Any, ask: Callable[[Any, str], "str | None"]) -> dict[str, str | None]:
    """`ask`'s answer for every value under ``envoy``, a row each, in forward order.
    A row blocks share is one row where every block of the stack has it and answers
    alike; else ``layers.<blocks>.<row>``, one per answer. A tower's values are left
    out where no image reaches it, a video's where no video can (`Vision.no_videos`)."""
    merged: dict[tuple, dict[int | None, str | None]] = {}
    sizes: dict[str, int] = {}
    for visit in tree(envoy):
        tower = visit.envoy.place.tower
        if visit.name is None or (tower is not None and tower.no_images()):
            continue
        if visit.envoy is tower and visit.name in tower.video_values and tower.no_videos():
            continue
        if visit.block is None:
            merged.setdefault((None, visit.row + visit.name), {None: ask(visit.envoy, visit.name)})
            continue
        within = visit.row[len(visit.stack):] + visit.name
        merged.setdefault((visit.stack, within), {})[visit.block] = ask(visit.envoy, visit.name)
        sizes[visit.stack] = max(sizes.get(visit.stack, 0), visit.block + 1)
    found: dict[str, str | None] = {}
    for (stack, row), answers in merged.items():
        if stack is None:
            found.setdefault(row, answers[None])
            continue
        reasons = list(answers.values())
        if len(answers) == sizes[stack] and all(reason == reasons[0] for reason in reasons):
            found.setdefault(stack + row, reasons[0])
        elif all(reason == reasons[0] for reason in reasons):
            found[f"{stack}layers.{_spans(sorted(answers))}.{row}"] = reasons[0]  # only some blocks have it
        else:
            found.update({f"{stack}layers.{i}.{row}": reason for i, reason in answers.items()})
    return found


def named(envoy: Any, row: str) -> tuple[Any, str] | None:
    """The first value under ``envoy`` that `support`'s row ``row`` names, as ``(envoy,
    name)`` (where blocks share the row, the first block's), or ``None`` (a row that names
    no value: a trace input, a child, a path without standard names)."""
    for visit in tree(envoy):
        if visit.name is None:
            continue
        if visit.block is None:
            if row == visit.row + visit.name:
                return visit.envoy, visit.name
            continue
        within = visit.row[len(visit.stack):] + visit.name
        head, tail = f"{visit.stack}layers.", f".{within}"
        blocks = row[len(head):-len(tail)] if row.startswith(head) and row.endswith(tail) else None
        if row == visit.stack + within or (blocks and visit.block in _blocks(blocks)):
            return visit.envoy, visit.name
    return None


def _blocks(spans: str) -> set[int]:
    """``"0-2,4"`` as ``{0, 1, 2, 4}`` (`_spans` undone); a malformed one as no blocks."""
    found: set[int] = set()
    for span in spans.split(","):
        first, _, last = span.partition("-")
        if not (first.isdigit() and (last.isdigit() or not last)):
            return set()
        found.update(range(int(first), int(last or first) + 1))
    return found


def _with_refusals(envoy: Any, rows: dict[str, str | None]) -> dict[str, str | None]:
    """``rows`` (of the root, or of a part such as the tower) with the refused names that
    are not among them placed: after the last row of the part a name is under (only where
    that part has rows: a text-only load shows no tower), else before the readout."""
    family = getattr(envoy.root, "family", None)
    refused = family.sentences if family is not None else {}
    tower = envoy.root.__dict__.get("vision")
    calls = tower.video_calls() if tower is not None and hasattr(tower, "video_calls") else None
    refused = {"videos": calls, **refused} if calls else refused  # the family's own sentence first
    if not refused:
        return rows
    place = envoy.place
    if envoy is envoy.root:
        names = dict(refused)
    elif place.row and place.block is None and rows:
        names = {name.removeprefix(place.row): reason for name, reason in refused.items()
                 if name.startswith(place.row)}
    else:
        return rows
    items = list(rows.items())
    for name, reason in names.items():
        if name in rows:
            continue
        head = name.partition(".")[0] + "."
        under = [i for i, (row, _) in enumerate(items) if row.startswith(head)]
        if "." in name and not under:
            continue
        readout = [i for i, (row, _) in enumerate(items) if row in ("uncapped_logits", "logits")]
        at = under[-1] + 1 if under else (readout[0] if readout else len(items))
        items.insert(at, (name, reason))
    return dict(items)


def _spans(indices: list[int]) -> str:
    """``[0, 1, 2, 4]`` as ``"0-2,4"``: which blocks a row is on."""
    spans: list[list[int]] = []
    for index in indices:
        if spans and spans[-1][1] == index - 1:
            spans[-1][1] = index
        else:
            spans.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
