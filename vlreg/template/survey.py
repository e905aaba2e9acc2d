"""The survey: where a family keeps what vlreg names, read off its module tree.

The config is cut (`vlreg.testing.shrink`: two blocks of each part, one of each kind a
hybrid text model mixes) and the model is built on the meta device, so no weights are
read and a folder holding only ``config.json`` is enough. What is found:

* the mounts, from the root: the text model (the submodule whose config is the text
  config), its block list, embeddings, final norm and readout; the tower and its block
  list, found the same way. The blocks are the module list holding an attention in any
  of its blocks (LFM2's first ones are convolutions) that the part's forward runs first
  (a BART encoder's before its decoder's), then the longest: never a list of mergers or
  norms beside them (Qwen3-VL's DeepStack mergers), nor a Q-Former's or a perceiver's,
  which are other parts of the config;
* the projector: the module beside the text model and the tower in their parent
  (LLaVA's ``multi_modal_projector``), never another part's model (a Q-Former, an audio
  tower), else the tower's own module after its blocks (the Qwen merger,
  ``model.visual.merger``: it runs inside the tower);
* the scatter: in the forward of the text model's parent or above it (BLIP-2 writes in
  the root's own), the call whose result replaces the embeddings and which is passed the
  image features, positionally (``masked_scatter``, the features' position) or by
  keyword (Idefics3's ``self.inputs_merger(..., image_hidden_states=...)``, the
  keyword's name); never an audio's or a video's (an omni model's first scatter);
* the envoy classes: each block's mixer (full attention, heads gated before ``o_proj``
  where its forward calls a sigmoid, or a linear one), MLP (dense, or routed to experts),
  and the tower's (with a class token where it has one); a tower an installed plugin
  publishes an adapter for (the packed Qwen ViT: ``"qwen_vit"``) is mapped onto that
  adapter's classes;
* where a text-generation load binds the names, if transformers builds a text-only class
  for the config (Qwen3.5's ``ForCausalLM``), and what the projector reads
  (``vision_feature_layer``: a block's stream, so later blocks reach nothing).

A config with no ``vision_config`` (Emu3's and Chameleon's VQ image encoders are their
``vq_config``) is surveyed for its text model and its scatter; the survey writes no
`ImageCodes` (the entry of an image read as discrete codes), so its skeleton serves the
text names and says so. A tower with no list of attention blocks (a convolutional
encoder) is a `Vision` with no blocks.

A heuristic that holds on every family vlreg serves is still a guess on a new one: what
the survey guesses or cannot decide is a TODO note on the part it concerns
(`Survey.notes`), written beside the declaration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from attrs import field, frozen

from .modules import (
    ATTENTION,
    LINEAR,
    MLP,
    blocks as find_blocks,
    child as find_child,
    final_norm as find_norm,
    forward_source,
    is_norm,
    mixer as find_mixer,
    names_in,
    relative,
    submodel as find_submodel,
)
from .scatter import find_cross_attention, find_scatter, note as _note
from .tower import patch_embed as find_patch_embed, projector as find_projector, tower_envoys as find_tower


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
    vision: str | None  # None: the config has no vision part
    tower_layers: str | None  # None: the tower has no blocks
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

    from ..testing.shrink import extra_parts, shrink

    config = AutoConfig.from_pretrained(source)
    shrink(config)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    notes: dict[str, list[str]] = {"wrapper": [], "text": [], "vision": []}
    text_config, vision_config = config.get_text_config(), getattr(config, "vision_config", None)
    others = {name: part.model_type for name, part in extra_parts(config).items() if part is not text_config}
    text = find_submodel(model, text_config.model_type)
    text_module = model.get_submodule(text)
    layers = find_blocks(text_module)
    if layers is None:
        raise ValueError(f"{type(text_module).__name__} holds no list of blocks with an attention; name it by hand")
    text_envoys, text_rename, flags = _text_blocks(text_module.get_submodule(layers), notes["text"])
    host = text.rpartition(".")[0]
    elsewhere = _other_parts(model, others, notes["wrapper"])
    if vision_config is not None:
        vision = find_submodel(model, vision_config.model_type)
        tower = model.get_submodule(vision)
        tower_layers = find_blocks(tower)
        tower_envoys, tower_rename, tower_adapter = find_tower(tower, tower_layers, names_in(text_module, layers),
                                                           notes["vision"])
        projector = find_projector(model, host, text, vision, tower_layers, elsewhere, notes["wrapper"])
        patch_embed = find_patch_embed(tower)
    else:
        vision = tower_layers = projector = patch_embed = tower_adapter = None
        tower_envoys, tower_rename = {}, {}
        _note(notes["wrapper"], f"{config.model_type!r} has no vision_config, and the survey does not write the "
                                f"entry of an image read as discrete codes: this skeleton serves the text names. "
                                f"Where the image enters is surveyed below (SCATTER); declare an ImageCodes there, "
                                f"a CodesVision over the VQ encoder of the vq_config part (plugins/chameleon does)")
    norm = find_norm(text_module, layers)
    if norm is None:
        _note(notes["wrapper"], f"{type(text_module).__name__} has no final norm after its blocks, so the skeleton "
                                f"declares readout=UNNORMED (lm_head reads the last block's output as it is): where "
                                f"the model reads out otherwise (a mixer of streams, a multiplier), declare a "
                                f"Readout, or refuse the lens with a sentence (docs/writing-a-plugin.md: readout)")
    embed_tokens = relative(text_module, text_module.get_input_embeddings())
    lm_head = relative(model, model.get_output_embeddings())
    native = {
        "layers": f"{text}.{layers}",
        "embed_tokens": f"{text}.{embed_tokens}",
        **({"norm": f"{text}.{norm}"} if norm else {}),
        "lm_head": lm_head,
        **({"vision": vision} if vision else {}),
        **({"vision.layers": f"{vision}.{tower_layers}"} if tower_layers else {}),
        **({"vision.patch_embed": f"{vision}.{patch_embed}"} if patch_embed else {}),
        **_in_block(text_module, layers, text_rename, "layers", text),
        **(_in_block(tower, tower_layers, tower_rename, "vision.layers", vision) if tower_layers else {}),
        **({"projector": projector} if projector else {}),
    }
    parts = {"wrapper": config.model_type, "text": text_config.model_type}
    if vision_config is not None:
        parts["vision"] = vision_config.model_type
    return Survey(
        model_type=config.model_type,
        architecture=type(model).__name__,
        parts=parts,
        text=text,
        layers=layers,
        embed_tokens=embed_tokens,
        norm=norm,
        lm_head=lm_head,
        vision=vision,
        tower_layers=tower_layers,
        patch_embed=patch_embed,
        projector=projector,
        # a text model that is the whole config's (Chameleon's) writes the image in its own forward
        scatter=(scatter := find_scatter(model, text if text_config is config else host, notes["wrapper"])),
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


def _other_parts(model: torch.nn.Module, others: dict[str, str], notes: list[str]) -> set[str]:
    """The paths of the models of the config's other parts (a Q-Former, a perceiver, an
    audio tower, a VQ encoder), each named in a note: vlreg has no names for them yet."""
    paths = set()
    for field_name, model_type in others.items():
        try:
            path = find_submodel(model, model_type)
        except ValueError:
            _note(notes, f"the config's {field_name} ({model_type!r}) builds no submodule of its own: check where it is "
                         f"used")
            continue
        paths.add(path)
        _note(notes, f"the config has another part, {field_name} ({model_type!r}, at {path}): the checkpoint loads "
                     f"without it, its modules at their native paths ({path}.*); to serve them under standard envoys, "
                     f"claim it with Other({model_type!r}, field={field_name!r}, envoys=...); the builder cuts it like "
                     f"the others")
    return paths


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
        text = find_submodel(model, config.get_text_config().model_type)
    except ValueError:
        _note(notes, f"a text-generation load builds {type(model).__name__}: name its mounts in the Wrapper's rename=")
        return None
    module = model.get_submodule(text)
    layers = find_blocks(module)
    mounts = {f"{text}.{layers}": "layers",
              f"{text}.{relative(module, module.get_input_embeddings())}": "embed_tokens"}
    norm = find_norm(module, layers)
    if norm:
        mounts[f"{text}.{norm}"] = "norm"
    mounts[relative(model, model.get_output_embeddings())] = "lm_head"
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
        elif find_mixer(block) is None:
            mixers = [name for name, child in block.named_children() if name not in MLP and not is_norm(child)]
            kinds = ", ".join(f"{name} ({type(block.get_submodule(name)).__name__})" for name in mixers) or "nothing"
            _note(notes, f"some {type(block).__name__} blocks mix tokens by {kinds}, none of {ATTENTION + LINEAR}: "
                         f"declare the kind on the block's class, a Layer subclass with mixers = (Mixer('self_attn'), "
                         f"Mixer('<standard name>', native='{mixers[0] if mixers else '?'}')), and map the mixer's module "
                         f"to an envoy class serving its values (vlreg-lfm2-vl's ShortConv serves LFM2's conv as short_conv)")
        else:
            mixer, linear = find_mixer(block)
            attention = block.get_submodule(mixer)
            gated = not linear and "sigmoid" in forward_source(attention) and hasattr(attention, "o_proj")
            envoys[type(attention)] = "LinearAttention" if linear else "GatedAttention" if gated else "Attention"
            standard = "linear_attn" if linear else "self_attn"
            if mixer != standard:
                rename[mixer] = standard
            flags["hybrid"] |= linear
            if gated:
                _note(notes, f"{type(attention).__name__} calls a sigmoid in its forward, taken for a gate on its heads "
                             f"before o_proj (GatedAttention): check it, else map it to Attention")
        mlp_name = find_child(block, MLP)
        _unnamed_children(block, mlp_name, notes)
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


def _unnamed_children(block: torch.nn.Module, mlp_name: str | None, notes: list[str]) -> None:
    """Note a block's children that are none of a mixer, an MLP or a norm, and an
    attention's indexer: vlreg names them only where the plugin declares what they do."""
    mixer = find_mixer(block)
    known = {mlp_name, mixer[0] if mixer else None, "cross_attn"}
    others = [name for name, child in block.named_children() if name not in known and not is_norm(child)]
    if others:
        listed = ", ".join(f"{name} ({type(block.get_submodule(name)).__name__})" for name in others)
        _note(notes, f"{type(block).__name__} also holds {listed}, which vlreg names nothing for: where they keep "
                     f"several residual streams that mix (hyper-connections), declare the block a MixingStreamsLayer "
                     f"(its streams_layout and identity; vlreg-qwen3-vl's Qwen4-Exp); where they add per-layer or "
                     f"n-gram embeddings, serve what they add with returned(...) values; where they scale or gate "
                     f"the residual, state the block's identity on its class")
    attention = block.get_submodule(mixer[0]) if mixer else None
    indexers = [name for name, _ in attention.named_children() if "index" in name] if attention is not None else []
    if indexers:
        _note(notes, f"{type(attention).__name__} holds {', '.join(indexers)}, a sparse-attention indexer choosing "
                     f"which keys each query reads: serve what it selects under a standard name (vlreg-qwen3-vl's "
                     f"self_attn.selected_token_mask), or refuse its values by name, saying what to read natively")
