"""What VipLLaVA's projector reads of the tower, and so what a write can reach.

The tower returns its stream after every block (``hidden_states``: the embeddings' at 0,
block ``i``'s at ``i + 1``), and the projector takes those ``vision_feature_layer`` names.
A write to a block the projector reads, or to one before it, reaches the text model; a
write to a later block runs for nothing, and one to ``vision.tower_output`` (what the tower
returns, after the streams were taken) lands nowhere: both are refused."""

from __future__ import annotations

from typing import Any


def read_blocks(config: Any) -> list[int]:
    """The tower blocks whose streams the projector reads, in its order (-1: the
    embeddings')."""
    layers = config.vision_feature_layer
    depth = config.vision_config.num_hidden_layers
    return [layer % (depth + 1) - 1 for layer in ([layers] if isinstance(layers, int) else layers)]


def read_only(config: Any) -> dict[str, Any]:
    blocks = read_blocks(config)
    last = max(blocks)
    setting = f"vision_feature_layer={config.vision_feature_layer}"

    def after_last(envoy: Any) -> str | None:
        if envoy.block_index is None or envoy.block_index <= last:
            return None
        return f"the projector reads the streams of vision.layers{blocks} ({setting}); nothing later reaches it"

    def tower_output(vision: Any) -> str:
        return (f"the projector reads the streams of vision.layers{blocks} ({setting}) out of the tower's "
                f"hidden states, not the tower's output; edit vision.layers[{last}].layer_output")

    return {"vision.tower_output": tower_output, "vision.*": after_last}
