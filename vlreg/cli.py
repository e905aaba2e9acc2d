"""The ``vlreg`` command: ``plugins``, ``inspect``, ``demo``, ``new-plugin``, ``collect``, ``train``,
``features`` (the last two's arguments in `vlreg.commands`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    try:
        return arguments.run(arguments)
    except Exception as error:  # a command's error is one line; --debug shows where it came from
        if arguments.debug:
            raise
        print(f"vlreg {arguments.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def parser() -> argparse.ArgumentParser:
    """The command line. Each subcommand names the function that runs it (``run``), which
    imports what it needs when it runs: ``vlreg --help`` imports no torch."""
    top = argparse.ArgumentParser(prog="vlreg", description="Standardized tracing of vision-language models.")
    top.add_argument("--debug", action="store_true", help="show the whole traceback of an error")
    commands = top.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("plugins", help="the installed plugins and the families they serve")
    listing.add_argument("--all", action="store_true",
                         help="also the parts, hooks and test checkpoints (builder names), and plugins not loaded")
    listing.add_argument("--coverage", action="store_true",
                         help="every model type transformers maps to image-text-to-text, what serves it, what it refuses where it serves it partially, and why a type refused by name is not served")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_plugins_command)

    inspect = commands.add_parser(
        "inspect", help="a checkpoint's model type, parameters, weight memory, names, sizes and support(); no weights read")
    inspect.add_argument("checkpoint", help="a checkpoint folder (or a hub id)")
    inspect.add_argument("--task", default="image-text-to-text", help="the load's task (default: image-text-to-text)")
    inspect.add_argument("--attn-implementation", default=None, help="e.g. eager, to see the attention interior's rows")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(run=_inspect_command)

    demo = commands.add_parser("demo", help="trace the toy model (shipped with vlreg), print what it answered and what the helpers found")
    demo.add_argument("--out", default=None, help="also draw the analysis helpers' scores on the image, as PNGs in this folder")
    demo.set_defaults(run=_demo_command)

    new = commands.add_parser("new-plugin", help="write a plugin skeleton for a checkpoint's family")
    new.add_argument("name", help="the plugin's name, e.g. the family's model_type")
    new.add_argument("--from", dest="source", required=True,
                     help="a checkpoint folder of the family (config, tokenizer, processor; no weights needed)")
    new.add_argument("--out", default=".", help="where to write the plugin folder (default: here)")
    new.add_argument("--processor", default=None,
                     help="a folder with the family's tokenizer and processor, for a --from folder that holds only "
                          "a config (default: borrowed from a tiny checkpoint an installed plugin builds, if any)")
    new.set_defaults(run=_new_plugin_command)

    _collect_parser(commands)
    from .commands import add_features, add_train

    add_train(commands)
    add_features(commands)
    return top


def _plugins_command(arguments: argparse.Namespace) -> int:
    if arguments.coverage:
        return _coverage(arguments.json)
    return _plugins(arguments.all, arguments.json)


def _inspect_command(arguments: argparse.Namespace) -> int:
    from .inspection import inspect

    return inspect(arguments.checkpoint, arguments.task, arguments.attn_implementation, arguments.json)


def _demo_command(arguments: argparse.Namespace) -> int:
    from .demo import run

    run(arguments.out)
    return 0


def _new_plugin_command(arguments: argparse.Namespace) -> int:
    return _new_plugin(arguments.name, arguments.out, arguments.source, arguments.processor)


def _collect_parser(commands: Any) -> None:
    collect = commands.add_parser(
        "collect", help="values at every image of a folder into a store (resumable; each torchrun process its share)")
    collect.add_argument("checkpoint", help="a checkpoint folder (or a hub id)")
    collect.add_argument("--images", required=True,
                         help="a folder of images and videos (read recursively), or a folder datasets' save_to_disk wrote")
    collect.add_argument("--values", nargs="+", required=True, metavar="NAME",
                         help="standard value names, as in a trace: 'layers[0].layer_output' vision.image_features")
    collect.add_argument("--out", required=True, help="the store's folder (a rerun adds the images it lacks)")
    collect.add_argument("--prompt", default=None,
                         help="the question asked with each image (the chat template places the image before it), "
                              "or a full prompt holding the image token (default: the image alone)")
    collect.add_argument("--at", default="image", choices=("image", "text", "all", "last"),
                         help="which tokens' rows: the image's (default), the other tokens, all, the last one")
    collect.add_argument("--batch", type=int, default=8, help="images per forward (default: 8)")
    collect.add_argument("--store-dtype", default=None, help="the rows' dtype on disk: float32, bfloat16 or float16 "
                                                           "(default: as the model computes)")
    collect.add_argument("--on-error", default="stop", choices=("stop", "skip"),
                         help="an unreadable image: stop (default), or skip it and name it at the end")
    collect.add_argument("--frames", type=int, default=None, help="frames read from each video file, evenly spaced "
                         "from its first to its last (default: every frame; videos need pip install 'vlreg[video]')")
    collect.add_argument("--shard-images", type=int, default=None, help="images per shard (default: ~256 MiB of rows)")
    collect.add_argument("--image-column", default="image", help="a dataset's image column (default: image)")
    collect.add_argument("--prompt-column", default=None, help="a dataset's column of each image's question")
    collect.add_argument("--key-column", default=None, help="a dataset's column of image names (default: row number)")
    collect.add_argument("--device", default="cpu", help="where the model runs (default: cpu; cuda under torchrun: "
                                                         "each process its LOCAL_RANK's)")
    collect.add_argument("--dtype", default=None, help="the weights' dtype, e.g. bfloat16 (default: float32)")
    collect.add_argument("--attn-implementation", default=None, help="transformers' attention implementation")
    collect.add_argument("--remote", nargs="?", const=True, default=False, metavar="HOST",
                         help="trace each batch on NDIF, or on the server at HOST (http://host:port), or 'local' "
                              "(nnsight's serialized rehearsal here); the rows are written here")
    collect.set_defaults(run=_collect_command)


def _collect_command(arguments: argparse.Namespace) -> int:
    from .collect.command import run

    return run(arguments)


def _new_plugin(name: str, out: str, source: str, processor: str | None) -> int:
    """Write the skeleton, and say which parts it leaves to installed plugins."""
    from transformers import AutoConfig

    from .core.host import plugins
    from .core.host.family import parts_of
    from .template import write_plugin

    folder = write_plugin(name, out, source, processor)
    print(f"wrote {folder}")
    parts = {kind: part.model_type for kind, part in parts_of(AutoConfig.from_pretrained(source)).items()}
    left = {kind: plugins.claimant(kind, model_type) for kind, model_type in parts.items()}
    for kind, plugin in left.items():
        if plugin is not None:
            print(f"the {kind} part {parts[kind]!r} is served by {plugins.describe(plugin)}: the skeleton leaves it to it")
    if all(plugin is not None for plugin in left.values()):
        names = sorted({plugins.plugin_manager().get_name(plugin) for plugin in left.values()})
        print(f"the skeleton serves nothing: write it with VLREG_DISABLE_PLUGINS={','.join(names)} to serve the family itself")
    return 0


def plugin_rows(everything: bool = False) -> list[dict[str, Any]]:
    """One row per plugin: name, distribution, version, families, and with
    ``everything`` the parts it serves, the hooks it implements, the checkpoints it
    builds for tests (`vlreg.testing.build` names, those of one builder together) and
    the plugins that were not loaded, with why."""
    from .core.host import plugins

    manager = plugins.plugin_manager()
    served = plugins.claims()
    rows = []
    for name, plugin in sorted(manager.list_name_plugin(), key=lambda item: item[0]):
        dist = plugins.distribution(plugin)
        parts = sorted((kind, model_type) for (kind, model_type), holder in served.items()
                       if holder is plugin and not plugins.declined(kind, model_type))
        row = {
            "name": name,
            "distribution": dist.name if dist else None,
            "version": dist.version if dist else None,
            "families": [model_type for kind, model_type in parts if kind == "wrapper"],
        }
        if everything:
            row["parts"] = {kind: [m for k, m in parts if k == kind] for kind in ("wrapper", "text", "vision")}
            row["hooks"] = sorted(caller.name for caller in manager.get_hookcallers(plugin) or [])
            row["checkpoints"] = _builder_names(plugins.call(plugin, "vlreg_checkpoints") or {})
        rows.append(row)
    if everything:
        rows += [{"name": name, "not loaded": why} for name, why in sorted(plugins.skipped.items())]
    return rows


def _builder_names(builders: dict[str, Any]) -> list[list[str]]:
    """The builders' names, those of one builder together, shortest first: a model
    type's name and the variant it builds (``["llava", "llava_interleave"]``)."""
    groups: dict[int, list[str]] = {}
    for name, builder in builders.items():
        groups.setdefault(id(builder), []).append(name)
    return sorted(sorted(names, key=lambda name: (len(name), name)) for names in groups.values())


def coverage() -> dict[str, str | None]:
    """Every model type the installed transformers maps to image-text-to-text: the plugin
    that serves it (its wrapper part), or ``None`` (unclaimed, or declined: `refused`)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    from .core.host import plugins

    served = plugins.claims()
    return {
        model_type: plugins.describe(served[("wrapper", model_type)])
        if ("wrapper", model_type) in served and not plugins.declined("wrapper", model_type) else None
        for model_type in sorted(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    }


def refused() -> dict[str, tuple[str, str]]:
    """The model types of `coverage` a plugin refuses by name, never serving them whatever
    the config (`vlreg.plugin.Claim`'s ``declines``): ``{model_type: (plugin, reason)}``."""
    from .core.host import plugins

    served = plugins.claims()
    return {model_type: (plugins.describe(served[("wrapper", model_type)]), reason)
            for model_type in coverage() if (reason := plugins.declined("wrapper", model_type))}


def partial() -> dict[str, dict[str, str]]:
    """The served model types of `coverage` that are served partially: what the claim on
    the wrapper refuses (`vlreg.plugin.Claim`'s ``refuses``), ``{model_type: {name: reason}}``."""
    from .core.host import plugins

    return {model_type: refused for model_type, plugin in coverage().items()
            if plugin and (refused := plugins.refusals("wrapper", model_type))}


def _coverage(as_json: bool) -> int:
    rows, partly, declined = coverage(), partial(), refused()
    if as_json:
        print(json.dumps({model_type: {"plugin": plugin, "refuses": partly.get(model_type, {}),
                                       "declines": declined.get(model_type, (None, None))[1]}
                          for model_type, plugin in rows.items()}, indent=2))
        return 0
    width = max(map(len, rows))
    for model_type, plugin in rows.items():
        refusals = partly.get(model_type)
        if model_type in declined:
            by, reason = declined[model_type]
            print(f"{model_type:<{width}}  refused by {by}: {reason}")
            continue
        print(f"{model_type:<{width}}  {plugin or 'not served'}{'  (partial)' if refusals else ''}")
        for name, reason in (refusals or {}).items():
            print(f"{'':<{width}}    refuses {name}: {reason}")
    served = sum(plugin is not None for plugin in rows.values())
    print(f"{served} of {len(rows)} image-text-to-text model types served ({len(partly)} of them partially); "
          f"{len(declined)} refused by name")
    return 0


def _plugins(everything: bool, as_json: bool) -> int:
    rows = plugin_rows(everything)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        if "not loaded" in row:
            print(f"{row['name']}: not loaded ({row['not loaded']})")
            continue
        source = f"{row['distribution']} {row['version']}" if row["distribution"] else "registered by hand"
        print(f"{row['name']} ({source}): families {', '.join(row['families']) or 'none'}")
        if everything:
            for kind, model_types in row["parts"].items():
                if model_types:
                    print(f"  {kind}: {', '.join(model_types)}")
            print(f"  hooks: {', '.join(row['hooks'])}")
            if row["checkpoints"]:
                names = ", ".join(" = ".join(group) for group in row["checkpoints"])
                print(f"  checkpoints (vlreg.testing.build): {names}")
    return 0


#: Files one of which a folder with a processor holds.
def _plugin_name(plugin: Any) -> str:
    from .core.host import plugins

    return plugins.describe(plugin)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
