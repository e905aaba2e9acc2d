"""The folder an sae-lens SAE is saved to, read without sae-lens.

``SAE.save_model`` and ``save_inference_model`` write ``cfg.json`` (the architecture and
its settings, ``metadata``) and ``sae_weights.safetensors`` (``W_enc [d_in, features]``,
``b_enc``, ``W_dec``, ``b_dec``, and ``threshold`` for JumpReLU). vlreg reads the
architectures whose encoder is one of its own: ``standard`` (ReLU), ``jumprelu``,
``topk``, and the ``transcoder`` and ``jumprelu_transcoder`` that decode into another value
(``metadata.hook_name_out``, which `vlreg.dictionaries.train` records). A TopK SAE that
scales its pre-activations by the decoder rows' norms has them folded in, which encodes
and decodes the same; activations normalised by the SAE are refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

READ = {"standard": None, "jumprelu": "threshold", "topk": "k", "transcoder": None, "jumprelu_transcoder": "threshold"}


def fold_norms(tensors: dict) -> None:
    """Scale each feature by its decoder row's norm into the encoder (in place)."""
    norms = tensors["W_dec"].norm(dim=-1).clamp(min=1e-8)
    tensors["W_enc"] = tensors["W_enc"] * norms
    tensors["b_enc"] = tensors["b_enc"] * norms
    tensors["W_dec"] = tensors["W_dec"] / norms[:, None]


def read(cls: Any, folder: Path) -> Any:
    """A `Dictionary` from an sae-lens SAE folder."""
    from attrs import evolve
    from safetensors.torch import load_file

    config_path, weights = folder / "cfg.json", folder / "sae_weights.safetensors"
    if not (config_path.is_file() and weights.is_file()):
        raise FileNotFoundError(f"{folder} is a folder but not an sae-lens SAE's: it lacks cfg.json or "
                                "sae_weights.safetensors (pass a dictionary file, or the folder sae-lens saved to)")
    config = json.loads(config_path.read_text())
    architecture = config.get("architecture", "standard")
    if architecture not in READ:
        raise ValueError(f"{folder}: an sae-lens {architecture!r} SAE; vlreg reads {', '.join(READ)}")
    if config.get("normalize_activations", "none") not in (None, "none"):
        raise ValueError(f"{folder}: the SAE normalises its input ({config['normalize_activations']!r}); vlreg encodes "
                         "the value as it is, so fold the normalisation into W_enc and W_dec first")
    tensors: dict[str, torch.Tensor] = dict(load_file(str(weights)))
    if architecture == "topk" and config.get("rescale_acts_by_decoder_norm", False):
        fold_norms(tensors)
    found = cls.from_tensors(tensors, transposed=False, source=str(folder),
                             subtract_decoder_bias=bool(config.get("apply_b_dec_to_input", False)))
    output = (config.get("metadata") or {}).get("hook_name_out") if "transcoder" in architecture else None
    if "transcoder" in architecture and output is None:
        output = "another value (the SAE's config does not name it)"
    return evolve(found, k=int(config["k"]) if architecture == "topk" else None, output=output)
