"""Writing a skeleton's files from a `Survey`.

The skeleton is laid out as vlreg's own plugins are: ``__init__.py`` holds the mounts, the
image's entry and the family as one `vlreg.plugin.Plugin` declaration; ``text.py`` and
``vision.py`` hold each claimed part's names and envoys (the modeling module imported when
a checkpoint resolves, not with the plugin); ``checkpoints.py`` its builder; and
``tests/test_conformance.py`` the conformance suite. Every declaration is written out
literally (paths, names, the entry), so the author reads what was found and edits it in
place; a part an installed plugin serves gets no declarations, only a comment naming that
plugin. Generated code imports nothing of vlreg but `vlreg.plugin` and `vlreg.testing`.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from ..plugin import SCATTER as STANDARD_SCATTER
from ..plugin import Wrapper
from ..testing.shrink import has_processor
from .skeletons import (ADAPTER_GRIDS, BASE_PROMPTS, BUILD, BUILDERS, CHECKPOINTS, FEATURE_LAYER, IMAGE_GRIDS_TODO, OWN,
                        PARTS, PYPROJECT, READ_ONLY, TEST_TODO)
from .survey import Survey, survey

#: transformers' composite layout, which a `Wrapper` takes unless told otherwise: its mounts
#: and the image's entry, as the survey reports them.
LAYOUT = {key: getattr(Wrapper.__attrs_attrs__, key).default for key in ("text", "vision", "projector")}
SCATTER = (STANDARD_SCATTER.host, STANDARD_SCATTER.operation, STANDARD_SCATTER.argument)

#: What each tower adapter is, for the generated module, and the rows its tests expect
#: to be unavailable (a fragment of each reason).
ADAPTER_ABOUT = {
    "qwen_vit": (
        "The tower is the Qwen ViT (every image of a prompt packed in one row, attention run once\n"
        "per image), which vlreg-qwen2-vl publishes as the adapter \"qwen_vit\": its envoy classes,\n"
        "tower names, image grids and read-only rows (the merger runs inside the tower) serve it here.",
        {"vision.self_attn.attention_scores": "once per image",
         "vision.self_attn.attention_probabilities": "once per image"},
    ),
}


def write_plugin(name: str, out: str | Path, source: str | Path, processor: str | Path | None = None) -> Path:
    """Write the plugin ``vlreg-<name>`` for the family of checkpoint folder ``source``
    into ``out``; returns its folder.

    ``processor``: a folder holding the family's tokenizer and processor, for a
    ``source`` that holds only a config (by default one is borrowed from a tiny checkpoint
    an installed plugin builds for the family, if any).
    """
    from transformers import AutoConfig

    from .processor import borrow, copy, release, takes_turns

    found = survey(source)
    folder = Path(out) / f"vlreg-{name.replace('_', '-')}"
    package = "vlreg_" + re.sub(r"\W", "_", name)
    if folder.exists():
        raise FileExistsError(f"{folder} exists: remove it or choose another --out")
    borrowed = None
    if processor is not None or not has_processor(source):
        borrowed = borrow(AutoConfig.from_pretrained(source), processor)
    with_processor = borrowed.folder if borrowed is not None else source if has_processor(source) else None
    turns = takes_turns(with_processor) if with_processor is not None else True
    try:
        write(name, folder, package, found, Path(source).resolve(), borrowed, turns)
        if borrowed is not None:
            copy(borrowed, folder / package / "processor")
    finally:
        if borrowed is not None:
            release(borrowed)
    return folder


def write(name: str, folder: Path, package: str, found: Survey, source: Path, borrowed: Any, turns: bool = True) -> None:
    """Write the distribution ``folder``: pyproject, the package, its builder and test
    (``turns``: whether the processor's chat template takes turns, as the suite's prompts do)."""
    from ..core.host import plugins

    served = {kind: plugins.claimant(kind, model_type) for kind, model_type in found.parts.items()}
    claimed = [kind for kind in served if served[kind] is None]
    elsewhere = {kind: plugins.describe(plugin) for kind, plugin in served.items() if plugin is not None}
    (folder / package).mkdir(parents=True)
    (folder / "tests").mkdir()
    data = f'\n[tool.setuptools.package-data]\n{package} = ["processor/*"]\n' if borrowed is not None else ""
    # the distributions publishing the adapter the skeleton builds on: it imports their code
    publishers = [dist for dist, entry in plugins.catalog().items() if found.tower_adapter in entry["adapters"]]
    dependencies = "[" + ", ".join(f'"{dist}"' for dist in ["vlreg", *publishers]) + "]"
    (folder / "pyproject.toml").write_text(
        PYPROJECT.format(name=name.replace("_", "-"), entry=name, package=package, dependencies=dependencies) + data
    )
    (folder / package / "__init__.py").write_text(module(name, found, claimed, elsewhere, source))
    if "text" in claimed:
        (folder / package / "text.py").write_text(part_module(found, "text"))
    if "vision" in claimed:
        (folder / package / "vision.py").write_text(part_module(found, "vision"))
    (folder / package / "checkpoints.py").write_text(checkpoints(name, found, source, borrowed))
    (folder / "tests" / "test_conformance.py").write_text(test(name, found, turns))


def _alias(found: Survey) -> str | None:
    """The name the skeleton gives the tower adapter it uses, if any."""
    return found.tower_adapter.upper() if found.tower_adapter else None


def module(name: str, found: Survey, claimed: list[str], elsewhere: dict[str, str], source: Path) -> str:
    """The plugin's ``__init__.py``: the wrapper's declarations and the `Plugin`."""
    alias = _alias(found) if "wrapper" in claimed and found.vision is not None else None
    # the adapter is the tower's: vision.py holds it where the skeleton claims the tower
    adapter = f"vision.{alias}" if alias and "vision" in claimed else alias
    imports = {"Plugin"} | {declaration for kind, declaration in PARTS.items() if kind in claimed}
    if "wrapper" in claimed and found.vision is not None:
        entry = _wrapper_fields(found).get("entry", "")
        imports |= {name for name in ("Scatter", "CrossAttention") if entry.startswith(name)}
        if not alias:
            imports.add(("FEATURE_LAYER_READ_ONLY" if found.feature_layer == "num_hidden_layers"
                         else "hidden_states_read_only") if found.feature_layer else "read_only")
    if alias and adapter == alias:
        imports.add("adapter")
    if "wrapper" in claimed and found.norm is None:
        imports.add("UNNORMED")
    host = found.scatter[0] if found.scatter else found.text.rpartition(".")[0]
    surveyed = textwrap.fill(
        f"Written by `vlreg new-plugin` from a survey of {found.architecture}'s module tree, built on the meta "
        f"device from {source}/config.json. Check each declaration against the model (print it, and "
        f"`{f'model.{host}.source' if host else 'model.source'}` for the scatter), then extend the tests beside "
        f"the conformance suite. TODO comments name what the survey cannot know.", width=88)
    parts = [f'"""The {found.model_type} family for vlreg, declared against `vlreg.plugin`.\n\n{surveyed}\n"""',
             _import("vlreg.plugin", sorted(imports, key=lambda name: (name[0].islower(), name)))]
    local = [kind for kind in ("text", "vision") if kind in claimed]
    if local:
        parts[-1] += f"\nfrom . import {', '.join(local)}\n"
    parts += [_comment(textwrap.fill(f"The {kind} part ({found.parts[kind]!r}) is served by {who}: its "
                                     f"declarations are left to it.", 86), "# ") for kind, who in elsewhere.items()]
    if alias and adapter == alias:
        parts.append(_comment(ADAPTER_ABOUT[found.tower_adapter][0], "#: ") + f'{alias} = adapter("{found.tower_adapter}")\n')
    if "wrapper" in claimed:
        parts.append(_wrapper(found, adapter))
    parts.append(_declaration(name, found, claimed, adapter))
    return "\n\n".join(parts)


def _wrapper_fields(found: Survey) -> dict[str, str]:
    """The `Wrapper` fields that differ from transformers' composite layout (`LAYOUT`), as code."""
    fields = {key: _code(getattr(found, key)) for key, path in LAYOUT.items() if getattr(found, key) != path}
    rename = {f"{found.text}.{child}": name for name in ("layers", "embed_tokens", "norm")
              if (child := getattr(found, name)) and child != name}
    if found.lm_head != "lm_head":
        rename[found.lm_head] = "lm_head"
    if found.text_only:
        mounts = {path: name for path, name in found.text_only[1].items() if name != "lm_head" or path != "lm_head"}
        prefixes = {path.rpartition(".")[0] for path in mounts}
        if len(prefixes) == 1 and all(path.rpartition(".")[2] == name for path, name in mounts.items()):
            fields["text_only"] = _code(prefixes.pop())
        else:  # a text-only class laid out otherwise: every text mount named
            fields["text"] = "None"
            rename = {f"{found.text}.{getattr(found, name)}": name for name in ("layers", "embed_tokens", "norm")
                      if getattr(found, name)} | rename | mounts
    if rename:
        fields["rename"] = _dict(rename, 4)
    if found.norm is None:
        fields["readout"] = "UNNORMED"
    if found.cross is not None:
        host, argument = found.cross
        fields["entry"] = f'CrossAttention(host="{host}", argument={argument!r})'
    elif found.scatter is None:
        fields["entry"] = "None  # TODO: no image reaches the text model until this is set"
    elif found.scatter != SCATTER:
        host, operation, argument = found.scatter
        fields["entry"] = f'Scatter(host="{host}", operation="{operation}", argument={argument!r})'
    return fields


def _wrapper(found: Survey, adapter: str | None) -> str:
    """What the survey found of the wrapper, said in a comment, and what its `Wrapper` needs
    beyond the fields (the read-only rows, the image grids)."""
    children = ", ".join(name for name in (found.layers, found.embed_tokens, found.norm) if name)
    where = f"the text model at {found.text} ({children}), the tower at {found.vision}, the projector at {found.projector}"
    if found.cross is not None:
        where += f", the image reaching the text model as its argument {found.cross[1]!r}"
    elif found.scatter is not None:
        where += (f", the image written in at model.{found.scatter[0] + '.' if found.scatter[0] else ''}"
                  f"source.{found.scatter[1]} (the features its argument {found.scatter[2]!r})")
    if found.text_only:
        where += f"; a text-generation load builds transformers' text-only {found.text_only[0]}"
    said = textwrap.fill(f"The survey found {where}. The Wrapper states what differs from transformers' composite "
                         f"layout (vlreg.plugin.Wrapper's defaults).", width=88)
    text = _notes(found.notes["wrapper"]) + _comment(said, "# ")
    if found.vision is None:
        return text
    if adapter:
        return (text + f"\n#: Values a write to would not reach the text model, refused with a reason.\n"
                f"READ_ONLY = {adapter}.refuses\n" + ADAPTER_GRIDS.format(adapter=adapter))
    if found.feature_layer and found.feature_layer != "num_hidden_layers":
        return text + FEATURE_LAYER.format(depth=found.feature_layer)
    return text if found.feature_layer else text + READ_ONLY


def _declaration(name: str, found: Survey, claimed: list[str], adapter: str | None) -> str:
    """The builders and the `Plugin` declaration: one part per claimed kind."""
    declared = []
    if "wrapper" in claimed:
        fields = {**_wrapper_fields(found)}
        if found.vision is not None:
            fields["refuses"] = ("FEATURE_LAYER_READ_ONLY" if found.feature_layer == "num_hidden_layers" and not adapter
                                 else "READ_ONLY")
            if adapter:
                fields["image_grids"] = "image_grids"
        else:  # the image part is discrete codes: its entry waits for the declaration that serves them
            fields["entry"] = "None"
        line = f'Wrapper({", ".join([_code(found.parts["wrapper"]), *(f"{k}={v}" for k, v in fields.items())])})'
        listed = "".join(f"        {key}={value},\n" for key, value in fields.items())
        declared.append(line if len(line) <= 96 and "\n" not in line and "#" not in line
                        else f'Wrapper(\n        "{found.parts["wrapper"]}",\n{listed}    )')
    if "text" in claimed:
        declared.append(f'Text("{found.parts["text"]}", rename=text.TEXT_RENAME, envoys=text.envoys)')
    if "vision" in claimed:
        declared.append(f'Tower("{found.parts["vision"]}", rename=vision.TOWER_RENAME, envoys=vision.envoys)')
    text = ""
    if "wrapper" in claimed and found.vision is None:
        text += ("# The config has no vision part, so the host asks no entry: the image's entry (an ImageCodes at\n"
                 "# the call found above) waits for the declaration that serves the image part (see the TODO\n"
                 "# above), and the Wrapper declares none.\n\n\n")
    elif "wrapper" in claimed and not adapter:
        text += IMAGE_GRIDS_TODO + "\n\n\n"
    text += BUILDERS.format(name=name)
    return text + "plugin = Plugin(\n" + "".join(f"    {part},\n" for part in declared) + "    checkpoints=builders,\n)\n"


def part_module(found: Survey, kind: str) -> str:
    """``text.py`` or ``vision.py``: the part's names inside it and its envoys."""
    alias = _alias(found) if kind == "vision" else None
    classes = found.text_envoys if kind == "text" else found.tower_envoys
    modules = _aliases({cls.__module__ for cls in classes})
    imports = {standard for standard in classes.values() if "." not in standard}
    own = imports & set(OWN)
    imports = (imports - own).union(*(OWN[name][1] for name in own))
    if alias:
        imports.add("adapter")
    what = "text model" if kind == "text" else "tower"
    names = "inside a block" if kind == "text" else "from the tower"
    parts = [f'"""The {what} ({found.parts[kind]!r}): its names {names} and its modules\' envoys."""',
             _import("vlreg.plugin", sorted(imports, key=lambda name: (name[0].islower(), name)))]
    if alias:
        parts.append(_comment(ADAPTER_ABOUT[found.tower_adapter][0], "#: ") + f'{alias} = adapter("{found.tower_adapter}")\n')
    parts += [OWN[name][0].strip("\n") + "\n" for name in sorted(own)]
    if kind == "text":
        parts.append(_notes(found.notes["text"]) + "#: Inside a text block. A single name binds on every module that has it.\n"
                     f"TEXT_RENAME = {_dict(found.text_rename)}\n")
    else:
        rename = f"{alias}.tower_rename" if alias else _dict(found.tower_rename)
        parts.append(_notes(found.notes["vision"]) + "#: From the tower. Never a bare name a text block also has.\n"
                     f"TOWER_RENAME = {rename}\n")
    entries = "".join(f"        {_ref(cls, modules)}: {standard.replace('ADAPTER', alias or '')},\n"
                      for cls, standard in classes.items())
    body = "".join(f"    import {module} as {short}\n" for module, short in modules.items())
    parts.append(f'def envoys(part):\n    """The {what}\'s module classes onto vlreg\'s envoys (the modeling module is '
                 f'imported\n    when a checkpoint resolves, not with the plugin)."""\n{body}\n    return {{\n{entries}    }}\n')
    return "\n\n".join(parts)


def checkpoints(name: str, found: Survey, source: Path, borrowed: Any) -> str:
    """The package's ``checkpoints.py``: a small copy of the source folder."""
    text = CHECKPOINTS.format(source=str(source), path="from pathlib import Path\n\n" if borrowed else "")
    if borrowed is None and not has_processor(source):
        return text + _notes([f"SOURCE holds no processor, and no installed plugin builds a {found.model_type} "
                              f"checkpoint to borrow one from: point SOURCE at a folder of the family with its "
                              f"tokenizer and processor files, or pass small_copy processor= such a folder "
                              f"(vlreg new-plugin --processor does it for you)"]) + BUILD.format(arguments="")
    if borrowed is None:
        return text + BUILD.format(arguments="")
    origin = textwrap.fill(f"SOURCE holds no processor, so one is borrowed from {borrowed.origin}: its tokenizer, "
                           f"image processor and chat template, copied into the package (processor/) when the "
                           f"plugin was written. The config takes from it the fields that must agree with that "
                           f"processor (AGREE: token ids, vocabulary, image geometry). Point SOURCE at a folder "
                           f"with the family's own processor files and drop both to use the real ones.",
                           width=88, initial_indent="#: ", subsequent_indent="#: ")
    agree = "{\n" + "".join(f"    {part!r}: {fields!r},\n" for part, fields in borrowed.agree.items()) + "}"
    return (text + f"{origin}\nPROCESSOR = Path(__file__).parent / \"processor\"\nAGREE = {agree}\n"
            + BUILD.format(arguments=", processor=PROCESSOR, agree=AGREE"))


def test(name: str, found: Survey, turns: bool = True) -> str:
    """The conformance test: the suite, with the mixins for what the survey found."""
    mixins = [mixin for mixin, present in (("ExpertsConformance", found.experts),
                                           ("LinearAttentionConformance", found.hybrid)) if present]
    suite = "CrossAttentionConformance" if found.cross else "VisionConformance" if found.vision else "TextConformance"
    bases = ", ".join([*mixins, suite])
    unavailable = dict(ADAPTER_ABOUT[found.tower_adapter][1]) if found.tower_adapter else {}
    if found.experts and not found.shared_expert:
        unavailable["mlp.shared_expert_output"] = "no shared expert"
    lines = [f'"""{name} against vlreg\'s conformance suite."""\n',
             _import("vlreg.testing.conformance", sorted([*mixins, suite])) + "\n",
             f"class TestFamily({bases}):",
             f'    checkpoint = "{name}"',
             f"    native = {_dict(found.native, 4)}"]
    if unavailable:
        lines.append(f"    unavailable = {_dict(unavailable, 4)}")
    if found.inserted and found.vision:
        lines.append(f"    # the wrapper adds rows of its own ({', '.join(found.inserted)}) to the projector's output\n"
                     f"    projector_output_is_features = False")
    if found.vision and found.tower_layers is None:
        lines.append("    tower_blocks = False  # the survey found no blocks in the tower")
    lines.append(TEST_TODO)
    if not turns:
        lines.append(BASE_PROMPTS)
    return "\n".join(lines)


def _import(module: str, names: list[str]) -> str:
    line = f"from {module} import {', '.join(names)}\n"
    return line if len(line) <= 100 else f"from {module} import (\n" + "".join(f"    {n},\n" for n in names) + ")\n"


def _code(value: str | None) -> str:
    """A path as the generated code writes it."""
    return "None" if value is None else f'"{value}"'


def _aliases(modules: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for module in sorted(modules):
        short = module.rpartition(".")[2]
        found[module] = short if short not in found.values() else f"{short}_{len(found)}"
    return found


def _ref(cls: type, modules: dict[str, str]) -> str:
    return f"{modules[cls.__module__]}.{cls.__qualname__}"


def _dict(entries: dict, indent: int = 0) -> str:
    lines = [f'{" " * indent}    "{key}": "{value}",\n' for key, value in entries.items() if key != value]
    return "{\n" + "".join(lines) + " " * indent + "}" if lines else "{}"


def _comment(text: str, prefix: str) -> str:
    return "".join(f"{prefix}{line}\n" for line in text.splitlines())


def _notes(notes: list[str]) -> str:
    return "".join(textwrap.fill(f"TODO: {note}", width=88, initial_indent="# ", subsequent_indent="#   ") + "\n"
                   for note in notes)


#: The vlreg.plugin declaration of each kind of part.
