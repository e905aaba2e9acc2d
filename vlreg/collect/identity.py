"""The model as a store records it, so a rerun is refused with another model's rows and
resumed with the same model's, wherever its weights are placed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch


def identity(model: Any, local: bool = True) -> dict:
    """The model as a store records it: its path, a hash of its config, a fingerprint of
    its weights (every tensor's name, shape, dtype and, where the weights are here, first
    and last few values: two random builds of one config differ), and the weights' dtype.
    An offloaded weight's values are read from where accelerate keeps them, so a store is
    resumed whatever the placement. A model traced remotely is not loaded here for this:
    its fingerprint has no values."""
    if local and not model.dispatched:
        model.dispatch()
    config = {k: v for k, v in model.config.to_dict().items() if k not in ("_name_or_path", "transformers_version", "dtype")}
    weights = hashlib.sha256()
    offloaded = _offloaded(model._module) if local else {}
    for name, tensor in model.named_parameters():
        weights.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        tensor = offloaded.get(name, tensor)
        if local and tensor.device.type != "meta" and tensor.numel():
            flat = tensor.detach().reshape(-1)
            weights.update(torch.cat([flat[:8], flat[-8:]]).float().cpu().numpy().tobytes())
    return {
        "path": str(model.config._name_or_path),
        "config": hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16],
        "weights": weights.hexdigest()[:16],
        "dtype": str(model.dtype).removeprefix("torch."),
    }


def _offloaded(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Each offloaded parameter's value by name: on the meta device in the model, kept by
    accelerate's hook of the module it belongs to (its ``weights_map``: on disk, or in CPU
    memory beside a GPU)."""
    found: dict[str, torch.Tensor] = {}
    for prefix, owner in module.named_modules():
        hook = getattr(owner, "_hf_hook", None)
        for each in getattr(hook, "hooks", None) or [hook]:
            kept = getattr(each, "weights_map", None)
            if kept is None:
                continue
            for name, tensor in owner.named_parameters():
                key = f"{prefix}.{name}" if prefix else name
                if tensor.device.type == "meta" and key not in found:
                    try:
                        found[key] = kept[name]
                    except KeyError:  # kept by another module's hook
                        pass
    return found
