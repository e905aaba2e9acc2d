"""Per-block curves as plots, with matplotlib (an optional extra: ``pip install vlreg[plots]``).

For the helpers that give one number per text block: `patching` (the change of the target
logit when an image's tokens are patched, block by block: `vlreg.analysis.patch_image`),
`lens` (the logit lens's probability of its target at chosen image tokens:
`vlreg.analysis.logit_lens`) and `attention` (the share of a text token's attention to the
image that lands on chosen image tokens: `vlreg.analysis.attention_to_images`); `blocks`
draws any such curves. Each returns a `Plot`, which shows itself in a notebook
(``_repr_png_``) and saves as a PNG. Numbers are formatted as in `vlreg.pictures`
(`vlreg.pictures.number`), and a caption (`vlreg.pictures.caption`) names the model and the
prompt. Figures are made without pyplot, so nothing global is touched.
"""

from __future__ import annotations

import io
from typing import Any, Mapping, Sequence

import torch
from attrs import frozen

from .pictures import number

try:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator
except ModuleNotFoundError as missing:  # pragma: no cover - the message is tested in a process without it
    raise ModuleNotFoundError(
        "vlreg.plots draws with matplotlib, which is not installed: pip install 'vlreg[plots]' (or matplotlib)",
        name=missing.name,
    ) from missing

#: Pixels per inch of a saved or displayed plot.
DPI = 100


@frozen
class Plot:
    """A matplotlib ``figure`` of per-block curves."""

    figure: Any

    def png(self) -> bytes:
        """The plot as PNG bytes (no software or date written in, so the same plot gives
        the same bytes)."""
        out = io.BytesIO()
        self.figure.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
        return out.getvalue()

    def _repr_png_(self) -> bytes:
        return self.png()

    def save(self, path: Any) -> None:
        with open(path, "wb") as handle:
            handle.write(self.png())

    def image(self) -> Any:
        """The plot as a PIL image."""
        from PIL import Image

        return Image.open(io.BytesIO(self.png())).convert("RGB")


def blocks(
    curves: "Mapping[str, Sequence[float]] | Sequence[float]",
    *,
    label: str,
    layers: Sequence[int] | None = None,
    kind: str = "line",
    title: str | None = None,
    caption: str | None = None,
    reference: "tuple[float, str] | None" = None,
) -> Plot:
    """One value per text block, per curve (a mapping of name to values, or one curve's
    values), as lines or grouped bars (``kind``), against the blocks ``layers`` (by
    default 0, 1, ...); ``label`` says what the value is and its unit, ``reference`` draws
    a level such as chance (``(value, name)``)."""
    if kind not in ("line", "bar"):
        raise ValueError(f"kind={kind!r}: a plot of blocks is a 'line' or a 'bar' plot")
    named = dict(curves) if isinstance(curves, Mapping) else {"": curves}
    named = {name: torch.as_tensor(values, dtype=torch.float32).reshape(-1).tolist() for name, values in named.items()}
    counts = {len(values) for values in named.values()}
    if len(counts) != 1:
        raise ValueError(f"the curves have different lengths {sorted(counts)}: one value per block each")
    (count,) = counts
    layers = list(range(count)) if layers is None else list(layers)
    if len(layers) != count:
        raise ValueError(f"{count} values a curve against {len(layers)} blocks in layers={layers}")
    figure = Figure(figsize=(6.4, 3.6), layout="constrained")
    axes = figure.add_subplot()
    width = 0.8 / len(named)
    for i, (name, values) in enumerate(named.items()):
        if kind == "bar":
            axes.bar([k + (i - (len(named) - 1) / 2) * width for k in range(count)], values, width, label=name or None)
        else:
            axes.plot(range(count), values, marker="o", label=name or None)
    if reference is not None:
        axes.axhline(reference[0], color="0.45", linestyle="--", linewidth=1, label=reference[1])
    if kind == "bar":
        axes.axhline(0, color="0.2", linewidth=0.8)
    axes.set_xticks(range(count), [str(layer) for layer in layers])
    axes.set_xlabel("text block")
    axes.set_ylabel(label)
    axes.yaxis.set_major_locator(MaxNLocator(6))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: number(value)))
    axes.grid(axis="y", color="0.9")
    axes.set_axisbelow(True)
    if any(named) or reference is not None:
        axes.legend(frameon=False)
    if title:
        axes.set_title(title)
    if caption:
        figure.supxlabel(caption, fontsize="small", color="0.35")
    return Plot(figure)


def _name(model: Any, token: int) -> str:
    return repr(model.tokenizer.decode(int(token))) if model is not None else f"token {token}"


def _tokens(tokens: "int | Sequence[int]") -> list[int]:
    return [tokens] if isinstance(tokens, int) else list(tokens)


def patching(result: Any, model: Any = None, *, tokens: "Sequence[int] | None" = None, **options: Any) -> Plot:
    """A `Patching`'s ``effects`` per block as bars: the change of the target logit (named
    through ``model``'s tokenizer when given). A per-token patching's effects, ``[layers,
    tokens]``, are drawn at ``tokens`` (indices among the image's tokens), one bar each."""
    effects = result.effects
    if effects.dim() == 2:
        if tokens is None:
            raise ValueError("a per-token patching has an effect per block and token: pass tokens=[...] to plot, "
                             "or draw every token with vlreg.pictures.overlay_grid")
        curves = {f"token {t}": effects[:, t] for t in _tokens(tokens)}
    else:
        curves = {"": effects}
    options.setdefault("title", "patching the image's tokens, block by block")
    return blocks(curves, label=f"change of the {_name(model, result.target)} logit (logits)", layers=result.layers,
                  kind="bar", **options)


def lens(result: Any, tokens: "int | Sequence[int]", model: Any = None, *, image: int = 0, **options: Any) -> Plot:
    """A `LogitLens`'s probability of its target per block, at ``tokens`` of image
    ``image`` (their mean) and the highest at its other tokens."""
    if result.target_probabilities is None:
        raise ValueError("the logit lens was read without a target: pass target= to logit_lens to plot its probability")
    probabilities = result.target_probabilities[image]
    chosen = _tokens(tokens)
    others = [t for t in range(probabilities.shape[1]) if t not in chosen]
    curves = {f"at tokens {chosen}": probabilities[:, chosen].mean(-1)}
    if others:
        curves["elsewhere, highest"] = probabilities[:, others].max(-1).values
    options.setdefault("title", "logit lens at the image's tokens")
    return blocks(curves, label=f"p({_name(model, result.target)}) (probability)", layers=result.layers, **options)


def attention(result: Any, tokens: "int | Sequence[int]", *, image: int = 0, **options: Any) -> Plot:
    """An `ImageAttention`'s share of the query token's attention to image ``image`` that
    lands on ``tokens``, per block (heads averaged), against chance (the tokens' share of
    the image)."""
    weights = result.weights[image].float().mean(1)
    chosen = _tokens(tokens)
    share = weights[:, chosen].sum(-1) / weights.sum(-1)
    options.setdefault("title", f"attention from position {result.position} to the image")
    return blocks({f"on tokens {chosen}": share}, label="share of the image's attention (fraction)",
                  layers=result.layers, reference=(len(chosen) / weights.shape[-1], "chance"), **options)
