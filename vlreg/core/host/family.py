"""From a checkpoint's config to the `Family` that serves it: `resolve` splits the config
into its parts, finds the plugin that claimed each, and merges what they contribute, which
is all `StandardizedTransformer` needs to build."""

from __future__ import annotations

from typing import Any, Callable

from attrs import frozen

from ..errors import NoFamily
from ..serving.reference import ServerSide
from ..serving.refusals import first_sentences, merge
from . import plugins
from .parts import KINDS, Part, is_kind


@frozen
class Family:
    """What serves one checkpoint: the plugin per part and their merged contributions;
    ``name`` is the wrapper's plugin (the family), the other parts' may differ."""

    name: str
    parts: dict[str, Part]
    plugins: dict[str, Any]
    rename: dict
    envoys: dict
    entry: Any  # the wrapper's `vlreg_entry`, or None
    #: The refusal table, ``{row or pattern: (reason, ...)}``, of its parts and entry.
    refuses: dict[str, tuple] = {}
    image_grids: Callable | None = None  # the wrapper's `vlreg_image_grids`
    video_grids: Callable | None = None  # the wrapper's `vlreg_video_grids`
    unserved: dict[str, str] = {}  # the config's other parts no plugin claims: {field: model_type}
    load_options: dict[str, dict] = {}  # the wrapper's `vlreg_load_options`
    suppressed_tokens: tuple[int, ...] = ()  # the wrapper's `vlreg_suppressed_tokens`
    processor: Callable | None = None  # the wrapper's `vlreg_processor`: ``adapt(processor)``, or None
    readout: Any = None  # the wrapper's `vlreg_readout`: a `Readout`, a sentence refusing the lens, or None
    layers: Any = None  # the wrapper's `vlreg_layers`: an `Interleaved`, or None (the text model's ``layers``)

    @property
    def sentences(self) -> dict[str, str]:
        """What the family never serves, whatever the load, ``{name: why}``: `support` lists it."""
        return first_sentences(self.refuses)

    def served_by(self, kind: str) -> str:
        """The name of the plugin serving the ``kind`` part (its entry point's name)."""
        return plugins.plugin_manager().get_name(self.plugins[kind])

    def __repr__(self) -> str:
        served = [f"{kind}={part.model_type!r} by {plugins.describe(self.plugins[kind])}"
                  for kind, part in self.parts.items()]
        unserved = [f"{kind}={model_type!r} unserved" for kind, model_type in self.unserved.items()]
        return f"Family({self.name!r}: {', '.join(served + unserved)})"


#: The config fields a vision part is read from, in order: a tower's, else a VQ encoder's
#: (Emu3's, Chameleon's). Janus has both; its ``vq_config`` is image generation's.
VISION_CONFIGS = ("vision_config", "vq_config")


def vision_config(config: Any) -> Any:
    """The config of ``config``'s vision part (`VISION_CONFIGS`), or None. Where it holds
    none, a plugin claiming a vision part of the wrapper's own model type
    (``Tower("fuyu")``) says the wrapper's config is the vision part's: a model with no
    tower whose patch sizes sit on the top-level config (Fuyu's one linear map). An
    encoder-decoder whose encoder holds the tower keeps its config in the encoder's
    (``config.encoder.vision_config``: T5Gemma 2's)."""
    found = next((found for name in VISION_CONFIGS if (found := getattr(config, name, None)) is not None), None)
    if found is None and plugins.claimant("vision", config.model_type) is not None:
        return config
    encoder = getattr(config, "encoder", None) if getattr(config, "is_encoder_decoder", False) else None
    if found is None and encoder is not None:  # the tower is the encoder's (T5Gemma 2's)
        return getattr(encoder, "vision_config", None)
    return found


def parts_of(config: Any) -> dict[str, Part]:
    """The parts of ``config``: a wrapper and a text part (a text-only config is its own),
    a vision part if any, and every other config it holds, named by its field."""
    text, vision = config.get_text_config(), vision_config(config)
    parts = {"wrapper": Part("wrapper", config.model_type, config, config),
             "text": Part("text", text.model_type, text, config)}
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
            raise NoFamily(plugins.why_unserved(part, served.get("wrapper")))
        declined = plugins.call(plugin, "vlreg_declines", part=part)
        if declined:
            raise NoFamily(f"{plugins.describe(plugin)} does not serve this {config.model_type!r} checkpoint: "
                           f"{declined}")
        served[kind] = plugin

    rename: dict = {}
    envoys: dict = {}
    refuses: dict[str, tuple] = {}
    # the wrapper's mounts last: nnsight binds a model's keys in order, so a part's key, which
    # names its own modules (SigLIP's ``encoder.layers``), never resolves through a mount
    # (T5Gemma 2's ``encoder``, the encoder's text model)
    for kind in sorted(parts, key=lambda kind: kind == "wrapper"):
        plugin = served[kind]
        for key, alias in (plugins.call(plugin, "vlreg_rename", part=parts[kind]) or {}).items():
            if rename.setdefault(key, alias) != alias:
                raise ValueError(f"{plugins.describe(plugin)} renames {key!r} to {alias!r} for the {kind} part, "
                                 f"but another part of {config.model_type!r} renames it to {rename[key]!r}.")
    for kind, part in parts.items():
        plugin = served[kind]
        envoys.update(plugins.call(plugin, "vlreg_envoys", part=part) or {})
        prefix = "vision." if kind == "vision" else ""
        merge(refuses, plugins.refusals(kind, part.model_type), prefix)
        merge(refuses, plugins.call(plugin, "vlreg_refuses", part=part), prefix)

    def wrapper(hook: str) -> Any:
        return plugins.call(served["wrapper"], hook, part=parts["wrapper"])

    entry = wrapper("vlreg_entry") if "vision" in parts else None
    if entry is not None:
        envoys.update(entry.envoys())
        merge(refuses, entry.refuses())

    return Family(
        name=plugins.plugin_manager().get_name(served["wrapper"]), parts=parts, plugins=served,
        rename=ServerSide(rename), envoys=ServerSide(envoys), entry=entry, refuses=refuses,
        image_grids=wrapper("vlreg_image_grids") if "vision" in parts else None,
        video_grids=wrapper("vlreg_video_grids") if "vision" in parts else None,
        unserved=unserved, load_options=dict(wrapper("vlreg_load_options") or {}),
        suppressed_tokens=tuple(wrapper("vlreg_suppressed_tokens") or ()),
        processor=wrapper("vlreg_processor"), readout=wrapper("vlreg_readout"),
        layers=wrapper("vlreg_layers"),
    )



#: A ``rename`` key that starts with it names a path from the model's root alone
#: (``{"/output": "lm_head"}``: GIT's readout is the root's ``output``, a name every BERT
#: sublayer's child has too, where nnsight would bind the alias on every envoy holding it).
#: nnsight resolves no such key (no module is named so), so it binds them nowhere itself.
ROOT = "/"


def bind_anchored(root: Any, rename: dict) -> None:
    """Bind each root-anchored key's alias on ``root`` alone, to the module its path names
    (walked by module name, so a child named as an nnsight value, ``output``, is reachable)."""
    for key, alias in rename.items():
        if not str(key).startswith(ROOT):
            continue
        found = root
        for name in key[len(ROOT):].split("."):
            found = found._child_map[name]
        object.__setattr__(root, alias, found)
        root._aliases[alias] = key[len(ROOT):]
