"""The survey: where a family keeps what vlreg names, read off its module tree.

The config is cut (`vlreg.testing.shrink`: two blocks of each part, one of each kind a
hybrid text model mixes) and the model is built on the meta device, so no weights are
read and a folder holding only ``config.json`` is enough. What is found:

* the mounts, from the root: the text model (the submodule whose config is the text
  config), its block list (the longest module list whose blocks hold an attention),
  embeddings, final norm and readout; the tower and its block list, found the same way,
  so a tower's other lists (Qwen3-VL's DeepStack mergers) are never taken for its blocks;
* the projector: the module beside the text model and the tower in their parent
  (LLaVA's ``multi_modal_projector``), else the tower's own module after its blocks (the
  Qwen merger, ``model.visual.merger``: it runs inside the tower);
* the scatter: in the forward of the text model's parent, the call whose result replaces
  the embeddings and which is passed the image features, positionally (``masked_scatter``,
  the features' position) or by keyword (Idefics3's ``self.inputs_merger(...,
  image_hidden_states=...)``, the keyword's name);
* the envoy classes: each block's mixer (full attention, heads gated before ``o_proj``
  where its forward calls a sigmoid, or a linear one), MLP (dense, or routed to experts),
  and the tower's (with a class token where it has one); a tower an installed plugin
  publishes an adapter for (the packed Qwen ViT: ``"qwen_vit"``) is mapped onto that
  adapter's classes;
* where a text-generation load binds the names, if transformers builds a text-only class
  for the config (Qwen3.5's ``ForCausalLM``), and what the projector reads
  (``vision_feature_layer``: a block's stream, so later blocks reach nothing).

A heuristic that holds on every family vlreg serves is still a guess on a new one: what
the survey guesses or cannot decide is a TODO note on the part it concerns
(`Survey.notes`), written beside the declaration.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import torch
from attrs import field, frozen

from .scatter import find_cross_attention, find_scatter, note as _note

#: Names a block's mixer, its linear-attention mixer and its MLP go by.
ATTENTION = ("self_attn", "attn", "attention", "self_attention")
LINEAR = ("linear_attn",)
MLP = ("mlp", "feed_forward", "ffn")
#: A tower parameter that is a class token prepended to the patches (CLIP's).
CLASS_TOKEN = re.compile(r"class_embedding|cls_token|class_token")


@frozen
class Survey:
    """Where a family keeps what vlreg names: paths from the model root (``text``,
    ``vision``, ``projector``, ``lm_head``), or from the part's own module (the rest)."""

    model_type: str
    architecture: str
    parts: dict[str, str]  # kind -> model_type
    text: str
    layers: str
    embed_tokens: str
    norm: str | None
    lm_head: str
    vision: str
    tower_layers: str
    patch_embed: str | None
    projector: str | None
    scatter: tuple[str, str, int | str] | None  # host, operation, the features' argument
    text_envoys: dict[type, str]  # module class -> vlreg.plugin class name
    text_rename: dict[str, str]
    tower_envoys: dict[type, str]  # an adapter's class is "ADAPTER.Vision"
    tower_rename: dict[str, str]
    native: dict[str, str] = field(factory=dict)  # standard name -> native path, for the conformance suite
    tower_adapter: str | None = None
    experts: bool = False
    shared_expert: bool = False
    hybrid: bool = False
    feature_layer: str | None = None  # the tower's depth field, where the projector reads config.vision_feature_layer
    inserted: tuple[str, ...] = ()  # the scatter host's own parameters (rows it adds to the features)
    text_only: tuple[str, dict[str, str]] | None = None  # a text-generation load's own class and its mounts
    cross: tuple[str, str] | None = None  # the text model and its argument for the image's states (no scatter)
    notes: dict[str, list[str]] = field(factory=dict)  # kind -> TODO sentences


def survey(source: str | Path) -> Survey:
    """Survey the family of the checkpoint folder ``source`` (only its config is read)."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    from ..testing.shrink import shrink

    config = AutoConfig.from_pretrained(source)
    if getattr(config, "vision_config", None) is None:
        raise ValueError(f"{config.model_type!r} has no vision_config: new-plugin writes skeletons of "
                         f"vision-language families (a tower, a text model and the scatter between them)")
    shrink(config)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    notes: dict[str, list[str]] = {"wrapper": [], "text": [], "vision": []}
    text_config, vision_config = config.get_text_config(), config.vision_config
    text = _submodel(model, text_config.model_type)
    vision = _submodel(model, vision_config.model_type)
    text_module, tower = model.get_submodule(text), model.get_submodule(vision)
    layers, tower_layers = _blocks(text_module), _blocks(tower)
    text_envoys, text_rename, flags = _text_blocks(text_module.get_submodule(layers), notes["text"])
    tower_envoys, tower_rename, tower_adapter = _tower(tower, tower_layers, _names_in(text_module, layers), notes["vision"])
    host = text.rpartition(".")[0]
    projector = _projector(model, host, text, vision, tower_layers, notes["wrapper"])
    patch_embed = _patch_embed(tower)
    norm = _child(text_module, ("norm", "final_layernorm", "ln_f", "final_norm"))
    embed_tokens = _relative(text_module, text_module.get_input_embeddings())
    lm_head = _relative(model, model.get_output_embeddings())
    native = {
        "layers": f"{text}.{layers}",
        "embed_tokens": f"{text}.{embed_tokens}",
        **({"norm": f"{text}.{norm}"} if norm else {}),
        "lm_head": lm_head,
        "vision": vision,
        "vision.layers": f"{vision}.{tower_layers}",
        **({"vision.patch_embed": f"{vision}.{patch_embed}"} if patch_embed else {}),
        **_in_block(text_module, layers, text_rename, "layers", text),
        **_in_block(tower, tower_layers, tower_rename, "vision.layers", vision),
        **({"projector": projector} if projector else {}),
    }
    return Survey(
        model_type=config.model_type,
        architecture=type(model).__name__,
        parts={"wrapper": config.model_type, "text": text_config.model_type, "vision": vision_config.model_type},
        text=text,
        layers=layers,
        embed_tokens=embed_tokens,
        norm=norm,
        lm_head=lm_head,
        vision=vision,
        tower_layers=tower_layers,
        patch_embed=patch_embed,
        projector=projector,
        scatter=(scatter := find_scatter(model, host, notes["wrapper"])),
        cross=None if scatter else find_cross_attention(model, text, notes["wrapper"]),
        text_envoys=text_envoys,
        text_rename=text_rename,
        tower_envoys=tower_envoys,
        tower_rename=tower_rename,
        native=native,
        tower_adapter=tower_adapter,
        experts=flags["experts"],
        shared_expert=flags["shared_expert"],
        hybrid=flags["hybrid"],
        feature_layer=_feature_layer(config),
        inserted=tuple(name for name, _ in model.get_submodule(host).named_parameters(recurse=False)),
        text_only=_text_only(config, type(model), notes["wrapper"]),
        notes=notes,
    )


def _text_only(config: Any, wrapper: type, notes: list[str]) -> tuple[str, dict[str, str]] | None:
    """The class a text-generation load builds, where it is not the wrapper (Qwen3.5's
    ``Qwen3_5ForCausalLM``), and its mounts: a load with ``task="text-generation"`` binds
    the standard names there."""
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING or MODEL_FOR_CAUSAL_LM_MAPPING[type(config)] is wrapper:
        return None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    try:
        text = _submodel(model, config.get_text_config().model_type)
    except ValueError:
        _note(notes, f"a text-generation load builds {type(model).__name__}: name its mounts in WRAPPER_RENAME")
        return None
    module = model.get_submodule(text)
    mounts = {f"{text}.{_blocks(module)}": "layers",
              f"{text}.{_relative(module, module.get_input_embeddings())}": "embed_tokens"}
    norm = _child(module, ("norm", "final_layernorm", "ln_f", "final_norm"))
    if norm:
        mounts[f"{text}.{norm}"] = "norm"
    mounts[_relative(model, model.get_output_embeddings())] = "lm_head"
    return type(model).__name__, mounts


def _feature_layer(config: Any) -> str | None:
    """The tower config's depth field, if the projector reads one block's stream out of
    the tower's hidden states (``vision_feature_layer``, as LLaVA's do)."""
    if getattr(config, "vision_feature_layer", None) is None:
        return None
    return next((name for name in ("num_hidden_layers", "depth") if hasattr(config.vision_config, name)), None)


def _in_block(part: torch.nn.Module, layers: str, rename: dict, standard: str, path: str) -> dict[str, str]:
    """The renamed children of a part's block 0, as the conformance suite checks them."""
    children = {name for name, _ in part.get_submodule(f"{layers}.0").named_children()}
    return {f"{standard}.0.{new}": f"{path}.{layers}.0.{old}" for old, new in rename.items() if old in children}


def _submodel(model: torch.nn.Module, model_type: str) -> str:
    for name, module in model.named_modules():
        if name and getattr(getattr(module, "config", None), "model_type", None) == model_type:
            return name
    raise ValueError(f"no submodule of {type(model).__name__} is a {model_type!r} model")


def _mixer(block: torch.nn.Module) -> tuple[str, bool] | None:
    """The name of the block's token mixer and whether it is a linear one."""
    for name, child in block.named_children():
        linear = name in LINEAR or "DeltaNet" in type(child).__name__
        if name in ATTENTION or linear:
            return name, linear
    return None


def _blocks(module: torch.nn.Module) -> str:
    """The longest module list whose first element mixes tokens: the blocks, never a
    list of mergers or norms beside them."""
    lists = [(name, m) for name, m in module.named_modules()
             if isinstance(m, torch.nn.ModuleList) and len(m) and _mixer(m[0]) is not None]
    if not lists:
        raise ValueError(f"{type(module).__name__} holds no list of blocks with an attention; name it by hand")
    return max(lists, key=lambda item: len(item[1]))[0]


def _names_in(module: torch.nn.Module, layers: str) -> set[str]:
    """Every child name inside the blocks at ``layers``."""
    return {name.rpartition(".")[2] for block in module.get_submodule(layers) for name, _ in block.named_modules()}


def _child(module: torch.nn.Module, names: tuple[str, ...]) -> str | None:
    return next((name for name in names if isinstance(getattr(module, name, None), torch.nn.Module)), None)


def _relative(root: torch.nn.Module, module: torch.nn.Module) -> str:
    return next(name for name, m in root.named_modules() if m is module)


def _is_norm(module: torch.nn.Module) -> bool:
    return "norm" in type(module).__name__.lower()


def _text_blocks(blocks: torch.nn.ModuleList, notes: list[str]) -> tuple[dict, dict, dict]:
    """The text blocks' classes (every block: a hybrid model mixes kinds) and renames."""
    envoys: dict[type, str] = {}
    rename: dict[str, str] = {}
    flags = {"experts": False, "shared_expert": False, "hybrid": False}
    for block in blocks:
        envoys[type(block)] = "Layer"
        if isinstance(getattr(block, "cross_attn", None), torch.nn.Module):
            envoys[type(block)], envoys[type(block.cross_attn)] = "CrossAttentionLayer", "CrossAttentionMixer"
            _note(notes, f"{type(block).__name__} attends to the image (cross_attn: CrossAttentionLayer): where it scales "
                         f"its sublayers' outputs (gates), subclass it with attention_gate and mlp_gate; where its "
                         f"attention norms the keys, override CrossAttentionMixer.project")
        elif _mixer(block) is None:
            _note(notes, f"{type(block).__name__} has none of {ATTENTION + LINEAR}: name its mixer in TEXT_RENAME")
            continue
        else:
            mixer, linear = _mixer(block)
            attention = block.get_submodule(mixer)
            gated = not linear and "sigmoid" in _forward_source(attention) and hasattr(attention, "o_proj")
            envoys[type(attention)] = "LinearAttention" if linear else "GatedAttention" if gated else "Attention"
            standard = "linear_attn" if linear else "self_attn"
            if mixer != standard:
                rename[mixer] = standard
            flags["hybrid"] |= linear
            if gated:
                _note(notes, f"{type(attention).__name__} calls a sigmoid in its forward, taken for a gate on its heads "
                             f"before o_proj (GatedAttention): check it, else map it to Attention")
        mlp_name = _child(block, MLP)
        if mlp_name is None:
            _note(notes, f"{type(block).__name__} has none of {MLP}: name its MLP ('mlp') in TEXT_RENAME")
            continue
        mlp = block.get_submodule(mlp_name)
        routed = all(hasattr(mlp, child) for child in ("gate", "experts"))
        flags["experts"] |= routed
        flags["shared_expert"] |= routed and hasattr(mlp, "shared_expert")
        envoys[type(mlp)] = "MoeMlp" if routed else "Mlp"
        if mlp_name != "mlp":
            rename[mlp_name] = "mlp"
    if flags["hybrid"]:
        _note(notes, "blocks mix tokens by full attention (self_attn) or by a linear one (linear_attn), as "
                     "config.layer_types says; LinearAttention reads the delta rule at its call in the mixer's forward "
                     "(LinearAttention.rule): check it against the mixer's source")
    if flags["experts"]:
        _note(notes, "the MLPs route to experts: MoeMlp expects children 'gate', 'experts' and maybe "
                     "'shared_expert'; subclass it (router_module, experts_module, shared_expert_module) if they differ")
    return envoys, rename, flags


def _forward_source(module: torch.nn.Module) -> str:
    try:
        return inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        return ""


def _is_qwen_vit(tower: torch.nn.Module, attention: torch.nn.Module) -> bool:
    """The packed Qwen ViT: every image of a prompt in one row, with its patch grid
    (``grid_thw``), attention split per image at ``cu_seqlens``."""
    packed = "grid_thw" in inspect.signature(tower.forward).parameters
    return packed and "cu_seqlens" in inspect.signature(attention.forward).parameters


#: Towers an installed plugin publishes an adapter for: adapter name -> how to recognize one.
TOWER_ADAPTERS = {"qwen_vit": _is_qwen_vit}


def _tower(tower: torch.nn.Module, layers: str, text_names: set[str], notes: list[str]) -> tuple[dict, dict, str | None]:
    """The tower's classes and names, or an adapter's where one serves this tower."""
    from ..core.plugins import adapter

    block = tower.get_submodule(f"{layers}.0")
    mixer, _ = _mixer(block)
    attention = block.get_submodule(mixer)
    mlp_name = _child(block, MLP)
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
    norms = [name for name, child in block.named_children() if _is_norm(child)]
    if len(norms) == 2:
        rename.update({norms[0]: "input_layernorm", norms[1]: "post_attention_layernorm"})
    else:
        _note(notes, f"{type(block).__name__} has {len(norms)} norms ({', '.join(norms) or 'none'}): name the one "
                     f"before the attention input_layernorm and the one before the MLP post_attention_layernorm")
    patch = _patch_embed(tower)
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


def _patch_embed(tower: torch.nn.Module) -> str | None:
    for name, module in tower.named_modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Conv3d)):
            parent = name.rpartition(".")[0]
            return parent if parent and "PatchEmbed" in type(tower.get_submodule(parent)).__name__ else name
    return None


def _projector(model: torch.nn.Module, host: str, text: str, vision: str, tower_layers: str, notes: list[str]) -> str | None:
    """The last module before the scatter: beside the text model and the tower, else the
    tower's first module after its blocks (a merger inside the tower)."""
    prefix = f"{host}." if host else ""
    beside = [f"{prefix}{name}" for name, _ in model.get_submodule(host).named_children()
              if f"{prefix}{name}" not in (text, vision)]
    if beside:
        return beside[0]
    tower = model.get_submodule(vision)
    children = list(tower.named_children())
    top = tower_layers.split(".")[0]
    after = [name for name, _ in children[[n for n, _ in children].index(top) + 1:]]
    found = [name for name in after if not isinstance(getattr(tower, name), torch.nn.ModuleList)
             and not _is_norm(getattr(tower, name))]
    if found:
        _note(notes, f"the projector is {vision}.{found[0]}, inside the tower (the module after its blocks): check "
                     f"that it is the last module before the scatter")
        return f"{vision}.{found[0]}"
    _note(notes, "no projector found beside the tower or after its blocks: name the last module before the scatter "
                 "'projector' in WRAPPER_RENAME")
    return None
