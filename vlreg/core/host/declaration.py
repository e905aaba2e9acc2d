"""A family plugin as one declaration: `Plugin` over its parts (`Wrapper`, `Text`, `Tower`,
and `Other` for another config the top-level one holds, a Q-Former's).

::

    plugin = Plugin(
        Wrapper("qwen2_vl", rename=WRAPPER_RENAME, entry=SCATTER, image_grids=grids),
        Text("qwen2_vl_text", envoys=text_envoys),
        Tower("qwen2_vl_vision", rename=TOWER_RENAME, envoys=tower_envoys),
        adapters={"qwen_vit": QWEN_VIT},
        checkpoints=builders,
    )

registered like any plugin, through the ``vlreg`` entry-point group
(``qwen2_vl = "vlreg_qwen2_vl:plugin"``). The `Plugin` implements the hooks of
`vlreg.core.host.hookspecs` from the declarations, so a family states what it serves as data
and never writes a hook; the hooks stay the escape hatch (a subclass of `Plugin` adds its
own `hookimpl` methods, and a module of hook functions registers as before).

Every field of a part is its value, or a function of the `Part` being served that gives
the value (so one declaration serves several model types, or reads the checkpoint's
config): ``rename=lambda part: ...``. A function is called when a checkpoint is resolved,
never at import, which is where a plugin imports transformers' modeling modules (the
envoy maps name their classes) without slowing every ``import vlreg``.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import attrs
from attrs import field, frozen

from .hookspecs import hookimpl
from .parts import Claim, Part, is_kind


def _model_types(value: Any) -> tuple[str, ...]:
    types = (value,) if isinstance(value, str) else tuple(value)
    if not types or not all(isinstance(each, str) and each for each in types):
        raise ValueError(f"a part declares the model types it serves (a string or several), not {value!r}")
    return types


def _answer(value: Any, part: Part) -> Any:
    """A field's value for ``part``: the value, or what its function gives for the part."""
    return value(part) if callable(value) and not isinstance(value, type) else value


@frozen(eq=False)
class Declared:
    """What a plugin serves of one kind of config part, for each of ``model_types``.

    * ``rename``: `vlreg_rename`'s answer, ``{native path: standard name}`` relative to the part;
    * ``envoys``: `vlreg_envoys`' answer, ``{module class: envoy class}``; give a function
      of the part, which imports the modeling module when a checkpoint is resolved;
    * ``unavailable``, ``read_only``: `vlreg_unavailable`'s and `vlreg_read_only`'s ``{row: predicate}``;
    * ``refusal``: a function of the part, `vlreg_refusal`'s answer (why this checkpoint is not served);
    * ``refuses``: what of the part is not served (`Claim.refuses`), ``{name: reason}``;
    * ``overrides``: the name of a plugin this claim replaces (`Claim.overrides`).
    """

    kind: ClassVar[str] = ""
    model_types: tuple[str, ...] = field(converter=_model_types)
    rename: Any = None
    envoys: Any = None
    unavailable: Any = None
    read_only: Any = None
    refusal: Callable[[Part], "str | None"] | None = None
    refuses: dict[str, str] = field(factory=dict)
    overrides: str | None = None

    def claims(self) -> list[Claim]:
        return [Claim(self.kind, model_type, overrides=self.overrides, refuses=self.refuses)
                for model_type in self.model_types]


@frozen(eq=False)
class Wrapper(Declared):
    """The top-level config: where the text model, the tower and the projector sit
    (``rename``, from the model root) and where the image enters the text model.

    * ``entry``: `vlreg_entry`'s answer, the image's entry (`Scatter`, `CrossAttention`,
      `QueryTokens`, ...); ``None`` where no image reaches the text model;
    * ``image_grids``: a function of the part giving `vlreg_image_grids`' answer, the
      function that lays out each image's tokens (``lambda part: grids``, or one that reads
      ``part.config``);
    * ``load_options``: `vlreg_load_options`' answer, ``{task: {keyword: value}}`` a load
      of that task needs for its weights to land;
    * ``suppressed_tokens``: `vlreg_suppressed_tokens`' answer, the ids whose logits the
      forward sets to the lowest value after ``lm_head``.
    """

    kind: ClassVar[str] = "wrapper"
    entry: Any = None
    image_grids: Callable[[Part], Any] | None = None
    load_options: Any = None
    suppressed_tokens: Any = None


@frozen(eq=False)
class Text(Declared):
    """The text model's config (``config.text_config``): the blocks' names and envoys."""

    kind: ClassVar[str] = "text"


@frozen(eq=False)
class Tower(Declared):
    """The vision tower's config (``config.vision_config``, or a VQ encoder's
    ``config.vq_config`` where there is none): the tower's names and envoys."""

    kind: ClassVar[str] = "vision"


@frozen(eq=False)
class Other(Declared):
    """Another config the top-level one holds, by its field (``field="qformer_config"``:
    BLIP-2's Q-Former): its envoys and names. A checkpoint loads whether or not such a part
    is claimed; claiming it serves its modules under standard envoys."""

    field: str = attrs.field(kw_only=True)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.field


class Plugin:
    """A family plugin declared as data: its parts, what it publishes to other plugins
    (``adapters``, ``{name: object}``) and its checkpoint builders (``checkpoints``,
    ``{name: builder}``, or a function giving them, which imports the builders only when
    a test asks). It implements every hook from them.

    Two declarations of one part (kind and model type) are an error at once: the host
    would have no way to choose.
    """

    def __init__(self, *parts: Declared, adapters: Any = None, checkpoints: Any = None) -> None:
        self.parts: dict[tuple[str, str], Declared] = {}
        for declared in parts:
            if not isinstance(declared, Declared) or not is_kind(declared.kind):
                raise TypeError(f"Plugin takes Wrapper, Text, Tower and Other declarations, not {declared!r}")
            for model_type in declared.model_types:
                if self.parts.setdefault((declared.kind, model_type), declared) is not declared:
                    raise ValueError(f"the {declared.kind} part {model_type!r} is declared twice in one plugin")
        self.adapters = adapters
        self.checkpoints = checkpoints

    def __repr__(self) -> str:
        served = ", ".join(f"{kind}:{model_type}" for kind, model_type in self.parts)
        return f"Plugin({served})"

    def answer(self, part: Part, name: str) -> Any:
        """The declaration's ``name`` for ``part`` (``None`` where it declares none)."""
        declared = self.parts.get((part.kind, part.model_type))
        value = getattr(declared, name, None)
        return None if value is None else _answer(value, part)

    @hookimpl
    def vlreg_claims(self) -> list[Claim]:
        return [claim for declared in dict.fromkeys(self.parts.values()) for claim in declared.claims()]

    @hookimpl
    def vlreg_refusal(self, part: Part) -> Any:
        return self.answer(part, "refusal")

    @hookimpl
    def vlreg_rename(self, part: Part) -> Any:
        return self.answer(part, "rename")

    @hookimpl
    def vlreg_envoys(self, part: Part) -> Any:
        return self.answer(part, "envoys")

    @hookimpl
    def vlreg_entry(self, part: Part) -> Any:
        return self.answer(part, "entry")

    @hookimpl
    def vlreg_image_grids(self, part: Part) -> Any:
        return self.answer(part, "image_grids")

    @hookimpl
    def vlreg_load_options(self, part: Part) -> Any:
        return self.answer(part, "load_options")

    @hookimpl
    def vlreg_suppressed_tokens(self, part: Part) -> Any:
        return self.answer(part, "suppressed_tokens")

    @hookimpl
    def vlreg_unavailable(self, part: Part) -> Any:
        return self.answer(part, "unavailable")

    @hookimpl
    def vlreg_read_only(self, part: Part) -> Any:
        return self.answer(part, "read_only")

    @hookimpl
    def vlreg_adapters(self) -> dict[str, Any]:
        return dict(self.adapters() if callable(self.adapters) else self.adapters or {})

    @hookimpl
    def vlreg_checkpoints(self) -> dict[str, Any]:
        return dict(self.checkpoints() if callable(self.checkpoints) else self.checkpoints or {})
