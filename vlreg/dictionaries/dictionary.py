"""A sparse dictionary (a sparse autoencoder's encoder and decoder) over one standard value.

`Dictionary.load` reads plain tensors (safetensors, a torch file read with
``weights_only=True``, or numpy's ``.npz`` without pickles): ``W_enc``, ``b_enc``,
``W_dec``, ``b_dec`` and, for a JumpReLU dictionary, ``threshold``. The published releases
store ``W_enc`` as ``[d_in, features]`` and ``W_dec`` as ``[features, d_in]``; a
dictionary saved as ``torch.nn.Linear`` weights has them the other way round. Both are
taken, told apart by the biases' lengths, and ``orientation`` says which was found.
`Dictionary.from_sae` reads the same tensors off an sae-lens ``SAE`` (or any object with
those attributes and a ``cfg``), and `Dictionary.load` of a folder reads the folder an
sae-lens SAE saves (``cfg.json``, ``sae_weights.safetensors``; `vlreg.dictionaries.train`
writes one): vlreg never imports sae-lens to read a dictionary. TopK dictionaries keep
their ``k`` largest pre-activations; a transcoder's decoder predicts another value
(``output``), so it encodes and decodes but does not edit.

`attach` binds a dictionary to a model's value (``"layers[3].layer_output"``,
``"layers[3].input"``, ``"vision.layers[1].layer_output"``, ``"vision.image_features"``):
the width is checked against the model and the matrices are moved, once, to the device
and dtype of the module that computes the value. Inside a trace, `rows` gives an image's
tokens of that value as a view of the model's own tensor, `encode` turns rows into
feature activations (``[tokens, features]``) without copying them, `decode` gives the
reconstruction, `error` the rest, and `edit` changes features and writes the change back
through the decoder, keeping the error, so an unchanged edit leaves the forward as it was.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import torch
from attrs import evolve, field, fields_dict, frozen

from ..analysis.tokens import in_stream
from ..core.images.geometry import ImageGeometry

NAMES = ("W_enc", "b_enc", "W_dec", "b_dec", "threshold")
STANDARD = "W_enc [d_in, features], W_dec [features, d_in] (as Gemma Scope and sae-lens store them)"
TRANSPOSED = "W_enc [features, d_in], W_dec [d_in, features] (torch.nn.Linear weights)"
SITE = re.compile(r"^(?:(?P<vision>vision)\.)?layers\[(?P<layer>-?\d+)\]\.(?P<value>layer_output|input)$")
SITES = ("layers[i].layer_output", "layers[i].input", "vision.layers[j].layer_output", "vision.layers[j].input",
         "vision.image_features")


@frozen(eq=False, repr=False)
class Dictionary:
    """A ReLU, JumpReLU or TopK dictionary: ``encode(x) = act(x @ W_enc + b_enc)`` (``x -
    b_dec`` in place of ``x`` when ``subtract_decoder_bias``, as some ReLU dictionaries are
    trained), where ``act`` is ReLU, or with a ``threshold`` keeps a pre-activation only
    above its feature's threshold, or with ``k`` keeps the ``k`` largest of a row (ReLU
    on them); ``decode(f) = f @ W_dec + b_dec``. A transcoder's ``output`` names the value
    its decoder predicts (it reads the attached one).

    The matrices are held as ``W_enc [d_in, features]`` and ``W_dec [features, d_in]``
    whatever the file's orientation (``orientation`` says which the file had). ``site``
    and ``model`` are set by `attach`."""

    W_enc: torch.Tensor
    b_enc: torch.Tensor
    W_dec: torch.Tensor
    b_dec: torch.Tensor
    threshold: torch.Tensor | None = None
    subtract_decoder_bias: bool = False
    k: int | None = None
    output: str | None = None
    orientation: str = STANDARD
    source: str = ""
    site: str | None = None
    model: Any = field(default=None, repr=False)

    def __repr__(self) -> str:
        where = f"attached to {self.site}" if self.site else "not attached"
        return (f"Dictionary({self.architecture}, {self.features} features over {self.d_in}-wide values, {where}, "
                f"{self.W_enc.dtype} on {self.W_enc.device}; from {self.source}, {self.orientation})")

    @property
    def d_in(self) -> int:
        return self.W_enc.shape[0]

    @property
    def features(self) -> int:
        return self.W_enc.shape[1]

    @property
    def architecture(self) -> str:
        return "topk" if self.k is not None else "relu" if self.threshold is None else "jumprelu"

    # ---- loading -------------------------------------------------------------------

    @classmethod
    def load(cls, path: "str | Path", *, transposed: bool | None = None, subtract_decoder_bias: bool = False) -> "Dictionary":
        """A dictionary from a ``.safetensors``, torch (``.pt``, ``.pth``, ``.bin``, read
        with ``weights_only=True``) or ``.npz`` file of plain tensors, or from a folder an
        sae-lens SAE was saved to (`saelens.read`). ``transposed`` settles the
        orientation where the biases cannot (``d_in == features``)."""
        path = Path(path)
        if path.is_dir():
            from .saelens import read

            return read(cls, path)
        if not path.is_file():
            raise FileNotFoundError(f"no dictionary file at {path}")
        k = None
        if path.suffix == ".safetensors":
            from safetensors import safe_open
            from safetensors.torch import load_file

            tensors = load_file(str(path))
            with safe_open(str(path), "pt") as handle:
                k = (handle.metadata() or {}).get("k")
        elif path.suffix == ".npz":
            import numpy as np

            with np.load(path, allow_pickle=False) as arrays:
                tensors = {name: torch.from_numpy(arrays[name]) for name in arrays.files}
        elif path.suffix in (".pt", ".pth", ".bin"):
            tensors = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(tensors, dict):
                raise ValueError(f"{path} holds a {type(tensors).__name__}, not a dict of tensors")
        else:
            raise ValueError(f"{path}: a dictionary is read from .safetensors, .pt, .pth, .bin or .npz, not {path.suffix!r}")
        found = cls.from_tensors(tensors, transposed=transposed, subtract_decoder_bias=subtract_decoder_bias,
                                 source=str(path))
        return found if k is None else evolve(found, k=int(k))

    @classmethod
    def from_tensors(cls, tensors: dict, *, transposed: bool | None = None, subtract_decoder_bias: bool = False,
                     source: str = "tensors") -> "Dictionary":
        """A dictionary from a mapping of names to tensors (names matched ignoring case)."""
        found = {name.lower(): value for name, value in tensors.items()}
        missing = [name for name in NAMES[:4] if name.lower() not in found]
        if missing:
            raise ValueError(f"{source} lacks {', '.join(missing)}: a dictionary needs {', '.join(NAMES[:4])} "
                             f"(and threshold for JumpReLU); it holds {', '.join(sorted(tensors)) or 'nothing'}")
        w_enc, b_enc, w_dec, b_dec = (torch.as_tensor(found[name.lower()]) for name in NAMES[:4])
        threshold = found.get("threshold")
        if w_enc.dim() != 2 or w_dec.dim() != 2 or b_enc.dim() != 1 or b_dec.dim() != 1:
            raise ValueError(f"{source}: W_enc and W_dec must be matrices and b_enc, b_dec vectors, not "
                             f"{tuple(w_enc.shape)}, {tuple(w_dec.shape)}, {tuple(b_enc.shape)}, {tuple(b_dec.shape)}")
        features, d_in = b_enc.numel(), b_dec.numel()
        standard = (tuple(w_enc.shape), tuple(w_dec.shape)) == ((d_in, features), (features, d_in))
        flipped = (tuple(w_enc.shape), tuple(w_dec.shape)) == ((features, d_in), (d_in, features))
        if not (standard or flipped):
            raise ValueError(f"{source}: W_enc {tuple(w_enc.shape)} and W_dec {tuple(w_dec.shape)} do not fit "
                             f"b_enc ({features} features) and b_dec ({d_in} wide) in either orientation")
        if standard and flipped and transposed is None:
            raise ValueError(f"{source}: {d_in} features of width {d_in}, so the orientation cannot be told from the "
                             "shapes: pass transposed=False (W_enc [d_in, features]) or transposed=True")
        if transposed is None:
            transposed = flipped
        if transposed:
            w_enc, w_dec = w_enc.T, w_dec.T
        if threshold is not None:
            threshold = torch.as_tensor(threshold).reshape(-1)
            if threshold.numel() != features:
                raise ValueError(f"{source}: threshold has {threshold.numel()} values for {features} features")
        return cls(w_enc.contiguous(), b_enc, w_dec.contiguous(), b_dec, threshold,
                   subtract_decoder_bias=subtract_decoder_bias, orientation=TRANSPOSED if transposed else STANDARD,
                   source=source)

    @classmethod
    def from_sae(cls, sae: Any) -> "Dictionary":
        """A dictionary from an sae-lens ``SAE``: its ``W_enc``, ``b_enc``, ``W_dec``,
        ``b_dec`` and (JumpReLU) ``threshold``, and from its ``cfg`` the architecture and
        ``apply_b_dec_to_input``. Read duck-typed: sae-lens is an optional extra
        (``pip install vlreg[sae]``), never imported here. Architectures other than
        standard (ReLU), JumpReLU and TopK (``cfg.k``) are refused, as are activations
        normalised by the SAE."""
        cfg = getattr(sae, "cfg", None)
        architecture = getattr(cfg, "architecture", "standard")
        architecture = architecture() if callable(architecture) else architecture
        if architecture not in ("standard", "jumprelu", "topk"):
            raise ValueError(f"this SAE's architecture is {architecture!r}: vlreg reads 'standard' (ReLU), "
                             "'jumprelu' and 'topk' dictionaries")
        normalize = getattr(cfg, "normalize_activations", "none")
        if normalize not in (None, "none"):
            raise ValueError(f"this SAE normalises its input ({normalize!r}); vlreg encodes the value as it is, so "
                             "fold the normalisation into W_enc and W_dec first")
        tensors = {name: getattr(sae, name).detach() for name in NAMES[:4]}
        if architecture == "jumprelu":
            tensors["threshold"] = sae.threshold.detach()
        if architecture == "topk" and getattr(cfg, "rescale_acts_by_decoder_norm", False):
            from .saelens import fold_norms

            fold_norms(tensors)
        found = cls.from_tensors(tensors, transposed=False, source=f"{type(sae).__name__} ({architecture})",
                                 subtract_decoder_bias=bool(getattr(cfg, "apply_b_dec_to_input", False)))
        return evolve(found, k=int(cfg.k)) if architecture == "topk" else found

    def save(self, path: "str | Path") -> Path:
        """Write the tensors as safetensors (``W_enc [d_in, features]``)."""
        from safetensors.torch import save_file

        tensors = {"W_enc": self.W_enc, "b_enc": self.b_enc, "W_dec": self.W_dec, "b_dec": self.b_dec}
        if self.threshold is not None:
            tensors["threshold"] = self.threshold
        save_file({name: t.detach().cpu().contiguous() for name, t in tensors.items()}, str(path),
                  None if self.k is None else {"k": str(self.k)})
        return Path(path)

    # ---- binding to a model ----------------------------------------------------------

    def to(self, device: Any = None, dtype: torch.dtype | None = None) -> "Dictionary":
        move = lambda t: None if t is None else t.to(device=device, dtype=dtype)  # noqa: E731
        return evolve(self, W_enc=move(self.W_enc), b_enc=move(self.b_enc), W_dec=move(self.W_dec),
                      b_dec=move(self.b_dec), threshold=move(self.threshold))

    def attach(self, model: Any, site: str) -> "Dictionary":
        """This dictionary bound to ``site`` of ``model``, its matrices on the device and in
        the dtype of the module that computes the value. Refuses, before any trace, a
        site that is not one of `SITES`, a block out of range and a width that is not
        the value's. On a load whose weights are not here (``dispatch=False``, traced
        remotely) the matrices stay as they are: they move when they arrive on the server,
        where the dictionary attaches again (see `__reduce__`)."""
        module, width = _site(model, site)
        if width != self.d_in:
            raise ValueError(f"this dictionary reads {self.d_in}-wide values, but {site} is {width} wide")
        weight = next(module._module.parameters())
        if weight.is_meta:
            return evolve(self, site=site, model=model)
        return evolve(self.to(weight.device, weight.dtype), site=site, model=model)

    def __reduce__(self) -> tuple:
        # A remote request carries the matrices and the site; the dictionary attaches
        # again to the model it arrives with, taking that model's device and dtype.
        kept = {name: getattr(self, name) for name in fields_dict(Dictionary) if name not in ("model", "site")}
        return _rebuilt, (kept, self.model, self.site)

    def read(self) -> Any:
        """Inside a trace: the attached value, as the model serves it."""
        model = self._model()
        if self.site == "vision.image_features":
            return model.vision.image_features
        module, _ = _site(model, self.site)
        return getattr(module, self.site.rsplit(".", 1)[1])

    def rows(self, image: ImageGeometry, tokens: "int | slice | None" = None) -> torch.Tensor:
        """Inside a trace: the attached value at one image's tokens, ``[tokens, d_in]``,
        a view of the model's tensor, so an edit of it lands. ``tokens`` (an index or a
        slice among the image's tokens) narrows it. Text values are read at the image's
        row and positions, ``image_features`` at its rows. Refused where no view exists
        (an image whose tokens are not consecutive, a list of tokens): a copy would take
        edits that never reach the model."""
        self._model()
        if self.site.startswith("vision.layers"):
            raise ValueError(f"{self.site} is over the tower's patches: read() it and pick the patches, or use "
                             "feature_maps, which folds them into the image's tokens")
        if self.site.startswith("layers"):
            in_stream(self.model, f"a dictionary's rows at {self.site}")
        picked = self._image_rows(self.read(), image)
        if picked is None:
            raise ValueError(f"image {image.index}'s tokens are not consecutive in the sequence (text tokens lie "
                             "between them), so no view holds them: edit read()[row, position] one token at a time")
        if tokens is not None and not isinstance(tokens, (int, slice)):
            raise ValueError("tokens is an index or a slice, which keep the rows a view; a list would be a copy "
                             "whose edits never reach the model: take rows(image)[t : t + 1] for each token")
        if isinstance(tokens, int):
            token = range(picked.shape[0])[tokens]
            return picked[token : token + 1]
        return picked if tokens is None else picked[tokens]

    def _image_rows(self, value: torch.Tensor, image: ImageGeometry) -> "torch.Tensor | None":
        """The value at one image's tokens as a view, or None where they are not consecutive.
        Where the image reaches the text model by cross-attention (Mllama), ``image_features``
        are the states, ``[batch, positions, hidden]``, and the image's are in its row."""
        if self.site == "vision.image_features":
            return self.model.family.entry.of_image(value, image)
        row, positions = image.placed(self.model)  # where this invoke's batch put the tokens
        start, stop = int(positions[0]), int(positions[-1]) + 1
        if stop - start != image.tokens:
            return None
        return value[row, start:stop]

    # ---- the dictionary itself -----------------------------------------------------

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations of ``x`` (``[..., d_in]``), ``[..., features]``. ``x`` is
        read as it is, in place: what is made is the ``[..., features]`` result only (the
        decoder bias, where subtracted, is folded into the encoder's bias)."""
        self._check(x)
        bias = self.b_enc - self.b_dec @ self.W_enc if self.subtract_decoder_bias else self.b_enc
        pre = torch.addmm(bias, x, self.W_enc) if x.dim() == 2 else torch.matmul(x, self.W_enc).add_(bias)
        if self.k is not None:
            top = pre.topk(self.k, dim=-1)
            return torch.zeros_like(pre).scatter_(-1, top.indices, top.values.relu_())
        pre.relu_()
        return pre if self.threshold is None else pre.mul_(pre > self.threshold)

    def decode(self, features: torch.Tensor) -> torch.Tensor:
        """The reconstruction, ``[..., d_in]``."""
        return features @ self.W_dec + self.b_dec

    def error(self, x: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        """What the dictionary misses: ``x - decode(encode(x))``."""
        return x - self.decode(self.encode(x) if features is None else features)

    def edit(self, x: torch.Tensor, change: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """Edit ``x`` (rows of the value, a view: see `rows`) in place through the
        dictionary: encode, ``change(features)`` (a copy, change it as you like), decode,
        and keep the error, i.e. add ``(changed - features) @ W_dec``. Returns the
        features before the change."""
        self._editable()
        features = self.encode(x)
        delta = (change(features.clone()) - features) @ self.W_dec
        x += delta
        return features

    def zero(self, x: torch.Tensor, feature: "int | list[int]") -> torch.Tensor:
        """Turn ``feature`` off at the rows ``x`` (in place); returns the features."""
        return self.edit(x, lambda f: f.index_fill_(-1, torch.as_tensor(feature, device=f.device).reshape(-1), 0))

    def clamp(self, x: torch.Tensor, feature: int, value: float) -> torch.Tensor:
        """Set ``feature`` to ``value`` at the rows ``x`` (in place); returns the features."""
        return self.edit(x, lambda f: f.index_fill_(-1, torch.tensor([feature], device=f.device), value))

    def add(self, x: torch.Tensor, feature: int, amount: float) -> torch.Tensor:
        """Add ``amount`` of ``feature`` (``amount * W_dec[feature]``) at the rows ``x``."""
        self._editable()
        x += amount * self.W_dec[feature]
        return x

    def _check(self, x: torch.Tensor) -> None:
        if x.shape[-1] != self.d_in:
            raise ValueError(f"this dictionary reads {self.d_in}-wide rows, not {x.shape[-1]}")
        if x.dtype != self.W_enc.dtype or x.device != self.W_enc.device:
            raise ValueError(f"the rows are {x.dtype} on {x.device}, the dictionary {self.W_enc.dtype} on "
                             f"{self.W_enc.device}: attach it to the model (or .to(...)) rather than copy the rows")

    def _editable(self) -> None:
        if self.output is not None:
            raise ValueError(f"this is a transcoder: its decoder predicts {self.output}, not the value it reads, so "
                             "an edit through it would write the wrong value; encode and decode only")

    def _model(self) -> Any:
        if self.model is None:
            raise ValueError("this dictionary is not attached: dictionary.attach(model, 'layers[i].layer_output')")
        return self.model


def _rebuilt(kept: dict, model: Any, site: str | None) -> Dictionary:
    dictionary = Dictionary(**kept)
    return dictionary if model is None else dictionary.attach(model, site)


def _site(model: Any, site: str) -> tuple[Any, int]:
    """The envoy whose value ``site`` is, and the value's width."""
    if site == "vision.image_features":
        return model.embed_tokens, model.hidden_size
    match = SITE.match(site.replace(" ", "")) if isinstance(site, str) else None
    if match is None:
        raise ValueError(f"a dictionary attaches to one of {', '.join(SITES)}, not {site!r}")
    layers, width = (model.vision.layers, model.vision.vision_hidden_size) if match["vision"] else (model.layers, model.hidden_size)
    count, index = len(layers), int(match["layer"])
    if not -count <= index < count:
        raise ValueError(f"{site}: the {'tower' if match['vision'] else 'text model'} has {count} blocks")
    return layers[index], width


