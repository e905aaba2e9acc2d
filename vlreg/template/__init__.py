"""``vlreg new-plugin``: a plugin skeleton for a transformers vision-language family.

The skeleton is written from a survey of the model itself: its config (from a
checkpoint folder: config, tokenizer and processor, no weights needed) is cut down and
built on the meta device, and the module tree says where the text model, its blocks, the
tower, the projector and the scatter are. What the survey cannot know (a block that is
not a plain pre-norm sum, a tower that packs its images, values unavailable on some
loads) is left to the author, marked in the generated files. The parts an installed
plugin already serves are left to it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from attrs import frozen


@frozen
class Survey:
    """Where a family keeps what vlreg names, relative to the model root."""

    model_type: str
    parts: dict[str, str]
    text: str
    layers: str
    embed_tokens: str
    norm: str
    lm_head: str
    vision: str
    tower_layers: str
    patch_embed: str
    projector: str
    scatter_host: str
    scatter_operation: str
    classes: dict[str, type]
    block_names: dict[str, str]


def survey(source: str | Path) -> Survey:
    """Survey the family of the checkpoint folder ``source`` (only its config is read)."""
    from nnsight.intervention.envoy import Envoy
    from transformers import AutoConfig, AutoModelForImageTextToText

    from .testing.shrink import shrink

    config = shrink(AutoConfig.from_pretrained(source))
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    text_config, vision_config = config.get_text_config(), config.vision_config
    text = _submodel(model, text_config.model_type)
    vision = _submodel(model, vision_config.model_type)
    text_module, tower = model.get_submodule(text), model.get_submodule(vision)
    layers = _blocks(text_module)
    tower_layers = _blocks(tower)
    host = text.rpartition(".")[0]
    operations = Envoy(model.get_submodule(host)).source.names
    scatter = next((op for op in operations if "masked_scatter" in op), None)
    if scatter is None:
        raise ValueError(f"no masked_scatter in {type(model.get_submodule(host)).__name__}.forward; find the scatter by hand")
    siblings = [name for name, _ in model.get_submodule(host).named_children() if f"{host}.{name}" not in (text, vision)]
    block, tower_block = text_module.get_submodule(f"{layers}.0"), tower.get_submodule(f"{tower_layers}.0")
    names = {
        "text_attention": _child(block, ("self_attn", "attn", "attention")),
        "text_mlp": _child(block, ("mlp", "feed_forward")),
        "tower_attention": _child(tower_block, ("self_attn", "attn", "attention")),
        "tower_mlp": _child(tower_block, ("mlp", "feed_forward")),
    }
    return Survey(
        model_type=config.model_type,
        parts={"wrapper": config.model_type, "text": text_config.model_type, "vision": vision_config.model_type},
        text=text,
        layers=layers,
        embed_tokens=_relative(text_module, text_module.get_input_embeddings()),
        norm=_child(text_module, ("norm", "final_layernorm", "ln_f")),
        lm_head=_relative(model, model.get_output_embeddings()),
        vision=vision,
        tower_layers=tower_layers,
        patch_embed=_patch_embed(tower),
        projector=f"{host}.{siblings[0]}" if siblings else "",
        scatter_host=host,
        scatter_operation=scatter,
        classes={
            "block": type(block),
            "attention": type(block.get_submodule(names["text_attention"])),
            "mlp": type(block.get_submodule(names["text_mlp"])),
            "tower": type(tower),
            "tower_block": type(tower_block),
            "tower_attention": type(tower_block.get_submodule(names["tower_attention"])),
            "tower_mlp": type(tower_block.get_submodule(names["tower_mlp"])),
        },
        block_names=names,
    )


def _submodel(model: torch.nn.Module, model_type: str) -> str:
    for name, module in model.named_modules():
        if name and getattr(getattr(module, "config", None), "model_type", None) == model_type:
            return name
    raise ValueError(f"no submodule of {type(model).__name__} is a {model_type!r} model")


def _blocks(module: torch.nn.Module) -> str:
    lists = [(name, m) for name, m in module.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
    return max(lists, key=lambda item: len(item[1]))[0]


def _child(module: torch.nn.Module, names: tuple[str, ...]) -> str:
    for name in names:
        if isinstance(getattr(module, name, None), torch.nn.Module):
            return name
    raise ValueError(f"{type(module).__name__} has none of {names}; name it by hand")


def _relative(root: torch.nn.Module, module: torch.nn.Module) -> str:
    return next(name for name, m in root.named_modules() if m is module)


def _patch_embed(tower: torch.nn.Module) -> str:
    for name, module in tower.named_modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Conv3d)):
            parent = name.rpartition(".")[0]
            return parent if "PatchEmbed" in type(tower.get_submodule(parent)).__name__ else name
    raise ValueError(f"no patch convolution in {type(tower).__name__}")


def write_plugin(name: str, out: str | Path, source: str | Path) -> Path:
    """Write the plugin ``vlreg-<name>`` for the family of checkpoint folder ``source``
    into ``out``; returns its folder."""
    from .core import plugins

    found = survey(source)
    package = "vlreg_" + re.sub(r"\W", "_", name)
    folder = Path(out) / f"vlreg-{name.replace('_', '-')}"
    (folder / package).mkdir(parents=True, exist_ok=False)
    (folder / "tests").mkdir()
    served = {kind: plugins.claimant(kind, model_type) for kind, model_type in found.parts.items()}
    claimed = {kind: model_type for kind, model_type in found.parts.items() if served[kind] is None}
    (folder / "pyproject.toml").write_text(PYPROJECT.format(name=name.replace("_", "-"), entry=name, package=package))
    (folder / package / "__init__.py").write_text(_module(name, found, claimed, served))
    (folder / package / "checkpoints.py").write_text(CHECKPOINTS.format(source=str(Path(source).resolve()), name=name))
    native = {
        "layers": f"{found.text}.{found.layers}",
        "embed_tokens": f"{found.text}.{found.embed_tokens}",
        "norm": f"{found.text}.{found.norm}",
        "lm_head": found.lm_head,
        "vision": found.vision,
        "vision.layers": f"{found.vision}.{found.tower_layers}",
        "vision.patch_embed": f"{found.vision}.{found.patch_embed}",
        "projector": found.projector,
    }
    (folder / "tests" / "test_conformance.py").write_text(TEST.format(name=name, native=_dict(native, 4)))
    return folder


def _dict(entries: dict, indent: int) -> str:
    lines = [f'{" " * indent}    "{key}": "{value}",\n' for key, value in entries.items() if key != value]
    return "{\n" + "".join(lines) + " " * indent + "}" if lines else "{}"


def _module(name: str, found: Survey, claimed: dict[str, str], served: dict[str, Any]) -> str:
    from .core import plugins

    classes = found.classes
    modules = sorted({cls.__module__ for cls in classes.values()})
    aliases = {module: f"modeling_{index}" for index, module in enumerate(modules)}
    ref = {key: f"{aliases[cls.__module__]}.{cls.__name__}" for key, cls in classes.items()}
    names = found.block_names
    wrapper_rename = {
        f"{found.text}.{found.layers}": "layers",
        f"{found.text}.{found.embed_tokens}": "embed_tokens",
        f"{found.text}.{found.norm}": "norm",
        found.vision: "vision",
        found.projector: "projector",
        found.lm_head: "lm_head",
    }
    text_rename = {names["text_attention"]: "self_attn", names["text_mlp"]: "mlp"}
    tower_rename = {found.tower_layers: "layers", found.patch_embed: "patch_embed"}
    tower_rename.update({names["tower_attention"]: "self_attn", names["tower_mlp"]: "mlp"})
    elsewhere = "".join(
        f"# The {kind} part ({found.parts[kind]!r}) is served by {plugins.describe(plugin)}.\n"
        for kind, plugin in served.items() if plugin is not None
    )
    return MODULE.format(
        model_type=found.model_type,
        elsewhere=elsewhere,
        modules="".join(f"    import {module} as {alias}\n" for module, alias in aliases.items()),
        claims=", ".join(f'Claim("{kind}", "{model_type}")' for kind, model_type in claimed.items()),
        wrapper_rename=_dict(wrapper_rename, 0),
        text_rename=_dict(text_rename, 0),
        tower_rename=_dict(tower_rename, 0),
        text_envoys=f"{{{ref['block']}: Layer, {ref['attention']}: Attention, {ref['mlp']}: Mlp}}",
        tower_envoys=(
            f"{{\n            {ref['tower']}: Vision,\n            {ref['tower_block']}: VisionLayer,\n"
            f"            {ref['tower_attention']}: VisionAttention,\n            {ref['tower_mlp']}: VisionMlp,\n        }}"
        ),
        scatter=f'Scatter(host="{found.scatter_host}", operation="{found.scatter_operation}", argument=1)',
        name=name,
    )


PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "vlreg-{name}"
version = "0.1.0"
description = "vlreg plugin for the {entry} family"
requires-python = ">=3.11"
dependencies = ["vlreg"]

[project.entry-points.vlreg]
{entry} = "{package}"

[tool.setuptools.packages.find]
include = ["{package}*"]
"""

MODULE = '''"""The {model_type} family for vlreg, declared against `vlreg.plugin`.

Written by `vlreg new-plugin` from a survey of the model's module tree; check each
declaration against the model (print it, and `model.model.source` for the scatter),
then extend the tests beside the conformance suite.
"""

from vlreg.plugin import (
    Attention,
    Claim,
    Layer,
    Mlp,
    Scatter,
    Vision,
    VisionAttention,
    VisionLayer,
    VisionMlp,
    hookimpl,
)

{elsewhere}
#: From the model root: the standard mounts.
WRAPPER_RENAME = {wrapper_rename}

#: Inside a text block. A single name binds on every module that has it.
TEXT_RENAME = {text_rename}

#: From the tower. Never a bare name a text block also has.
TOWER_RENAME = {tower_rename}

#: Where the wrapper writes the image features into the embeddings.
SCATTER = {scatter}

#: Values a write to would not reach the text model, refused with a reason. The survey
#: cannot tell whether the projector reads the tower's output; a refusal is never a
#: silently wrong answer, so it is declared read-only until checked: delete the row if
#: the conformance suite shows that writing vision.tower_output moves the logits.
READ_ONLY = {{
    "vision.tower_output": lambda vision: (
        "this plugin has not checked that the projector reads the tower's output; "
        "edit vision.image_features, what the text model receives"
    ),
}}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [{claims}]


@hookimpl
def vlreg_rename(part):
    return {{"wrapper": WRAPPER_RENAME, "text": TEXT_RENAME, "vision": TOWER_RENAME}}.get(part.kind)


@hookimpl
def vlreg_envoys(part):
{modules}
    if part.kind == "text":
        return {text_envoys}
    if part.kind == "vision":
        return {tower_envoys}
    return None


@hookimpl
def vlreg_scatter(part):
    return SCATTER


@hookimpl
def vlreg_read_only(part):
    return READ_ONLY if part.kind == "wrapper" else None


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import build

    return {{"{name}": build}}
'''

CHECKPOINTS = '''"""A small random-weight checkpoint of this family, for the tests."""

from vlreg.testing.shrink import small_copy

#: The folder the plugin was generated from: its config, tokenizer and processor are
#: copied (no weights are read). Point it at any checkpoint of the family.
SOURCE = {source!r}


def build(path, *, source=SOURCE, **overrides):
    return small_copy(source, path, **overrides)
'''

TEST = '''"""{name} against vlreg's conformance suite."""

from vlreg.testing.conformance import VisionConformance


class TestFamily(VisionConformance):
    checkpoint = "{name}"
    native = {native}
    # Set what the survey cannot know: plain_sum = False for a block that norms its
    # sublayers' outputs, and `unavailable` rows with a fragment of their reasons.
'''
