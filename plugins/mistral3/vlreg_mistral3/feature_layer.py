"""What a write to the tower reaches, given the block the projector reads.

Mistral 3's projector takes ``hidden_states[vision_feature_layer]`` (the stream leaving
that block; a list of layers, their streams side by side) out of what the tower
recorded, not the tower's returned ``last_hidden_state``. A write to ``tower_output``
replaces a tensor nothing reads, and a block after the last one read runs for nothing.
"""

from __future__ import annotations

from typing import Any


def read_block(config: Any) -> int:
    """The last tower block whose stream the projector reads (``hidden_states[i]`` is
    block ``i - 1``'s output, 0 the stream entering block 0)."""
    layers = config.vision_feature_layer
    depth = config.vision_config.num_hidden_layers
    chosen = layers if isinstance(layers, (list, tuple)) else [layers]
    return max(layer % (depth + 1) for layer in chosen) - 1


def read_only(config: Any) -> dict:
    read = read_block(config)
    setting = f"vision_feature_layer={config.vision_feature_layer}"

    def tower_output(vision: Any) -> str:
        return (
            f"the projector reads the stream of vision.layers[{read}] ({setting}) out of the tower's "
            f"hidden states, not the tower's output; edit vision.layers[{read}].layer_output"
        )

    def after_read(envoy: Any) -> str | None:
        if envoy.block_index is None or envoy.block_index <= read:
            return None
        return f"the projector reads vision.layers[{read}]'s stream ({setting}), so nothing a later block computes reaches the text model"

    return {"vision.tower_output": tower_output, "vision.*": after_read}
