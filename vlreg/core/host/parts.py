"""What the host and a plugin say of a checkpoint's config: `Claim` (a plugin serves a
part) and `Part` (the part a hook is asked about)."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

#: The parts every vision-language checkpoint has; any other is named by its config field.
KINDS: tuple[str, ...] = ("wrapper", "text", "vision")
OTHER = "_config"


def is_kind(value: Any) -> bool:
    """Whether ``value`` names a kind of part: one of `KINDS`, or a config field of another
    part (``"qformer_config"``)."""
    return isinstance(value, str) and (value in KINDS or (value.endswith(OTHER) and value[:-len(OTHER)].isidentifier()))


def _kind(instance: Any, attribute: Any, value: str) -> None:
    if not is_kind(value):
        raise ValueError(f"{attribute.name} must be one of {KINDS}, or the config field of another part of the "
                         f"config (\"qformer_config\"), not {value!r}")


def _refusals(value: Any) -> dict[str, str]:
    refusals = dict(value or {})
    for name, reason in refusals.items():
        if not (isinstance(name, str) and name and isinstance(reason, str) and reason.strip()):
            raise ValueError(f"a claim's refuses= maps a name to the sentence saying why, not {name!r}: {reason!r}")
    return refusals


def _sentence(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise ValueError(f"a claim's declines= is the sentence saying why its type is never served, not {value!r}")


@frozen
class Claim:
    """A plugin serves the config part of this kind whose ``model_type`` is this.

    ``kind`` is ``"wrapper"``, ``"text"``, ``"vision"``, or the field of the top-level config
    that holds another part (``"qformer_config"``). ``overrides`` names the plugin this claim
    replaces where both claim the part (a patched build of a family, say).

    ``refuses`` is what of the part is *never* served, ``{row of support: reason}``, the plain
    sentences of its refusal table (`vlreg_refuses`): a claim refusing something serves its
    type partially (`vlreg plugins --coverage` says so without running the family), and
    refusals take no part in deciding who serves a part.

    ``declines`` is the sentence saying why the part's type is never served whatever its
    config (a protein-to-text model, a robot policy): the claim names the type so that a load
    and the census say why, and the type does not count as served.
    """

    kind: str = field(validator=_kind)
    model_type: str
    overrides: str | None = None
    refuses: dict[str, str] = field(factory=dict, converter=_refusals, eq=False)
    declines: str | None = field(default=None, validator=_sentence, eq=False)


@frozen
class Part:
    """One part of a checkpoint's config, as the hooks are asked about it: ``config`` is the
    part's own (``config.text_config`` for the text part), ``root`` the whole checkpoint's."""

    kind: str = field(validator=_kind)
    model_type: str
    config: Any = field(eq=False, repr=False)
    root: Any = field(eq=False, repr=False)
