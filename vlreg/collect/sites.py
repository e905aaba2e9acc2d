"""Which values `collect` reads, checked before any work, and how each becomes rows.

A value is named as in a trace (``"layers[3].layer_output"``, ``"vision.image_features"``,
``"vision.layers[1].mlp.mlp_output"``; ``layers.3.layer_output`` is taken too) and must
be a row of the model's `support()` that this load serves. Three kinds:

* **stream** values, ``[batch, seq, width]`` along the text sequence (a block's
  ``input``/``output``/``layer_output``, ``self_attn.attention_output``,
  ``mlp.mlp_output``, ``token_embeddings``, ``logits``): a row per position ``at`` picks;
  on an encoder-decoder (Florence-2) the prompt's blocks are the encoder's
  (``encoder.layers[i]``, ``encoder.input_embeddings``), and the decoder's are refused;
* **features**, ``vision.image_features`` (or ``vision.video_features``: one column, each
  file's features at its own tokens, an image's or a video's): a row per image or video
  token (``at="image"`` only);
* **tower** values (``vision.patch_embeddings``, ``vision.tower_output``, a tower block's
  stream values): a row per position of the tower's own sequence for the image (its
  crops' patches in the tower's order, class tokens included), ``at="image"`` only.

Tower rows do not line up with the image's tokens (a token is several patches, or a
crop's), so a store holds tower values or the others, not both.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Sequence

from attrs import field, frozen

AT = ("image", "text", "all", "last")
STREAM = ("input", "output", "layer_output", "attention_output", "mlp_output")
TOWER = ("patch_embeddings", "tower_output")
ROOT = ("token_embeddings", "logits")
FEATURES = ("vision.image_features", "vision.video_features")
PART = re.compile(r"^([A-Za-z_]\w*)(?:\[(-?\d+)\])?$")


@frozen
class Site:
    """One value to collect: its name, kind, the envoy it is read on and its place in the
    forward's order (values must be read in that order in a trace)."""

    name: str
    kind: str
    envoy: Any = field(eq=False, repr=False)
    value: str
    order: int


def resolve(model: Any, names: Sequence[str], at: str) -> list[Site]:
    """The sites of ``names`` in forward order, or the refusal that says what to pass."""
    if at not in AT:
        raise ValueError(f"at={at!r}: collect reads at one of {', '.join(AT)}")
    if isinstance(names, str):
        names = [names]
    if not names:
        raise ValueError("values= names no value: pass one or more, e.g. ['layers[0].layer_output']")
    walk = {(id(envoy), name): order for order, (envoy, name) in enumerate(model.walk())}
    sites: dict[str, Site] = {}
    for given in names:
        site = _site(model, given, walk)
        sites.setdefault(site.name, site)
    found = sorted(sites.values(), key=lambda site: site.order)
    if all(name in sites for name in FEATURES):
        raise ValueError("vision.image_features and vision.video_features are one column in a store (each file's "
                         "features at its tokens: an image's or a video's): name one of them")
    kinds = {site.kind for site in found}
    if "tower" in kinds and kinds != {"tower"}:
        tower = [s.name for s in found if s.kind == "tower"]
        other = [s.name for s in found if s.kind != "tower"]
        raise ValueError(f"{', '.join(tower)} {'has' if len(tower) == 1 else 'have'} a row per position of the tower's "
                         f"sequence and {', '.join(other)} a row per token of the text model's, so their rows cannot "
                         f"share one index: collect them into two stores")
    for site in found:
        _check_at(model, site, at)
    return found


def _site(model: Any, given: str, walk: dict) -> Site:
    name = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", str(given).strip().replace(" ", ""))
    *path, value = name.split(".")
    envoy = model
    for part in path:
        match = PART.match(part)
        try:
            child = getattr(envoy, match.group(1)) if match else None
        except AttributeError as error:  # a standard child the family refuses says why (FastVLM's vision.layers)
            if match.group(1) in getattr(envoy, "standard_children", ()):
                raise ValueError(f"{given!r} cannot be collected: {error}") from None
            child = None
        if child is not None and match.group(2) is not None:
            try:
                child = child[int(match.group(2))]
            except (IndexError, TypeError, AttributeError):
                count = len(child) if hasattr(child, "__len__") else "no"
                raise ValueError(f"{given!r}: {match.group(1)} has {count} blocks, so there is no "
                                 f"{match.group(1)}[{match.group(2)}]") from None
        if child is None or not hasattr(type(child), "values"):
            raise ValueError(_unknown(model, given))
        envoy = child
    if value not in type(envoy).values():
        raise ValueError(_unknown(model, given))
    reason = envoy.why_unavailable(value)
    if reason:
        raise ValueError(f"{given!r} is unavailable on this model: {reason}")
    tower = name.startswith("vision.")
    if name in FEATURES:
        kind = "features"
    elif tower and (value in TOWER or (path[1:2] and path[1].startswith("layers[") and value in STREAM)):
        kind = "tower"
    elif not tower and (name in ROOT or name == "encoder.input_embeddings" or (_blocks(path) and value in STREAM)):
        kind = "stream"
        if model.__dict__.get("encoder") is not None and not name.startswith("encoder.") and name != "token_embeddings":
            raise ValueError(
                f"{given!r} is the decoder's: on this encoder-decoder, layers and logits run over the output so far, "
                f"not the prompt, so they have no row at the prompt's tokens; collect the encoder's "
                f"(encoder.layers[i].layer_output, encoder.input_embeddings) or token_embeddings")
    else:
        raise ValueError(
            f"{given!r} is not one vector per token: collect stores rows of the residual stream and what adds to it "
            f"(layers[i].input, .output, .layer_output, .self_attn.attention_output, .mlp.mlp_output; "
            f"token_embeddings, logits), vision.image_features, and the tower's (vision.patch_embeddings, "
            f"vision.tower_output, vision.layers[j]'s); read {given} in a trace of your own")
    if kind == "tower" and getattr(model.vision, "padded_patches", False):
        raise ValueError(f"{given!r}: this tower's values hold padding among an image's patches (a fixed budget of "
                         f"patches, or frames padded to a batch's largest), so not every row is the image: collect "
                         f"vision.image_features or a text value")
    return Site(name, kind, envoy, value, walk[(id(envoy), value)])


def _blocks(path: list) -> bool:
    """Whether ``path`` names a text block: ``layers[i]``, or an encoder's ``encoder.layers[i]``."""
    return bool(path[:1] and path[0].startswith("layers[")) or bool(
        path[:2] and path[0] == "encoder" and path[1].startswith("layers["))


def _check_at(model: Any, site: Site, at: str) -> None:
    if site.kind in ("features", "tower") and at != "image":
        where = "the image's tokens" if site.kind == "features" else "the tower's patches of the image"
        raise ValueError(f"{site.name} has rows only at {where}, so at={at!r} gives it none: collect it with at='image'")
    if site.kind == "stream" and at in ("image", "all") and _not_in_stream(model):
        raise ValueError(
            f"{site.name} has no rows at the image's tokens: the {model.family.name!r} family's image reaches the text "
            f"model by cross-attention, with no tokens in the text stream; collect vision.image_features, or "
            f"{site.name} at at='text' or 'last'")


def _unknown(model: Any, given: str) -> str:
    rows = [row for row, reason in model.support().items() if reason is None]
    close = difflib.get_close_matches(re.sub(r"\[-?\d+\]|\.\d+(?=\.)", "", str(given)), rows, n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    vision = model.__dict__.get("vision")
    examples = ["layers[0].layer_output", *(["vision.image_features"] if "vision.image_features" in rows else []),
                *(["vision.layers[0].layer_output"] if vision is not None and "layers" in vision.__dict__ else [])]
    return (f"{given!r} is not a value of this model: name one as in a trace ({', '.join(examples)}); "
            f"model.support() lists the rows it serves ({', '.join(rows[:12])}{', ...' if len(rows) > 12 else ''})"
            f"{hint}")


def read(model: Any, sites: Sequence[Site], at: str, dtype: Any, video: bool = False) -> list:
    """Inside a trace: the attention mask, the image-token mask (with ``video``, the
    video-token mask, and the features are the video's) and each site's rows: a
    stream value at the positions ``at`` picks (``[rows, width]``, rows in batch-row then
    position order), the features whole, a tower value whole (split per image after);
    with ``dtype``, each value in it, then each value's largest finite magnitude (what
    the store's dtype must hold). Save the list (``nnsight.save``): a remote trace sends
    back saved names only."""
    mask = model.attention_mask
    image = model.vision.video_token_mask if video else model.vision.image_token_mask
    found, peaks = [mask, image], []
    where = picked(mask.bool(), image, at)
    for site in sites:
        value = getattr(site.envoy, ("video_features" if video else "image_features") if site.kind == "features"
                        else site.value)
        if site.kind == "stream":
            value = value[where]
        elif value.dim() == 2 and site.kind == "tower":
            value = value[None]  # a packed tower's native [patches, hidden]
        value = value.detach()
        if dtype is not None:
            magnitude = value.abs().float()
            peaks.append(magnitude.where(magnitude.isfinite(), 0).amax() if value.numel() else magnitude.sum())
            value = value.to(dtype)
        found.append(value)
    return found + peaks


def picked(real: Any, image: Any, at: str) -> Any:
    """``[batch, seq]``, True at the positions ``at`` reads, from where each row's prompt is
    (``real``, the attention mask) and its image tokens: the last position is the last
    real one, on whichever side the padding is."""
    if at == "image":
        return image
    if at == "text":
        return real & ~image
    if at == "all":
        return real
    return real & (real.long().cumsum(-1) == real.long().sum(-1, keepdim=True))


def _not_in_stream(model: Any) -> str | None:
    entry = model.family.entry
    return entry.not_in_stream() if entry is not None else None
