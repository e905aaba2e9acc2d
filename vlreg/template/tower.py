"""The tower's envoy classes and names, its patch embedding, and the projector."""

from __future__ import annotations

import inspect
import re

import torch

from .modules import MLP, child as find_child, first_mixing, is_norm, mixer as find_mixer
from .scatter import note as _note

#: A tower parameter that is a class token prepended to the patches (CLIP's).
CLASS_TOKEN = re.compile(r"class_embedding|cls_token|class_token")


def _is_qwen_vit(tower: torch.nn.Module, attention: torch.nn.Module) -> bool:
    """The packed Qwen ViT: every image of a prompt in one row, with its patch grid
    (``grid_thw``), attention split per image at ``cu_seqlens``."""
    packed = "grid_thw" in inspect.signature(tower.forward).parameters
    return packed and "cu_seqlens" in inspect.signature(attention.forward).parameters


#: Towers an installed plugin publishes an adapter for: adapter name -> how to recognize one.
TOWER_ADAPTERS = {"qwen_vit": _is_qwen_vit}


def tower_envoys(tower: torch.nn.Module, layers: str | None, text_names: set[str], notes: list[str]) -> tuple[dict, dict, str | None]:
    """The tower's classes and names, or an adapter's where one serves this tower."""
    from ..core.host.plugins import adapter

    if layers is None:
        _note(notes, f"{type(tower).__name__} holds no list of blocks with an attention (a convolutional encoder, or "
                     f"blocks in stages): it is served as a Vision with no blocks (tower_blocks = False in the test); "
                     f"name its blocks by hand to serve vision.layers")
        return {type(tower): "Vision"}, {}, None
    block = first_mixing(tower.get_submodule(layers))
    mixer, _ = find_mixer(block)
    attention = block.get_submodule(mixer)
    mlp_name = find_child(block, MLP)
    for other, module in tower.named_modules():
        if isinstance(module, torch.nn.ModuleList) and other != layers and not other.startswith(f"{layers}."):
            kinds = ", ".join(sorted({type(m).__name__ for m in module}))
            _note(notes, f"the tower also holds {other} ({len(module)} x {kinds}), which are not its blocks: if what "
                         f"they make reaches the text model (DeepStack), serve it on the text blocks; this skeleton "
                         f"leaves it out")
    for name, recognizes in TOWER_ADAPTERS.items():
        if not recognizes(tower, attention):
            continue
        try:
            published = adapter(name)
        except LookupError as error:
            _note(notes, f"this tower looks like the one the adapter {name!r} serves, but {error}")
            break
        envoys = {type(tower): "ADAPTER.Vision", type(block): "VisionLayer", type(attention): "ADAPTER.Attention"}
        if mlp_name is not None:
            envoys[type(block.get_submodule(mlp_name))] = "VisionMlp"
        if any(hasattr(tower, attribute) for attribute in ("pos_embed", "position_embedding")):
            _note(notes, "the tower adds learned position embeddings before block 0, which the adapter's Vision does "
                         "not serve (vlreg-qwen3-vl's vision.position_embeddings does)")
        return envoys, dict(published.tower_rename), name
    token = next((name for name, _ in tower.named_parameters() if CLASS_TOKEN.search(name)
                  and not name.startswith(f"{layers}.")), None)
    envoys = {type(tower): "ClassTokenVision" if token else "Vision", type(block): "VisionLayer",
              type(attention): "VisionAttention"}
    rename = {layers: "layers", mixer: "self_attn"}
    if mlp_name is not None:
        envoys[type(block.get_submodule(mlp_name))] = "VisionMlp"
        rename[mlp_name] = "mlp"
    norms = [name for name, child in block.named_children() if is_norm(child)]
    if len(norms) == 2:
        rename.update({norms[0]: "input_layernorm", norms[1]: "post_attention_layernorm"})
    else:
        _note(notes, f"{type(block).__name__} has {len(norms)} norms ({', '.join(norms) or 'none'}): name the one "
                     f"before the attention input_layernorm and the one before the MLP post_attention_layernorm")
    patch = patch_embed(tower)
    if patch is not None:
        rename[patch] = "patch_embed"
    clash = {native for native in rename if "." not in native and native in text_names and native != rename[native]}
    for native in sorted(clash):
        del rename[native]
        _note(notes, f"a text block also has a child named {native!r}: a single name binds on every module that "
                     f"has it, so rename it with its path from the tower")
    what = f"its class token ({token}) is one row before the patches (class_tokens = 1), and " if token else ""
    _note(notes, f"{what}whether the tower folds patches into tokens (ImageGrid.fold) and which module is its "
                 f"final norm over the patches ('norm') are not surveyed")
    return envoys, {native: standard for native, standard in rename.items() if native != standard}, None


def patch_embed(tower: torch.nn.Module) -> str | None:
    for name, module in tower.named_modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Conv3d)):
            parent = name.rpartition(".")[0]
            return parent if parent and "PatchEmbed" in type(tower.get_submodule(parent)).__name__ else name
    return None


def projector(model: torch.nn.Module, host: str, text: str, vision: str, tower_layers: str | None,
               elsewhere: set[str], notes: list[str]) -> str | None:
    """The last module before the scatter: beside the text model and the tower (never
    another part's model, ``elsewhere``), else the tower's first module after its blocks
    (a merger inside the tower)."""
    prefix = f"{host}." if host else ""
    beside = [f"{prefix}{name}" for name, _ in model.get_submodule(host).named_children()
              if f"{prefix}{name}" not in (text, vision, *elsewhere)]
    if beside:
        return beside[0]
    if tower_layers is None:
        _note(notes, "no projector found beside the tower: name the last module before the scatter the Wrapper's "
                     "projector=")
        return None
    tower = model.get_submodule(vision)
    children = list(tower.named_children())
    top = tower_layers.split(".")[0]
    after = [name for name, _ in children[[n for n, _ in children].index(top) + 1:]]
    found = [name for name in after if not isinstance(getattr(tower, name), torch.nn.ModuleList)
             and not is_norm(getattr(tower, name))]
    if found:
        _note(notes, f"the projector is {vision}.{found[0]}, inside the tower (the module after its blocks): check "
                     f"that it is the last module before the scatter")
        return f"{vision}.{found[0]}"
    _note(notes, "no projector found beside the tower or after its blocks: name the last module before the scatter "
                 "the Wrapper's projector=")
    return None
