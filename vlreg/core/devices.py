"""Where a load puts the weights and where it computes: the dtype in the spellings people
write, and a device map (accelerate's offload) transformers runs, checked and ordered
before the load; on an offloaded model, the device inputs go to."""

from __future__ import annotations

from typing import Any

import torch


#: The spellings of a floating-point dtype people write (``"bf16"``, ``"half"``), and torch's name of it.
DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "f32": "float32", "float": "float32",
    "float64": "float64", "fp64": "float64", "f64": "float64", "double": "float64",
}


def dtype_of(dtype: Any, where: str = "dtype", auto: bool = True) -> Any:
    """``dtype`` as torch's: a ``torch.dtype`` as it is, a name in any of its common
    spellings (``"bf16"``, ``"torch.float16"``, ``"half"``) as the dtype; ``"auto"`` (the
    checkpoint's own, where ``auto``) as it is. Anything else, or a dtype that is not a
    float, is refused naming the spellings taken."""
    if dtype is None or (auto and dtype == "auto"):
        return dtype
    name = dtype if isinstance(dtype, str) else None
    if isinstance(dtype, torch.dtype):
        found = dtype
    else:
        found = getattr(torch, DTYPES.get(str(name).lower().removeprefix("torch."), ""), None) if name else None
    if isinstance(found, torch.dtype) and found.is_floating_point:
        return found
    raise ValueError(
        f"{where}={dtype!r} is not a floating-point dtype vlreg knows: pass torch.bfloat16 or 'bfloat16' ('bf16'), "
        f"'float16' ('fp16', 'half') or 'float32' ('fp32', 'float')" + (", or 'auto' (the checkpoint's own)" if auto else "")
    )


def placement(kwargs: dict, dispatch: bool = True) -> None:
    """Check and order a ``device_map`` before the load. A GPU where torch sees none is
    refused on a load that places the weights (``dispatch``; a lazy build places nothing,
    and a remote one is placed by the server). transformers' pipeline runs inputs on a
    dict map's first device, which must not be ``"disk"`` (a map whose first entry is
    offloaded there fails at load naming a "device string"): the first entry not on disk
    is moved to the front (the map's meaning does not depend on its order), and a map
    with every module on disk, which has no such entry, is refused."""
    device_map = kwargs.get("device_map")
    if dispatch and not torch.cuda.is_available() and any(_is_gpu(where) for where in _places(device_map)):
        raise ValueError(
            f"device_map={device_map!r} puts weights on a GPU, and torch sees none here (torch.cuda.is_available() "
            f"is False): load with device='cpu', or on a machine with a GPU and a CUDA build of torch"
        )
    if not isinstance(device_map, dict) or not device_map:
        return
    places = list(device_map.items())
    if places[0][1] != "disk":
        return
    ahead = next((index for index, (_, where) in enumerate(places) if where != "disk"), None)
    if ahead is None:
        raise ValueError(
            f"device_map={device_map!r} puts every module on disk, and the pipeline vlreg loads through feeds the "
            f"inputs to the map's first device, which disk is not: map one module to 'cpu' (or a GPU), e.g. the "
            f"embeddings, or pass device_map='auto' with max_memory= and offload_folder=, which offloads what does "
            f"not fit"
        )
    kwargs["device_map"] = dict([places[ahead], *places[:ahead], *places[ahead + 1:]])


def _places(device_map: Any) -> list:
    """The devices a ``device_map`` names (a dict's values, or itself)."""
    if isinstance(device_map, dict):
        return list(device_map.values())
    return [] if device_map is None else [device_map]


def _is_gpu(where: Any) -> bool:
    """Whether a map's device is a CUDA GPU: ``"cuda"``, ``"cuda:1"``, a ``torch.device``
    of that type, or a bare index (accelerate's and transformers' spelling of one)."""
    if isinstance(where, bool):
        return False
    if isinstance(where, int):
        return True
    return str(where).split(":")[0] == "cuda"


def execution_device(module: torch.nn.Module) -> torch.device | None:
    """Where an offloaded model computes: accelerate's hook on the root moves inputs there,
    while the first parameter, offloaded, is on the meta device. ``None`` where no hook
    says (a model placed whole on one device)."""
    device = getattr(getattr(module, "_hf_hook", None), "execution_device", None)
    return None if device is None else torch.device(device)
