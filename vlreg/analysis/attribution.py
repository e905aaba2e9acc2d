"""Attribution patching: the first-order estimate of patching every token of every block.

Patching block ``l``'s value at token ``t`` from a run on the corrupt images into the run on
the clean ones changes a metric of the clean run by about ``(corrupt - clean) . d metric /
d value`` there (Nanda 2023; Syed et al. 2023): one forward on the corrupt images, one forward
and one backward on the clean ones give it at every token of every block, where exact
patching (`patch_image` with ``per_token``) runs a forward per token and block.

Where the attention pattern is served (eager attention), the keys and queries get AtP*'s fix
for the softmax (Kramár et al. 2024): a linear estimate through a saturated softmax misses
most of a key's effect, so the pattern a patched key or query makes is computed exactly (one
column, or one row, of the scores changes: the softmax of it is closed-form), and only the
step from the pattern to the metric is linear: ``sum(d metric / d pattern * (patched pattern -
clean pattern))``, per head.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from attrs import frozen

from ..core.errors import Unavailable
from ..core.images.geometry import ImageGeometry
from ..core.images.options import takes_processor_options
from ..core.remote import remotely
from .tokens import _images, _layers, in_stream, stream_written, token_id, warn_if_turn_ended


@frozen
class Attribution:
    """First-order effects of patching the corrupt run's values into the clean run, on the
    metric at ``position`` of row ``row`` (``clean`` and ``corrupt``: the metric on each run;
    by default the ``target`` logit).

    ``effects[value]`` is ``[layers, seq]``: block ``layers[i]``'s value at every token of
    the row, text and image alike. Where the pattern is served, ``keys`` and ``queries`` are
    ``[layers, heads, seq]``: AtP*'s estimate for patching one token's key (or query) in one
    head. `of_image` cuts any of them to an image's tokens, in its geometry's order."""

    layers: tuple[int, ...]
    row: int
    position: int
    target: int | None
    clean: float
    corrupt: float
    effects: dict[str, torch.Tensor]
    keys: torch.Tensor | None
    queries: torch.Tensor | None
    geometry: list[ImageGeometry]

    def of_image(self, image: int = 0, value: str = "layer_output") -> torch.Tensor:
        """``[layers, tokens]`` (``[layers, heads, tokens]`` for ``"keys"``, ``"queries"``):
        the effects at image ``image``'s tokens, as `vlreg.pictures.overlay` draws them."""
        found = {"keys": self.keys, "queries": self.queries}.get(value, self.effects.get(value))
        if found is None:
            raise KeyError(f"no {value!r} here: the effects are {sorted(self.effects)}"
                           + (", keys, queries" if self.keys is not None else ""))
        return found[..., self.geometry[image].positions]


Metric = Callable[[torch.Tensor], torch.Tensor]


@remotely(gradients=True)
@takes_processor_options
def attribution_patching(
    model: Any,
    prompt: Any,
    clean_images: Any,
    corrupt_images: Any,
    *,
    metric: Metric | None = None,
    values: Sequence[str] = ("layer_output",),
    target: "int | str | None" = None,
    position: int = -1,
    layers: Sequence[int] | None = None,
    attention: bool | None = None,
) -> Attribution:
    """Estimate, at once, the effect of patching each of ``values`` of each block in
    ``layers`` (``"layer_output"``, ``"input"``, ``"self_attn.attention_output"``,
    ``"mlp.mlp_output"``: a block's values over the sequence) at each token from a run of
    ``prompt`` on ``corrupt_images`` into its run on ``clean_images``.

    ``metric`` maps the clean run's logits at ``position`` (``[vocab]``) to a scalar; by
    default the logit of ``target``, itself by default the corrupt run's likeliest token
    there (as `patch_image` measures). ``attention``: AtP*'s keys and queries too (by
    default where this load serves the pattern); they need eager attention. The two image
    lists must give the same tokens (the same grids)."""
    in_stream(model, "attribution_patching")
    warn_if_turn_ended(model, prompt, position, "attribution_patching")
    clean_images, corrupt_images = _images(clean_images), _images(corrupt_images)
    geometry = model.vision.geometry(prompt, clean_images)
    other = model.vision.geometry(prompt, corrupt_images)
    if [[(g.rows, g.columns) for g in i.grids] for i in other] != [[(g.rows, g.columns) for g in i.grids] for i in geometry]:
        raise ValueError("the corrupt images' token grids differ from the clean ones': resize one to the other's size")
    blocks = model.prompt_layers
    layers = _layers(model, layers, blocks)
    stream_written(model, "attribution_patching", [blocks[layer] for layer in layers], values, gradients=True)
    attending = _attending(model, blocks, layers, attention)
    row = geometry[0].row
    corrupt, corrupt_logits = _read(model, prompt, corrupt_images, blocks, layers, values, attending, row, position)
    wanted = None
    if metric is None:
        wanted = int(corrupt_logits.argmax()) if target is None else token_id(model, target)
        metric = _logit(wanted)
    clean, grads, measured = _read_with_gradients(model, prompt, clean_images, blocks, layers, values, attending, row,
                                                  position, metric)
    effects = {name: torch.stack([_effect(corrupt[name][i], clean[name][i], grads[name][i]) for i in range(len(layers))])
               for name in values}
    keys = queries = None
    if attending:
        keys, queries = _qk_fixed(model, blocks, layers, clean, corrupt, grads)
    return Attribution(layers=layers, row=row, position=position, target=wanted, clean=float(measured),
                       corrupt=float(metric(corrupt_logits)), effects=effects, keys=keys, queries=queries,
                       geometry=geometry)


def _logit(token: int) -> Metric:
    return lambda logits: logits[token]


def _attending(model: Any, blocks: Any, layers: tuple, attention: bool | None) -> bool:
    """Whether AtP*'s keys and queries are computed: where asked (or by default, where
    served): every chosen block attends, eagerly, with a score scale it declares."""
    reasons = []
    if model.attn_implementation != "eager":
        reasons.append(f"the attention runs as {model.attn_implementation!r}; load with attn_implementation='eager'")
    for layer in layers:
        attention_envoy = blocks[layer].__dict__.get("self_attn")
        if attention_envoy is None:
            reasons.append(f"block {layer} has no self_attn")
        elif getattr(attention_envoy._module, "scaling", None) is None:
            reasons.append(f"block {layer}'s attention declares no score scale (scaling)")
        elif getattr(attention_envoy._module, "attn_logit_softcapping", None):
            reasons.append(f"block {layer}'s attention softcaps its scores")
    heads = {blocks[layer].self_attn.num_heads for layer in layers if "self_attn" in blocks[layer].__dict__}
    if len(heads) > 1:  # keys and queries are one [layers, heads, seq] tensor
        reasons.append(f"the chosen blocks differ in heads ({sorted(heads)}); pass layers= of one head count")
    if attention and reasons:
        raise Unavailable(f"attribution_patching's keys and queries (AtP*) are unavailable: {reasons[0]}")
    return bool(attention is not False and not reasons)


def _value(block: Any, name: str) -> Any:
    found = block
    for part in name.split("."):
        found = getattr(found, part)
    return found


_PATTERN = ("self_attn.attention_queries", "self_attn.attention_keys", "self_attn.attention_probabilities")


def _names(values: Sequence[str], attending: bool, block: Any) -> list[str]:
    """The values read at each block, in the order the forward computes them."""
    wanted = list(dict.fromkeys([*values, *(_PATTERN if attending else ())]))
    order = [envoy.label(name).removeprefix(block.place.label + ".") for envoy, name in block.walk()]
    unknown = [name for name in wanted if name not in order]
    if unknown:
        raise Unavailable(f"attribution_patching is unavailable for {unknown}: a block here serves {order}")
    return sorted(wanted, key=order.index)


def _read(model, prompt, images, blocks, layers, values, attending, row, position) -> tuple[dict, torch.Tensor]:
    """The values at ``row`` on a run of ``images`` (no gradients), and the logits at ``position``."""
    names = _names(values, attending, blocks[layers[0]])
    saved: list = []
    with torch.no_grad(), model.trace(prompt, images=images):
        for layer in layers:
            for name in names:
                saved.append(_value(blocks[layer], name)[row].save())
        logits = model.logits[row, position].save()
    return _by_name(names, layers, [each.detach() for each in saved]), logits.detach().float()


def _read_with_gradients(model, prompt, images, blocks, layers, values, attending, row, position, metric):
    """The values at ``row`` on a run of ``images``, their gradients of ``metric`` (one
    backward, accumulating into no weight), and the metric."""
    names = _names(values, attending, blocks[layers[0]])
    served: list = []
    found: list = []
    grads: list = []
    with model.trace(prompt, images=images):
        for layer in layers:
            for name in names:
                served.append(_value(blocks[layer], name))
        measured = metric(model.logits[row, position].float())
        with measured.backward(inputs=served):
            for value in served:
                grads.append(value.grad[row].save())
        for value in served:
            found.append(value[row].detach().save())
        measured = measured.detach().save()
    return _by_name(names, layers, found), _by_name(names, layers, grads), measured


def _by_name(names: list[str], layers: tuple, flat: list) -> dict[str, list[torch.Tensor]]:
    return {name: [flat[i * len(names) + k] for i in range(len(layers))] for k, name in enumerate(names)}


def _effect(corrupt: torch.Tensor, clean: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``(corrupt - clean) . grad`` per token: every axis after the sequence summed."""
    if clean.dim() < 1 or corrupt.shape != clean.shape:
        raise ValueError(f"a value attributed over tokens is [seq, ...] at the row, not {list(clean.shape)}")
    return ((corrupt.float() - clean.float()) * grad.float()).reshape(clean.shape[0], -1).sum(-1)


def _qk_fixed(model, blocks, layers, clean, corrupt, grads) -> tuple[torch.Tensor, torch.Tensor]:
    """AtP*'s estimate for each token's key and query, per block and head: the pattern the
    patched key (one column of scores) or query (one row) makes, exact; then linear."""
    keys, queries = [], []
    for i, layer in enumerate(layers):
        attention = blocks[layer].self_attn
        scale = float(attention._module.scaling)
        q = clean["self_attn.attention_queries"][i].float()  # [heads, seq, d]
        k = clean["self_attn.attention_keys"][i].float()  # [kv_heads, seq, d]
        moved_k = corrupt["self_attn.attention_keys"][i].float() - k
        moved_q = corrupt["self_attn.attention_queries"][i].float() - q
        groups = q.shape[0] // k.shape[0]
        k, moved_k = k.repeat_interleave(groups, 0), moved_k.repeat_interleave(groups, 0)
        pattern = clean["self_attn.attention_probabilities"][i].float()  # [heads, seq, seq]
        grad = grads["self_attn.attention_probabilities"][i].float()
        keys.append(_key_effects(pattern, grad, scale * torch.einsum("hqd,htd->hqt", q, moved_k)))
        queries.append(_query_effects(pattern, grad, scale * torch.einsum("htd,hjd->htj", moved_q, k)))
    return torch.stack(keys), torch.stack(queries)


def _key_effects(pattern: torch.Tensor, grad: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """``[heads, seq]``: for each key ``t``, ``sum(grad * (pattern' - pattern))`` where
    ``pattern'`` is the softmax with column ``t`` of the scores moved by ``shift[:, :, t]``.
    In closed form: with ``r = exp(shift)`` and ``c = 1 + pattern[:, :, t] (r - 1)`` (the
    normalizer's ratio), every entry of a row is divided by ``c`` and entry ``t`` also
    multiplied by ``r``; masked entries (pattern 0) move nothing."""
    ratio = torch.exp(shift.clamp(max=80.0))
    scale = 1 + pattern * (ratio - 1)  # [heads, q, t]
    weighted = (grad * pattern).sum(-1, keepdim=True)  # [heads, q, 1]
    changed = (1 / scale - 1) * weighted + pattern * grad * (ratio - 1) / scale
    return changed.sum(1)


def _query_effects(pattern: torch.Tensor, grad: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """``[heads, seq]``: for each query ``t``, ``sum(grad[t] * (softmax(scores[t] + shift[t])
    - pattern[t]))``, the row recomputed exactly (masked keys stay at 0)."""
    logged = torch.log(pattern.clamp_min(1e-30)).masked_fill(pattern == 0, float("-inf"))
    moved = torch.softmax(logged + shift, dim=-1).nan_to_num(0.0)
    return (grad * (moved - pattern)).sum(-1)
