"""Small checkpoints on disk, loaded by tests the way a real checkpoint is loaded.

There is no model hub in vlreg's tests: each family plugin contributes builders
(`vlreg_checkpoints`) that write a random-weight checkpoint folder: config, weights,
a tokenizer with the family's special tokens, the family's real processor and its chat
template. `build` finds a builder by name and caches what it wrote for the session.

`shared_checkpoint` finds the real checkpoints' metadata (configs, tokenizers,
templates, no weights) in ``../shared/checkpoints`` beside the repository, from which
a builder can make a model with the real widths and token ids at reduced depth.
"""

from __future__ import annotations

import atexit
import difflib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

from ..core.host import plugins

#: Sentences the tiny tokenizers are trained on: enough merges for the prompts the
#: tests and the spec use, byte fallback for the rest.
CORPUS = (
    "You are a helpful assistant.",
    "What is in this image? Describe the picture.",
    "A photo of a red square and a blue circle on a white table.",
    "The quick brown fox jumps over the lazy dog.",
    "The Eiffel Tower is in Paris. The capital of France is Paris.",
)

#: The tiny text model every builder starts from: 64 wide, 4 query heads over 2 key/value
#: heads of 16, 2 blocks. A builder adds its family's own fields (rotary sections, a
#: sliding window) and its token ids.
TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
}
#: What a tiny DeepSeek-V3-style text model adds to `TINY_TEXT` (Kimi K2.5's text model, a
#: base ``deepseek_v3``): latent attention (queries through a 32-wide latent, keys and values
#: through a 16-wide one, each head's queries and keys 16 wide without positions plus 8
#: rotary, values 16 wide; as many key heads as query heads, as MLA expands them), a dense
#: first block, then 2 of 4 experts chosen within the best of 2 groups beside a shared expert,
#: weights scaled by 2.5.
TINY_LATENT_MOE = {
    "num_key_value_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "n_group": 2,
    "topk_group": 1,
    "routed_scaling_factor": 2.5,
    "norm_topk_prob": True,
}
#: The tiny tower every builder starts from: 32 wide, 2 heads, 2 blocks (the image and
#: patch sizes are the family's: its processor cuts images for them).
TINY_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
}

_built: dict[tuple, Path] = {}


def _scratch(name: str) -> Path:
    """A temporary folder removed when the process exits: what `build` writes without a
    ``path`` (real geometries run to gigabytes) never outlives the tests that used it."""
    folder = Path(tempfile.mkdtemp(prefix=f"vlreg-{name}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def forget(folder: str | os.PathLike) -> None:
    """Remove a folder `build` wrote without a ``path`` now, not at exit (a module's
    large real-geometry checkpoint, once its tests are done)."""
    for key, built in list(_built.items()):
        if built == Path(folder):
            del _built[key]
    shutil.rmtree(folder, ignore_errors=True)


def builders() -> dict[str, Callable[..., Path]]:
    """Every checkpoint builder the installed plugins contribute, by name."""
    found: dict[str, Callable[..., Path]] = {}
    for contribution in plugins.plugin_manager().hook.vlreg_checkpoints():
        found.update(contribution or {})
    return found


def family_builders(make: Callable[..., Path], families: Iterable[str]) -> dict[str, Callable[..., Path]]:
    """A builder per family of a plugin whose families one function builds: ``build(path,
    **overrides)`` calls ``make(family, path, text, vision, overrides)``, the ``text_config``
    and ``vision_config`` overrides taken out of the others (fields of the top-level config)."""

    def builder(family: str) -> Callable[..., Path]:
        def build(path: str | os.PathLike, **overrides: Any) -> Path:
            text, vision = dict(overrides.pop("text_config", {})), dict(overrides.pop("vision_config", {}))
            return make(family, Path(path), text, vision, overrides)

        build.__doc__ = (f"Write a random-weight {family} checkpoint to ``path``. ``overrides``: ``text_config`` "
                         f"and ``vision_config`` dicts, other fields of the top-level config.")
        return build

    return {family: builder(family) for family in families}


def build(name: str, path: str | os.PathLike | None = None, **overrides: Any) -> Path:
    """Write the checkpoint ``name`` (into ``path``, else a cached temporary folder that
    is removed when the process exits; `forget` removes it sooner).

    ``name`` is a served model type (``"llava"``: its default variant) or a variant's
    name (``"llava_1_5"``); ``vlreg plugins --all`` lists them per plugin.

    ``overrides`` go to the builder (config fields such as ``num_hidden_layers``).
    Without a ``path`` the same (name, overrides) is built once per process.
    """
    available = builders()
    if name not in available:
        close = difflib.get_close_matches(name, available, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise KeyError(
            f"no plugin builds a checkpoint named {name!r}: {hint}the names are the served model types "
            f"and their variants: {', '.join(sorted(available))} (vlreg plugins --all lists each plugin's)"
        )
    key = (name, json.dumps(overrides, sort_keys=True, default=str))
    if path is None and key in _built:
        return _built[key]
    folder = Path(path) if path is not None else _scratch(name)
    available[name](folder, **overrides)
    if path is None:
        _built[key] = folder
    return folder


def shared_checkpoint(name: str) -> Path | None:
    """The real checkpoint metadata folder ``name`` from ``../shared/checkpoints``.

    ``None`` where it is absent (a user's fresh clone has no ``../shared``).
    ``VLREG_SHARED`` names another place for the ``shared`` folder.
    """
    root = Path(os.environ.get("VLREG_SHARED", Path(__file__).resolve().parents[2].parent / "shared"))
    folder = root / "checkpoints" / name
    return folder if folder.is_dir() else None


def tokenizer(special_tokens: Iterable[str], corpus: Iterable[str] = CORPUS, vocab_size: int = 320, **roles: str) -> Any:
    """A small byte-level BPE tokenizer with ``special_tokens`` added whole, at most
    ``vocab_size`` tokens (the 256 bytes, the special tokens, then merges).

    ``roles`` names special tokens by role (``eos_token="<|im_end|>"``). The special
    tokens get the first ids, in order, so the text vocabulary follows them.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special_tokens = list(special_tokens)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(corpus), trainer)
    named = set(roles.values())
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        additional_special_tokens=[token for token in special_tokens if token not in named],
        **roles,
    )


def reduce_depth(config: Any, fields: dict[str, Any]) -> None:
    """Set ``fields`` on ``config`` (``{"num_hidden_layers": 2}``), cutting what lists
    per layer (``layer_types``) to a new depth, for a real geometry built shallow."""
    for name, value in fields.items():
        setattr(config, name, value)
        layer_types = getattr(config, "layer_types", None)
        if name == "num_hidden_layers" and layer_types is not None:
            config.layer_types = list(layer_types)[:value]


def save(path: str | os.PathLike, config: Any, processor: Any, generation: Any = None, dtype: Any = None,
         weights: Callable[[Any], None] | None = None) -> Path:
    """Write a checkpoint folder: random weights for ``config`` (seeded, so a builder
    writes the same weights each time), the processor with its tokenizer and chat
    template, and the generation config (a `GenerationConfig`, or a file to copy).
    ``weights(model)``, where given, sets weights before they are written, under
    ``torch.no_grad`` and the same seed: parameters transformers starts at a constant (a
    gate at zero, a sink per head) that a test must see vary."""
    import torch
    from transformers import AutoModelForImageTextToText

    path = Path(path)
    torch.manual_seed(0)
    options = {"dtype": dtype} if dtype is not None else {}
    model = AutoModelForImageTextToText.from_config(config, **options).eval()
    if weights is not None:
        with torch.no_grad():
            weights(model)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    if isinstance(generation, (str, os.PathLike)):
        if Path(generation).exists():
            shutil.copy(generation, path / "generation_config.json")
    elif generation is not None:
        generation.save_pretrained(path)
    return path


def from_source(
    path: str | os.PathLike, source: str | os.PathLike, *, text: dict, vision: dict, dtype: Any = "bfloat16", **overrides: Any
) -> Path:
    """A real checkpoint's geometry with random weights: its config (``overrides`` on the
    top level, ``text`` and ``vision`` fields on those parts, e.g. shallower depths), its
    tokenizer, processor, chat template and generation config. ``source`` is its
    metadata folder; no weights are read."""
    import torch
    from transformers import AutoConfig, AutoProcessor

    source = Path(source)
    config = AutoConfig.from_pretrained(source, **overrides)
    reduce_depth(config.get_text_config(), text)
    reduce_depth(config.vision_config, vision)
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    return save(path, config, AutoProcessor.from_pretrained(source), source / "generation_config.json", dtype)
