"""A small random-weight copy of a checkpoint folder, for families with no builder of their own.

The copy keeps the folder's tokenizer, processor and chat template (so its token ids and
prompt format are the real ones) and its config's structure, with widths and depths cut
down; the weights are random. Only the config and the processor files are read: the
folder needs no weights, so a hub checkpoint's metadata is enough. A folder holding only
``config.json`` is copied with a processor borrowed from elsewhere (``processor=``), the
config taking the fields it must agree with that processor on (``agree=``).

What a cut keeps, so the small model still runs as the real one does:

* each part's head size where the config names it (``head_dim``), and so its rotary
  sections and partial rotary factors; where the head size is derived from the width,
  rotary sections (``mrope_section``) are scaled to the new head size;
* one block of each kind a hybrid text model mixes (``layer_types``), and of a list with
  an entry per block the first entries (keys and values shared between blocks,
  ``num_kv_shared_layers``, are dropped: a cut to a block of each kind keeps no block
  that stores them before one that reuses them);
* a tower's hand-off width: a vision field that is the text model's width (the merger's
  output on Qwen2-VL, ``out_hidden_size`` elsewhere) follows the text model's new width;
* block indexes inside the cut tower: DeepStack's taps move to its first blocks (each
  feeds the text block of its rank; a tap past the depth would silently never run), other
  index lists (full-attention blocks) keep what fits, else the last block; the text
  model's cross-attention blocks likewise (a cut that kept none would never read the
  image), and a tower output as wide as the blocks it concatenates follows their count;
* a width or depth given per stage or per expert bank (a list: Florence-2's ``embed_dim``,
  ERNIE's ``moe_intermediate_size``) stays a list of the same length;
* the config's other parts (a Q-Former, a perceiver, an audio encoder, an adapter, a VQ
  image encoder: ``*_config`` beside the text and vision ones) are cut too, and their
  fields that were the text model's or the tower's width follow it (a Q-Former's
  ``encoder_hidden_size``, a perceiver's ``hidden_size``).

A random small copy is only useful if its weights are not all but zero: an initializer
range a published config sets for loading, not for training (BLIP-2's tower, 1e-10, so
every image would read alike), is set to 0.02.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: An encoder-decoder's (BART's) names for `TEXT`'s depth and widths.
ENCODER_DECODER = {
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
}
#: Config fields set on a text config, where it has them. Experts and linear-attention
#: heads are cut too; head sizes are kept where the config names them (see the module).
TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    **ENCODER_DECODER,
    "ffn_dim": 128,  # OPT's name for the same
}
#: Text fields that are the text model's width where they equal it (OPT's embeddings).
TEXT_WIDTHS = ("word_embed_proj_dim",)
#: Config fields set on a vision config, where it has them (the image and patch sizes
#: stay: the processor cuts images for them).
VISION = {
    "hidden_size": 32,
    "embed_dim": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_global_layers": 1,
    "depth": 2,
    "num_attention_heads": 2,
    "num_heads": 2,
    "depths": 2,  # blocks per stage, for a staged tower (Florence-2's DaViT)
}
#: Config fields set on any other part, where it has them: a Q-Former, a perceiver
#: resampler, an audio encoder, an adapter, a VQ image encoder.
EXTRA = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "resampler_depth": 2,
    "resampler_n_heads": 2,
    "resampler_head_dim": 16,
    "d_model": 32,
    "encoder_layers": 2,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "conf_num_hidden_layers": 2,
    "conf_num_attention_heads": 2,
    "num_res_blocks": 1,
}
#: Fields counted in blocks: a list of them is cut entry by entry to at most the size given.
DEPTHS = re.compile(r".*(layers|depths?|_blocks)")
#: The channels a VQ encoder's convolutions start from (GroupNorm takes 32 groups).
BASE_CHANNELS = 32
#: Below this an initializer range leaves random weights all but zero (see the module).
INITIALIZER_FLOOR = 1e-4
#: Vision fields that are what the tower hands the text model: they follow its width.
HANDOFF = ("out_hidden_size",)
#: Suffixes of the fields that are a width: one that was the text model's (or, in another
#: part, the tower's) follows it (Florence-2's tower ``projection_dim``).
WIDTHS = ("hidden_size", "_dim")
#: Vision fields listing tower blocks each of which feeds a text block in order.
TAPS = ("deepstack_visual_indexes",)
#: Text fields listing blocks of another kind (Mllama's cross-attention blocks).
TEXT_INDEXES = ("cross_attention_layers",)
#: Vision fields that are the tower's output width, the blocks' width times the streams
#: concatenated (Mllama's: the last block's and each of ``intermediate_layers_indices``).
CONCATENATED = {"vision_output_dim": "intermediate_layers_indices"}

#: Config fields a processor and the model must agree on: the token ids and the vocabulary
#: (the tokenizer's), and how images are cut into patches and tokens (the image processor's).
PROCESSOR_FIELDS = re.compile(
    r".*_token_ids?|.*_token_index|vocab_size|image_size|patch_size|temporal_patch_size|spatial_merge_size"
    r"|image_grid_pinpoints|image_seq_length|vision_feature_select_strategy|mm_tokens_per_image|scale_factor"
)
#: Where a config keeps its parts, for `agreeing`.
PARTS = ("text_config", "vision_config")


def shrink(config: Any, text: dict | None = None, vision: dict | None = None) -> Any:
    """``config`` with the text and vision parts' widths and depths cut (in place);
    ``text`` and ``vision`` are fields set after the cut (``{"num_hidden_layers": 4}``)."""
    text_config = config.get_text_config()
    vision_config = getattr(config, "vision_config", None)
    extras = [part for part in extra_parts(config).values() if part is not text_config]
    # the text model's width wins where the tower's was the same
    owners = {getattr(part, "hidden_size", None): part for part in (vision_config, text_config) if part is not None}
    width = getattr(text_config, "hidden_size", None)
    _cut_text(text_config, {**TEXT, **(text or {})})
    if vision_config is not None:
        _cut_vision(vision_config, {**VISION, **(vision or {})}, width, text_config.hidden_size)
    widths = {old: part.hidden_size for old, part in owners.items() if isinstance(old, int)}
    for part in extras:
        _cut_extra(part, widths)
    for part in [config, text_config, vision_config, *extras]:
        _lift_initializer(part)
    return config


def extra_parts(config: Any) -> dict[str, Any]:
    """The config's parts beside the text and vision ones: ``{"qformer_config": ...}``."""
    from transformers import PretrainedConfig

    return {name: part for name, part in vars(config).items()
            if isinstance(part, PretrainedConfig) and name not in PARTS}


def _set(config: Any, fields: dict) -> None:
    for name, size in fields.items():
        current = getattr(config, name, None)
        if isinstance(current, (list, tuple)) and not isinstance(size, (list, tuple)):
            # one entry per stage or expert bank: as many entries, a stage's blocks never added
            entries = [min(entry, size) if DEPTHS.fullmatch(name) else size for entry in current]
            setattr(config, name, type(current)(entries))
        elif current is not None:
            setattr(config, name, size)


def _cut_extra(config: Any, widths: dict[int, int]) -> None:
    """Cut another part; a width field that was the text model's or the tower's follows
    it (``widths``: old width -> new)."""
    follow = {name: widths[size] for name, size in vars(config).items()
              if name.endswith(WIDTHS) and isinstance(size, int) and not isinstance(size, bool) and size in widths}
    base = getattr(config, "base_channels", None)
    if isinstance(base, int) and base > BASE_CHANNELS:  # a VQ encoder: its attention width is counted in channels
        hidden = getattr(config, "hidden_size", None)
        if isinstance(hidden, int) and hidden % base == 0:
            follow["hidden_size"] = hidden // base * BASE_CHANNELS
        follow["base_channels"] = BASE_CHANNELS
    fields = {name: size for name, size in EXTRA.items() if not (name == "hidden_size" and base is not None)}
    _set(config, {**fields, **follow})
    depth = getattr(config, "num_hidden_layers", None)
    if isinstance(depth, int):
        _cut_indexes(config, depth)


def _lift_initializer(config: Any) -> None:
    if hasattr(config, "initializer_range") and (config.initializer_range or 0) < INITIALIZER_FLOOR:
        config.initializer_range = 0.02


def _cut_text(config: Any, fields: dict) -> None:
    head_dim = getattr(config, "head_dim", None)
    derived = head_dim is None and getattr(config, "hidden_size", None) and getattr(config, "num_attention_heads", None)
    width = getattr(config, "hidden_size", None)
    blocks = getattr(config, "num_hidden_layers", None)
    _set(config, fields)
    for name in TEXT_WIDTHS:
        if width is not None and getattr(config, name, None) == width:
            setattr(config, name, config.hidden_size)
    if derived:  # the head size follows the width: rotary sections must follow it
        _scale_sections(config, config.hidden_size // config.num_attention_heads)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None and getattr(config, "num_hidden_layers", None) is not None:
        config.layer_types = _every_kind(list(layer_types), config.num_hidden_layers)
        config.num_hidden_layers = len(config.layer_types)
    depth = getattr(config, "num_hidden_layers", None)
    if isinstance(blocks, int) and isinstance(depth, int) and depth < blocks:
        _cut_per_block(config, blocks, depth)
    for name in TEXT_INDEXES:
        indexes = getattr(config, name, None)
        if indexes and depth:
            setattr(config, name, [index for index in indexes if index < depth] or [depth - 1])


def _cut_per_block(config: Any, blocks: int, depth: int) -> None:
    """A list with an entry per block (Gemma 3n's ``intermediate_size`` and
    ``activation_sparsity_pattern``) cut to the first ``depth``; keys and values shared from
    earlier blocks (``num_kv_shared_layers``) dropped: a block reusing them needs a block of
    its kind before it that stores them, which a cut to a block of each kind does not keep."""
    for name, entries in list(vars(config).items()):
        if name != "layer_types" and isinstance(entries, list) and len(entries) == blocks:
            setattr(config, name, entries[:depth])
    if getattr(config, "num_kv_shared_layers", 0):
        config.num_kv_shared_layers = 0


def _every_kind(layer_types: list, depth: int) -> list:
    """The first ``depth`` entries of ``layer_types``, with the later ones replaced from
    the end by each kind missing (a hybrid model keeps a block of every kind)."""
    kinds = list(dict.fromkeys(layer_types))
    cut = layer_types[: max(depth, len(kinds))]
    missing = [kind for kind in kinds if kind not in cut]
    for offset, kind in enumerate(reversed(missing)):
        cut[len(cut) - 1 - offset] = kind
    return cut


def _scale_sections(config: Any, head_dim: int) -> None:
    rope = getattr(config, "rope_parameters", None)
    if not isinstance(rope, dict) or not rope.get("mrope_section"):
        return
    sections = list(rope["mrope_section"])
    total = int(head_dim * rope.get("partial_rotary_factor", 1.0)) // 2
    scaled = [section * total // sum(sections) for section in sections]
    for index in sorted(range(len(sections)), key=lambda i: -sections[i])[: total - sum(scaled)]:
        scaled[index] += 1
    config.rope_parameters = {**rope, "mrope_section": scaled}


def _cut_vision(config: Any, fields: dict, text_width: int | None, new_text_width: int) -> None:
    handoff = {
        name: new_text_width
        for name, size in vars(config).items()
        if name in HANDOFF or (name.endswith(WIDTHS) and text_width is not None and size == text_width)
    }
    _set(config, {**fields, **handoff})
    depth = getattr(config, "depth", None) or getattr(config, "num_hidden_layers", None)
    if not isinstance(depth, int):
        return
    _cut_indexes(config, depth)
    for name, streams in CONCATENATED.items():
        if getattr(config, name, None) is not None and getattr(config, streams, None) is not None:
            setattr(config, name, config.hidden_size * (1 + len(getattr(config, streams))))


def _cut_indexes(config: Any, depth: int) -> None:
    """Lists of block indexes inside a part cut to ``depth`` blocks (see the module)."""
    for name, indexes in list(vars(config).items()):
        if not (name.endswith(("_indexes", "_indices")) and isinstance(indexes, (list, tuple)) and indexes):
            continue
        if name in TAPS:
            setattr(config, name, list(range(min(len(indexes), depth))))
        else:
            setattr(config, name, [index for index in indexes if index < depth] or [depth - 1])


def agreeing(config: Any) -> dict[str, dict]:
    """The fields of ``config`` a processor must agree with (`PROCESSOR_FIELDS`), by part:
    ``{"": top-level fields, "text_config": ..., "vision_config": ...}``."""
    parts = {"": config, **{name: getattr(config, name, None) for name in PARTS}}
    found = {}
    for name, part in parts.items():
        if part is None:
            continue
        fields = {key: value for key, value in part.to_dict().items()
                  if PROCESSOR_FIELDS.fullmatch(key) and not isinstance(value, dict)}
        if fields:
            found[name] = fields
    return found


def _agree(config: Any, agree: dict[str, dict]) -> None:
    for name, fields in agree.items():
        part = getattr(config, name) if name else config
        for key, value in fields.items():
            setattr(part, key, value)


#: Files one of which a folder with a processor holds.
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


def has_processor(folder: str | Path) -> bool:
    """Whether ``folder`` holds a processor (``AutoProcessor`` can load one from it)."""
    return any((Path(folder) / name).exists() for name in PROCESSOR_FILES)


def small_copy(
    source: str | Path,
    path: str | Path,
    *,
    processor: str | Path | None = None,
    agree: dict[str, dict] | None = None,
    text: dict | None = None,
    vision: dict | None = None,
) -> Path:
    """Write a small random-weight copy of the checkpoint folder ``source`` to ``path``.

    ``processor``: a folder to take the processor (tokenizer, image processor, chat
    template) from instead of ``source``, required when ``source`` holds none; ``agree``:
    config fields set before the cut so the config agrees with that processor (token ids,
    vocabulary, image geometry; `agreeing` reads them off a config that does).
    """
    from transformers import AutoConfig, AutoProcessor

    from .checkpoints import save

    source = Path(source)
    processor = Path(processor) if processor is not None else source
    if not has_processor(processor):
        raise FileNotFoundError(
            f"{processor} holds no processor ({' or '.join(PROCESSOR_FILES)}): a small copy needs the "
            f"family's tokenizer and processor; pass processor= a folder that holds them"
        )
    config = AutoConfig.from_pretrained(source)
    _agree(config, agree or {})
    shrink(config, text, vision)
    generation = source / "generation_config.json"
    if not generation.exists():
        generation = processor / "generation_config.json"
    return save(path, config, AutoProcessor.from_pretrained(processor), generation)
