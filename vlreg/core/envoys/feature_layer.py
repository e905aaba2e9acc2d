"""What a write to the tower reaches when the projector reads a block's stream out of
the tower's hidden states.

Many wrappers (LLaVA and its kin, Mistral 3, InternVL, VipLLaVA) take
``hidden_states[layer]`` of the tower's output for the layers their config names
(``vision_feature_layer``): ``hidden_states[0]`` is the stream entering block 0 and
``hidden_states[i]`` block ``i - 1``'s output. A write to ``vision.tower_output`` then
replaces a tensor nothing reads, and a write to a block after the last one read runs for
nothing; both would be edits that land nowhere, so a family declares them read-only
(`vlreg_read_only`) with the rows this module builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def projected_blocks(layers: int | Sequence[int], depth: int) -> list[int]:
    """The tower blocks whose streams the projector reads, in the config's order (-1 is
    the stream entering block 0), for a tower of ``depth`` blocks."""
    chosen = [layers] if isinstance(layers, int) else list(layers)
    return [layer % (depth + 1) - 1 for layer in chosen]


def hidden_states_read_only(
    layers: int | Sequence[int], depth: int, *, name: str = "vision_feature_layer", output_when_last: bool = False
) -> dict[str, Any]:
    """`vlreg_read_only` rows for a projector that reads ``hidden_states[layers]``:
    ``vision.tower_output`` and every tower value after the last block read.

    ``output_when_last``: the wrapper reads the tower's returned output instead when
    ``layers`` is ``-1`` (InternVL does), so then nothing is refused.
    """
    if output_when_last and layers == -1:
        return {}
    blocks = projected_blocks(layers, depth)
    read, setting = max(blocks), f"{name}={layers}"
    which = f"vision.layers[{read}]'s stream" if len(blocks) == 1 else f"the streams of vision.layers{blocks}"

    def tower_output(vision: Any) -> str:
        return (f"the projector reads {which} ({setting}) out of the tower's hidden states, not the tower's "
                f"output; edit vision.layers[{read}].layer_output")

    def after_read(envoy: Any) -> str | None:
        if envoy.block_index is None or envoy.block_index <= read:
            return None
        return f"the projector reads {which} ({setting}), so nothing a later block computes reaches the text model"

    return {"vision.tower_output": tower_output, "vision.*": after_read}
