"""What the benchmark runs: the geometries, and each workload written three ways.

A workload is the same reads and edits written against plain transformers (a forward,
the limit), raw nnsight (native module paths) and vlreg (standard names). Each
``native_*``/``standard_*`` function runs one trace and returns what it saved.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import torch

from vlreg.testing import build, shared_checkpoint

QWEN2_VL_2B = {  # Qwen2-VL-2B-Instruct's widths, for a machine without ../shared
    "text_config": {"hidden_size": 1536, "intermediate_size": 8960, "num_attention_heads": 12,
                    "num_key_value_heads": 2, "vocab_size": 151936,
                    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24], "rope_theta": 1e6}},
    "vision_config": {"embed_dim": 1280, "num_heads": 16, "mlp_ratio": 4, "hidden_size": 1536},
}


def geometry(name: str, text_layers: int, tower_layers: int) -> tuple[Path, str]:
    """A checkpoint folder of the geometry ``name`` at this depth, and where it came from."""
    if name == "tiny":
        return build("qwen2_vl"), "tiny random checkpoint"
    if name == "qwen2-vl-2b":
        depth = {"text_config": {"num_hidden_layers": text_layers}, "vision_config": {"depth": tower_layers}}
        source = shared_checkpoint("Qwen2-VL-2B-Instruct")
        if source is not None:
            return build("qwen2_vl", source=str(source), **depth), "Qwen2-VL-2B-Instruct's config (../shared)"
        sizes = {part: {**QWEN2_VL_2B[part], **depth[part]} for part in depth}
        return build("qwen2_vl", pixels=(3136, 12845056), **sizes), "Qwen2-VL-2B-Instruct's widths (built in)"
    if name == "llava-interleave":
        source = shared_checkpoint("llava-interleave-qwen-0.5b-hf")
        if source is None:
            raise LookupError("llava-interleave's geometry needs ../shared/checkpoints/llava-interleave-qwen-0.5b-hf")
        depth = {"text_config": {"num_hidden_layers": text_layers}, "vision_config": {"num_hidden_layers": tower_layers}}
        return build("llava_interleave", source=str(source), **depth), "llava-interleave-qwen-0.5b's config (../shared)"
    raise KeyError(name)


class Native:
    """A family's native paths, for raw nnsight, with what its workloads read inside a
    forward instrumented before any trace, as a raw nnsight user must: the scatter's
    host and the last text block's attention, nothing else."""

    def __init__(self, model):
        self.model = model
        inner = model.model
        if hasattr(inner, "visual"):  # Qwen2-VL
            self.tower_blocks = inner.visual.blocks
        else:  # LLaVA
            self.tower_blocks = inner.vision_tower.encoder.layers
        self.text_blocks = inner.language_model.layers
        self.scatter = inner.source.inputs_embeds_masked_scatter_0
        self.text_blocks[len(self.text_blocks) - 1].self_attn.source


def native_logits(native, inputs):
    with native.model.trace(inputs):
        logits = native.model.lm_head.output.save()
    return [logits]


def standard_logits(model, inputs):
    with model.trace(inputs):
        logits = model.logits.save()
    return [logits]


def native_all_blocks(native, inputs):
    saved = []
    with native.model.trace(inputs):
        for block in native.tower_blocks:
            saved.append(block.output.save())
        for block in native.text_blocks:
            saved.append(block.output.save())
        saved.append(native.model.lm_head.output.save())
    return saved


def standard_all_blocks(model, inputs):
    saved = []
    with model.trace(inputs):
        for block in model.vision.layers:
            saved.append(block.layer_output.save())
        for block in model.layers:
            saved.append(block.layer_output.save())
        saved.append(model.logits.save())
    return saved


def native_scatter_edit(native, inputs):
    with native.model.trace(inputs):
        features = native.scatter.inputs[0][1]
        kept = features.clone().save()
        features[:] = 0
        logits = native.model.lm_head.output.save()
    return [kept, logits]


def standard_scatter_edit(model, inputs):
    with model.trace(inputs):
        features = model.vision.image_features
        kept = features.clone().save()
        features[:] = 0
        logits = model.logits.save()
    return [kept, logits]


def native_pattern(native, inputs):
    attention = native.text_blocks[len(native.text_blocks) - 1].self_attn
    with native.model.trace(inputs):
        pattern = attention.source.attention_interface_1.source.nn_functional_dropout_0.output.save()
    return [pattern]


def standard_pattern(model, inputs):
    with model.trace(inputs):
        pattern = model.layers[-1].self_attn.attention_probabilities.save()
    return [pattern]


WORKLOADS = {
    "logits": (native_logits, standard_logits),
    "all blocks + logits": (native_all_blocks, standard_all_blocks),
    "image_features + edit": (native_scatter_edit, standard_scatter_edit),
    "attention pattern (eager)": (native_pattern, standard_pattern),
}


def plain_forward(module, inputs):
    return module(**inputs).logits


def saved_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def smoke_or_full(argv: list | None, doc: str, name: str) -> argparse.Namespace:
    """The options of a benchmark that runs at full size or, with ``--smoke``, at tiny
    size to check it works; ``--out`` defaults to ``benchmarks/<name>.json``. Warnings
    are silenced: they would interleave with the figures."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script works")
    parser.add_argument("--out", default=None, help=f"where to write the JSON (default: benchmarks/{name}.json)")
    arguments = parser.parse_args(argv)
    arguments.out = Path(arguments.out) if arguments.out else Path(__file__).resolve().parent / f"{name}.json"
    warnings.simplefilter("ignore")
    return arguments


def write(results: dict, table: str, out: Path) -> None:
    """Print a benchmark's ``table`` and write its ``results`` to ``out`` as JSON."""
    print(table)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out}")
