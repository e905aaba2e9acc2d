"""From a checkpoint's config to the `Family` that serves it: `resolve` splits the config
into its parts, finds the plugin that claimed each, and merges what they contribute, which
is all `StandardizedTransformer` needs to build."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Callable

from attrs import frozen

from ..errors import NoFamily
from ..serving.reference import ServerSide
from . import plugins
from .parts import KINDS, Part, is_kind

Predicate = Callable[[Any], "str | None"]


@frozen
class Family:
    """What serves one checkpoint: the plugin per part and their merged contributions.
    ``name`` is the plugin that claimed the wrapper (the family); the other parts' plugins
    may differ (``plugins``)."""

    name: str
    parts: dict[str, Part]
    plugins: dict[str, Any]
    rename: dict
    envoys: dict
    #: Where and how the image enters the text model (an `Entry`), or None.
    entry: Any
    unavailable: dict[str, tuple[Predicate, ...]]
    #: The wrapper's `vlreg_image_grids` function, or None.
    image_grids: Callable | None = None
    read_only: dict[str, tuple[Predicate, ...]] = {}
    #: What the parts' claims refuse (`Claim.refuses`), ``{row from the root: reason}``.
    refuses: dict[str, str] = {}
    #: The config's other parts no plugin claims: ``{config field: model_type}``.
    unserved: dict[str, str] = {}
    #: The wrapper's `vlreg_load_options`, ``{task: {keyword: value}}``.
    load_options: dict[str, dict] = {}
    #: The wrapper's `vlreg_suppressed_tokens`: ids whose logits its forward sets lowest.
    suppressed_tokens: tuple[int, ...] = ()
    #: The wrapper's `vlreg_processor`: ``adapt(processor)``, the processor prompts are
    #: encoded with from the one transformers loaded, or None (that one, as it is).
    processor: Callable | None = None

    def predicates(self, table: str, row: str) -> tuple[Predicate, ...]:
        """The predicates of ``table`` (``"unavailable"`` or ``"read_only"``) on ``row``;
        a table's keys are rows or ``fnmatch`` patterns of rows (``"vision.*"``)."""
        found: tuple[Predicate, ...] = ()
        for pattern, predicates in getattr(self, table).items():
            if pattern == row or fnmatchcase(row, pattern):
                found += predicates
        return found

    @property
    def plugin(self) -> Any:
        """The plugin that claimed the wrapper part."""
        return self.plugins["wrapper"]

    def served_by(self, kind: str) -> str:
        """The name of the plugin serving the ``kind`` part (its entry point's name)."""
        return plugins.plugin_manager().get_name(self.plugins[kind])

    def __repr__(self) -> str:
        served = ", ".join(
            f"{kind}={part.model_type!r} by {plugins.describe(self.plugins[kind])}"
            for kind, part in self.parts.items()
        )
        unserved = "".join(f", {kind}={model_type!r} unserved" for kind, model_type in self.unserved.items())
        return f"Family({self.name!r}: {served}{unserved})"


#: The config fields a vision part is read from, in order: a tower's, else a VQ encoder's
#: (Emu3's, Chameleon's). Janus has both; its ``vq_config`` is image generation's.
VISION_CONFIGS = ("vision_config", "vq_config")


def vision_config(config: Any) -> Any:
    """The config of ``config``'s vision part (`VISION_CONFIGS`), or None."""
    for name in VISION_CONFIGS:
        found = getattr(config, name, None)
        if found is not None:
            return found
    return None


def parts_of(config: Any) -> dict[str, Part]:
    """The parts of ``config``: a wrapper and a text part (a text-only config is its own),
    a vision part if any, and every other config it holds, named by its field."""
    text = config.get_text_config()
    parts = {
        "wrapper": Part("wrapper", config.model_type, config, config),
        "text": Part("text", text.model_type, text, config),
    }
    vision = vision_config(config)
    if vision is not None:
        parts["vision"] = Part("vision", vision.model_type, vision, config)
    taken = {id(part.config) for part in parts.values()}
    for field, other in vars(config).items():
        if is_kind(field) and field not in KINDS and id(other) not in taken and getattr(other, "model_type", None):
            parts[field] = Part(field, other.model_type, other, config)
    return parts


def resolve(config: Any) -> Family:
    """The family serving ``config``; raises `NoFamily` naming what to install."""
    parts = parts_of(config)
    served: dict[str, Any] = {}
    unserved: dict[str, str] = {}
    for kind, part in list(parts.items()):
        plugin = plugins.claimant(kind, part.model_type)
        if plugin is None and kind not in KINDS and not plugins.contenders(kind, part.model_type):
            unserved[kind] = part.model_type  # another part no plugin claims: its modules keep their names
            del parts[kind]
            continue
        if plugin is None:
            raise NoFamily(_unclaimed(part, served))
        refusal = plugins.call(plugin, "vlreg_refusal", part=part)
        if refusal:
            raise NoFamily(f"{plugins.describe(plugin)} does not serve this {config.model_type!r} checkpoint: {refusal}")
        served[kind] = plugin

    rename: dict = {}
    envoys: dict = {}
    tables: dict[str, dict[str, tuple[Predicate, ...]]] = {"unavailable": {}, "read_only": {}}
    refuses: dict[str, str] = {}
    for kind, part in parts.items():
        plugin = served[kind]
        for key, alias in (plugins.call(plugin, "vlreg_rename", part=part) or {}).items():
            if rename.setdefault(key, alias) != alias:
                raise ValueError(
                    f"{plugins.describe(plugin)} renames {key!r} to {alias!r} for the {kind} part, "
                    f"but another part of {config.model_type!r} renames it to {rename[key]!r}."
                )
        envoys.update(plugins.call(plugin, "vlreg_envoys", part=part) or {})
        prefix = "vision." if kind == "vision" else ""
        for name, reason in plugins.refusals(kind, part.model_type).items():
            refuses[prefix + name] = reason
            tables["unavailable"][prefix + name] = (
                tables["unavailable"].get(prefix + name, ()) + (_refused(reason),))
        for name, table in tables.items():
            for row, predicate in (plugins.call(plugin, f"vlreg_{name}", part=part) or {}).items():
                table[prefix + row] = table.get(prefix + row, ()) + (predicate,)

    def wrapper(hook: str) -> Any:
        return plugins.call(served["wrapper"], hook, part=parts["wrapper"])

    entry = wrapper("vlreg_entry") if "vision" in parts else None
    if entry is not None:
        envoys.update(entry.envoys())

    return Family(
        name=plugins.plugin_manager().get_name(served["wrapper"]),
        parts=parts,
        plugins=served,
        rename=ServerSide(rename),
        envoys=ServerSide(envoys),
        entry=entry,
        unavailable=tables["unavailable"],
        image_grids=wrapper("vlreg_image_grids") if "vision" in parts else None,
        read_only=tables["read_only"],
        unserved=unserved,
        refuses=refuses,
        load_options=dict(wrapper("vlreg_load_options") or {}),
        suppressed_tokens=tuple(wrapper("vlreg_suppressed_tokens") or ()),
        processor=wrapper("vlreg_processor"),
    )


def _refused(reason: str) -> Predicate:
    """The predicate of a row a claim refuses: always that reason."""
    return lambda envoy: reason


def _unclaimed(part: Part, served: dict[str, Any]) -> str:
    if plugins.contenders(part.kind, part.model_type):
        return f"{part.root.model_type!r} cannot load: {plugins.contested_message(part.kind, part.model_type)}"
    families = sorted(model_type for (kind, model_type) in plugins.claims() if kind == "wrapper")
    installed = ", ".join(families) or "none"
    held_back = plugins.not_loaded_serving(part.kind, part.model_type)
    which = "loaded" if held_back else "installed"
    if part.kind == "wrapper":
        what = f"No {which} vlreg plugin serves model_type {part.model_type!r}"
    else:
        what = (
            f"The {part.root.model_type!r} checkpoint is served by "
            f"{plugins.describe(served['wrapper'])}, but no {which} plugin serves its "
            f"{part.kind} model, model_type {part.model_type!r}"
        )
    if held_back:
        named = "; ".join(f"{name!r} ({why}) from {dist}" for name, dist, why in held_back)
        return (
            f"{what}. An installed plugin that serves it was not loaded: {named}. Enable it "
            f"(take it out of VLREG_DISABLE_PLUGINS, or add it to VLREG_LOAD_PLUGINS) to load this checkpoint."
        )
    fix = " or ".join(f"install the {dist} distribution (from the vlreg repository: pip install ./{folder})"
                      for dist, folder in plugins.in_catalog(f"{part.kind}:{part.model_type}"))
    fix = fix or "no known plugin serves it; docs/writing-a-plugin.md shows how to write one"
    return f"{what}. Installed families: {installed}. To load it, {fix}."
