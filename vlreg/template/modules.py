"""Reading a model's module tree: its parts' models, block lists, mixers, norms.

Names, not classes: a family's modules are found by what they are called and hold, so
the same reading works on every family transformers builds.
"""

from __future__ import annotations

import inspect
import re

import torch

#: Names a block's mixer, its linear-attention mixer and its MLP go by.
ATTENTION = ("self_attn", "attn", "attention", "self_attention")
LINEAR = ("linear_attn",)
MLP = ("mlp", "feed_forward", "ffn")
#: Names a text model's final norm goes by (LFM2's is ``embedding_norm``, OPT's ``final_layer_norm``).
NORMS = ("norm", "final_layernorm", "ln_f", "final_norm", "final_layer_norm", "embedding_norm")


def submodel(model: torch.nn.Module, model_type: str) -> str:
    """The path of the outermost submodule whose config is a ``model_type`` config."""
    for name, module in model.named_modules():
        if name and getattr(getattr(module, "config", None), "model_type", None) == model_type:
            return name
    raise ValueError(f"no submodule of {type(model).__name__} is a {model_type!r} model")


def mixer(block: torch.nn.Module) -> tuple[str, bool] | None:
    """The name of the block's token mixer and whether it is a linear one."""
    for name, child in block.named_children():
        linear = name in LINEAR or "DeltaNet" in type(child).__name__
        if name in ATTENTION or linear:
            return name, linear
    return None


def blocks(module: torch.nn.Module) -> str | None:
    """The module's blocks (see the module): of its module lists with an attention in any
    block, the one its forward runs first, then the longest; ``None`` if it has none."""
    lists = [(name, m) for name, m in module.named_modules()
             if isinstance(m, torch.nn.ModuleList) and any(mixer(block) is not None for block in m)]
    if not lists:
        return None
    runs = list(dict.fromkeys(re.findall(r"self\.(\w+)", forward_source(module))))

    def first_run(item: tuple[str, torch.nn.Module]) -> int:
        top = item[0].split(".")[0]
        return runs.index(top) if top in runs else len(runs)

    soonest = min(map(first_run, lists))
    return max((item for item in lists if first_run(item) == soonest), key=lambda item: len(item[1]))[0]


def first_mixing(blocks: torch.nn.ModuleList) -> torch.nn.Module:
    """The first block that holds an attention."""
    return next(block for block in blocks if mixer(block) is not None)


def final_norm(module: torch.nn.Module, layers: str) -> str | None:
    """The text model's final norm: beside its blocks, or a child of its own."""
    parent = layers.rpartition(".")[0]
    beside = child(module.get_submodule(parent), NORMS) if parent else None
    return f"{parent}.{beside}" if beside else child(module, NORMS)


def names_in(module: torch.nn.Module, layers: str) -> set[str]:
    """Every child name inside the blocks at ``layers``."""
    return {name.rpartition(".")[2] for block in module.get_submodule(layers) for name, _ in block.named_modules()}


def child(module: torch.nn.Module, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that is a child module of ``module``."""
    return next((name for name in names if isinstance(getattr(module, name, None), torch.nn.Module)), None)


def relative(root: torch.nn.Module, module: torch.nn.Module) -> str:
    """The path of ``module`` from ``root``."""
    return next(name for name, m in root.named_modules() if m is module)


def is_norm(module: torch.nn.Module) -> bool:
    return "norm" in type(module).__name__.lower()


def forward_source(module: torch.nn.Module) -> str:
    try:
        return inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return ""
