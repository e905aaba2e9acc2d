"""What a write to the tower reaches when the projector reads a block's stream out of
the tower's hidden states.

Many wrappers (LLaVA and its kin, Mistral 3, InternVL, VipLLaVA) take
``hidden_states[layer]`` of the tower's output for the layers their config names
(``vision_feature_layer``): ``hidden_states[0]`` is the stream entering block 0 and
``hidden_states[i]`` block ``i - 1``'s output. A write to ``vision.tower_output`` then
replaces a tensor nothing reads, and a write to a block after the last one read runs for
nothing; both would be edits that land nowhere, so a family's refusal table declares them
read-only with the rows this module builds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..serving.refusals import read_only


def projected_blocks(layers: int | Sequence[int], depth: int, blocks: bool = False) -> list[int]:
    """The tower blocks whose streams the projector reads, in the config's order (-1 is
    the stream entering block 0), for a tower of ``depth`` blocks. ``blocks``: a layer
    ``i >= 0`` names block ``i``'s output (Molmo 2 reads ``hidden_states[i + 1]``)."""
    chosen = [layers] if isinstance(layers, int) else list(layers)
    return [layer if blocks and layer >= 0 else layer % (depth + 1) - 1 for layer in chosen]


def hidden_states_read_only(
    *, name: str = "vision_feature_layer", depth: str = "num_hidden_layers", output_when_last: bool = False,
    layers: Callable[[Any], int | Sequence[int] | None] | None = None, blocks: bool = False,
) -> dict[str, Any]:
    """A wrapper's refusal-table rows for a projector that reads ``hidden_states[layers]``:
    ``vision.tower_output`` and every tower value after the last block read take no write.

    ``layers`` is the wrapper config's field ``name`` (dotted where a sub-config holds it:
    Molmo 2's ``"adapter_config.vision_feature_layer"``, a list), the tower's depth its vision
    config's field ``depth``, both read off the checkpoint when asked; where the config sets
    no such layers, nothing is refused. ``output_when_last``: the wrapper reads the tower's
    returned output instead when the layers are ``-1`` (InternVL does), so then nothing is
    refused. ``blocks``: a layer ``i >= 0`` names block ``i``'s output (`projected_blocks`).
    ``layers``: a function of the config giving the layers, where no one field does (Granite 4
    Vision's layer map); ``name`` then only labels them.
    """

    read_layers = layers

    def read(envoy: Any) -> tuple[list[int], str] | None:
        config = envoy.root._module.config
        if read_layers is not None:
            layers = read_layers(config)
        else:
            layers = config
            for field in name.split("."):
                layers = getattr(layers, field, None)
        if layers is None or (output_when_last and layers == -1):
            return None
        return projected_blocks(layers, getattr(config.vision_config, depth), blocks), f"{name}={layers}"

    def which(blocks: list[int]) -> str:
        return f"vision.layers[{blocks[0]}]'s stream" if len(blocks) == 1 else f"the streams of vision.layers{blocks}"

    def tower_output(vision: Any) -> str | None:
        found = read(vision)
        if found is None:
            return None
        blocks, setting = found
        return (f"the projector reads {which(blocks)} ({setting}) out of the tower's hidden states, not the tower's "
                f"output; edit vision.layers[{max(blocks)}].layer_output")

    def after_read(envoy: Any) -> str | None:
        found = read(envoy) if envoy.block_index is not None else None
        if found is None or envoy.block_index <= max(found[0]):
            return None
        blocks, setting = found
        return f"the projector reads {which(blocks)} ({setting}), so nothing a later block computes reaches the text model"

    return {"vision.tower_output": read_only(tower_output), "vision.*": read_only(after_read)}
