"""`Interleaved`: ``layers`` made of two lists of blocks a text model runs in turn."""

from __future__ import annotations

from typing import Any

import torch
from attrs import frozen

from .blocks import Blocks


class InCallOrder(Blocks):
    """The `Blocks` `Interleaved` mounts: a list of the model's blocks registered on no
    module, so no server resolves it by path. It travels without it, and the model mounts
    it again where it arrives (`vlreg.core.remote.arrived`)."""

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_parent", None)
        state["interleaver"]._persistent_id = "Interleaver"
        state["_module"] = None
        return state


@frozen
class Interleaved:
    """``layers`` where the text model keeps its blocks in two lists and runs them in turn
    (IDEFICS's): before ``blocks[i]``, for every ``i`` divisible by ``every``, it runs
    ``before[i // every]``. ``layers`` is then both lists in that call order (``before[0]``,
    ``blocks[0]``, ..., ``before[1]``, ``blocks[every]``, ...), so ``layers[i]`` feeds
    ``layers[i + 1]`` as on every family; each entry is the very envoy of its module
    (``model.layers[0] is model.model.gated_cross_attn_layers[0]``). Paths from the root.

    Declared as a `Wrapper`'s ``layers=``, in place of the text model's own ``layers``.
    """

    blocks: str
    before: str
    every: int = 1

    def mount(self, model: Any) -> None:
        """Bind ``model.layers`` to the blocks in call order: a `Blocks` over a list of the
        modules the two lists hold (their own envoys, shared), registered on no module, so
        the model's weights and their names are unchanged. Mounted again when a lazy build
        dispatches, since the modules are then new."""
        blocks, before = model.get(self.blocks)._module, model.get(self.before)._module
        needed = -(-len(blocks) // self.every)
        if len(before) != needed:
            raise ValueError(f"{self.before} holds {len(before)} blocks, but the {len(blocks)} blocks at {self.blocks}, "
                             f"one of them run before every {self.every}, need {needed}: the family's Interleaved "
                             f"names the lists or the interval wrong")
        order = [each for index, block in enumerate(blocks)
                 for each in ((before[index // self.every], block) if index % self.every == 0 else (block,))]
        label = getattr(model.__dict__.get("layers"), "_label", "")
        listed = InCallOrder(torch.nn.ModuleList(order), path=f"{model.path}.layers", interleaver=model.interleaver,
                        parent=model)
        listed._label = label
        object.__setattr__(model, "layers", listed)
