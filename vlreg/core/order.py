"""The order the forward computes the standard values in, in words, for `OutOfOrder`.

Derived from the walk over the standard tree (`vlreg.core.envoys.standard.tree`), the one
place the forward order is kept: the root's values, then each stage (the tower and the
projector, the encoder, the text blocks) in the order the walk meets it, a stack of
blocks told as its first and last block and what each computes. Values this load cannot
serve (a tower on a text-only load) are left out.
"""

from __future__ import annotations

from typing import Any


def in_words(model: Any) -> str:
    """``model``'s forward order in words: ``"input_ids, ..., then token_embeddings, then
    the tower (...) and model.projector, then vision.image_features (...), then layers[0]
    to layers[3], each as input, ..., then logits"``."""
    steps: list[str] = []
    stages: dict[str, list] = {}
    for envoy, name in model.walk():
        if envoy.why_unavailable(name) is not None:
            continue
        label = envoy.label(name)
        stage = _stage(model, envoy, name)
        if stage is None:
            steps.append(_named(model, envoy, name, label))
        elif stage not in stages:
            stages[stage] = []
            steps.append(stage)
        if stage is not None:
            stages[stage].append((envoy, name))
    return ", then ".join(_told(model, step, stages.get(step)) for step in steps)


#: The vision values told by their own names, not within the tower.
TOLD_BY_NAME = ("image_token_mask", "video_token_mask", "image_features", "video_features")


def _stage(model: Any, envoy: Any, name: str) -> str | None:
    """The stage a value is told within (``None``: told by its own name, as the mask, the
    features and what the entry tells between the projector and them are)."""
    if envoy.place.tower is not None and name not in (*TOLD_BY_NAME, *model.family.entry.told):
        return "vision"
    if envoy.block_index is not None:
        return envoy.place.label.partition("[")[0]  # "layers", "encoder.layers"
    if envoy is not model and envoy.place.label == "encoder":
        return "encoder"
    return None


def _named(model: Any, envoy: Any, name: str, label: str) -> str:
    if name in ("image_token_mask", "video_token_mask"):
        return f"{label} (off the inputs)"
    if name == "image_features":
        return f"{label} ({model.family.entry.words})"
    if name == "video_features":
        return f"{label} (where the video's features enter the embeddings)"
    if envoy.place.tower is not None and name in model.family.entry.told:
        return f"{label} ({model.family.entry.told[name]})"
    return label


def _told(model: Any, step: str, values: list | None) -> str:
    if values is None:
        return step
    if step == "vision":
        return f"the tower ({', '.join(_compact(values))}) and model.projector"
    if step == "encoder":
        return f"the encoder ({', '.join(_compact(values))})"
    blocks = sorted({envoy.block_index for envoy, _ in values})
    each: list[str] = []
    for block in blocks:  # blocks of several kinds: each kind's values where its blocks compute them
        at = 0
        for told in dict.fromkeys(_within(envoy, name) for envoy, name in values if envoy.block_index == block):
            if told in each:
                at = each.index(told) + 1
            else:
                each.insert(at, told)
                at += 1
    return f"{step}[{blocks[0]}] to {step}[{blocks[-1]}], each as {', '.join(each)}"


def _compact(values: list) -> list[str]:
    """A stage's values by label, a stack of blocks as its first and last block."""
    told: list[str] = []
    stacks: dict[str, list[int]] = {}
    for envoy, name in values:
        if envoy.block_index is None:
            told.append(envoy.label(name))
            continue
        stack = envoy.place.label.partition("[")[0]
        if stack not in stacks:
            stacks[stack] = []
            told.append(stack)
        stacks[stack].append(envoy.block_index)
    return [f"{item}[{min(stacks[item])}] to {item}[{max(stacks[item])}]" if item in stacks else item
            for item in dict.fromkeys(told)]


def _within(envoy: Any, name: str) -> str:
    """How a block's value is told inside "each as ...": the block's own values by name, a
    sublayer's as its values (``self_attn's values``) or its one output (``mlp.mlp_output``)."""
    label = envoy.place.label
    inner = label[label.index("]") + 1:].lstrip(".") if "]" in label else ""
    if not inner:
        return name
    values = type(envoy).values()
    return f"{inner}.{name}" if len(values) == 1 else f"{inner}'s values"
