"""A family plugin as one declaration: `Plugin` over its parts (`Wrapper`, `Text`, `Tower`,
`Other`), answering each hook of `hookspecs` from the declared field of its name. A field is
its value, or a function of the `Part` called when a checkpoint resolves (never at import,
so ``envoys=`` imports transformers' modeling modules then, not when the plugin loads)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
from attrs import field, frozen

from ..images.scatter import SCATTER
from ..serving.refusals import sentences
from .hookspecs import hookimpl
from .parts import Claim, Part, is_kind

TEXT_MOUNTS = ("layers", "embed_tokens", "norm")


def _model_types(value: Any) -> tuple[str, ...]:
    types = (value,) if isinstance(value, str) else tuple(value)
    if not types or not all(isinstance(each, str) and each for each in types):
        raise ValueError(f"a part declares the model types it serves (a string or several), not {value!r}")
    return types


@frozen(eq=False)
class Declared:
    """What a plugin serves of one kind of part, for each of ``model_types``: a field answers
    the hook of its name (``refuses``: `vlreg_refuses`); ``overrides`` is the claims'
    (`Claim`), and so are the refusal table's sentences where it is given as data, and
    ``declines`` where it is a sentence, not a function of the part: the type is never served."""

    kind: ClassVar[str] = ""
    model_types: tuple[str, ...] = field(converter=_model_types)
    rename: Any = None
    envoys: Any = None
    refuses: Any = None
    declines: Any = None
    overrides: str | None = None

    def claims(self) -> list[Claim]:
        refused = sentences(self.refuses)
        declined = self.declines if isinstance(self.declines, str) else None
        return [Claim(self.kind, each, overrides=self.overrides, refuses=refused, declines=declined)
                for each in self.model_types]

    def answer(self, name: str, part: Part) -> Any:
        """The field ``name`` for ``part``: its value, or what its function gives."""
        value = getattr(self, name, None)
        return value(part) if callable(value) and not isinstance(value, type) else value


@frozen(eq=False)
class Wrapper(Declared):
    """The top-level config, stating only what differs from transformers' composite layout:
    the text model at ``text`` (its `TEXT_MOUNTS` mounted), the tower at ``vision``, the
    projector at ``projector`` (paths from the root; ``None`` mounts none), the image written
    in by `SCATTER` (``entry``); ``layers`` an `Interleaved` where the text model runs two lists
    of blocks in turn (its ``layers`` then mounted from both, not by name); ``text_only`` mounts the text-only class a text-generation
    load builds (``"model"``). ``rename`` adds mounts, replacing one of the same name.
    ``image_grids``, ``video_grids`` and ``processor`` are functions of the part giving the grids function and
    the processor's adaptation (`vlreg_processor`); ``readout`` is the `Readout` where the
    logits are not ``lm_head(norm(stream))`` (one with no norm mounts none), or a sentence
    refusing the logit lens."""

    kind: ClassVar[str] = "wrapper"
    text: str | None = "model.language_model"
    vision: str | None = "model.vision_tower"
    projector: str | None = "model.multi_modal_projector"
    text_only: str | None = None
    entry: Any = SCATTER
    image_grids: Any = None
    video_grids: Any = None
    load_options: Any = None
    suppressed_tokens: Any = None
    processor: Any = None
    readout: Any = None
    layers: Any = None

    def answer(self, name: str, part: Part) -> Any:
        found = super().answer(name, part)
        if name != "rename":
            return found
        readout = self.answer("readout", part)
        # a readout that reads no final norm mounts none: the text model may have none
        text = tuple(m for m in TEXT_MOUNTS if m != "norm" or not hasattr(readout, "norm") or readout.norm)
        if self.answer("layers", part) is not None:  # mounted from two lists (`Interleaved`)
            text = tuple(m for m in text if m != "layers")
        mounts = {**{f"{self.text}.{mount}": mount for mount in text if self.text},
                  **{path: mount for mount, path in (("vision", self.vision), ("projector", self.projector)) if path}}
        given = found or {}
        return {**{path: mount for path, mount in mounts.items() if mount not in given.values()}, **given,
                **{f"{self.text_only}.{mount}": mount for mount in text if self.text_only}}


@frozen(eq=False)
class Text(Declared):
    kind: ClassVar[str] = "text"  # config.text_config: the blocks


@frozen(eq=False)
class Tower(Declared):
    kind: ClassVar[str] = "vision"  # config.vision_config, else a VQ encoder's vq_config


@frozen(eq=False)
class Other(Declared):
    """Another config the top-level one holds, by its field (``field="qformer_config"``)."""

    field: str = attrs.field(kw_only=True)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.field


def _answering(name: str) -> Any:
    """The hook implementation answering ``vlreg_<name>(part)`` from the part's declaration."""

    def hook(self: Plugin, part: Part) -> Any:
        declared = self.parts.get((part.kind, part.model_type))
        return declared and declared.answer(name, part)

    hook.__name__ = hook.__qualname__ = f"vlreg_{name}"
    return hookimpl(hook)


class Plugin:
    """A family plugin declared as data: its parts, what it publishes to other plugins
    (``adapters``) and its checkpoint builders (``checkpoints``), either maybe a function."""

    def __init__(self, *parts: Declared, adapters: Any = None, checkpoints: Any = None) -> None:
        self.parts: dict[tuple[str, str], Declared] = {}
        for declared in parts:
            if not isinstance(declared, Declared) or not is_kind(declared.kind):
                raise TypeError(f"Plugin takes Wrapper, Text, Tower and Other declarations, not {declared!r}")
            for model_type in declared.model_types:
                if self.parts.setdefault((declared.kind, model_type), declared) is not declared:
                    raise ValueError(f"the {declared.kind} part {model_type!r} is declared twice in one plugin")
        self.adapters, self.checkpoints = adapters, checkpoints

    def __repr__(self) -> str:
        return f"Plugin({', '.join(f'{kind}:{model_type}' for kind, model_type in self.parts)})"

    @hookimpl
    def vlreg_claims(self) -> list[Claim]:
        return [claim for declared in dict.fromkeys(self.parts.values()) for claim in declared.claims()]

    vlreg_declines = _answering("declines")
    vlreg_rename = _answering("rename")
    vlreg_envoys = _answering("envoys")
    vlreg_entry = _answering("entry")
    vlreg_image_grids = _answering("image_grids")
    vlreg_video_grids = _answering("video_grids")
    vlreg_load_options = _answering("load_options")
    vlreg_suppressed_tokens = _answering("suppressed_tokens")
    vlreg_processor = _answering("processor")
    vlreg_readout = _answering("readout")
    vlreg_layers = _answering("layers")
    vlreg_refuses = _answering("refuses")

    @hookimpl
    def vlreg_adapters(self) -> dict[str, Any]:
        return dict(self.adapters() if callable(self.adapters) else self.adapters or {})

    @hookimpl
    def vlreg_checkpoints(self) -> dict[str, Any]:
        return dict(self.checkpoints() if callable(self.checkpoints) else self.checkpoints or {})
