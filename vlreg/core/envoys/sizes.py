"""Sizes of a stack of blocks, read off the blocks' own modules.

A config's sizes can disagree with the modules it built: LFM2's ``block_auto_adjust_ff_dim``
makes every MLP wider than ``intermediate_size`` says, and a mixture-of-experts model may
never build the dense width its config names. The root's sizes (``model.intermediate_size``,
``model.vision.head_dim``, ...) are therefore what every block that has the part agrees on
(each block's envoy class reads its module, and a plugin's class can say where its width
is); where blocks differ, the root's size is `Unavailable`, naming the widths and where to
read each; where no block says, the config's.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import Unavailable
from .standard import Standard


def agreed(blocks: Any, part: str, name: str, label: str, fallback: Callable[[], Any]) -> Any:
    """``name`` of ``part`` (``"self_attn"``, ``"mlp"``) on every block of ``blocks`` that
    has it, where they agree; `Unavailable` where they differ; ``fallback()`` where none
    says (no block has the part, or none can tell)."""
    found: dict[int, list[int]] = {}
    for index, block in enumerate(blocks or ()):
        envoy = block.__dict__.get(part)
        if envoy is None:
            continue
        try:
            size = getattr(envoy, name)
        except Unavailable:
            continue
        found.setdefault(int(size), []).append(index)
    if len(found) > 1:
        widths = "; ".join(f"{size} on blocks {indices}" for size, indices in sorted(found.items()))
        raise Unavailable(
            f"{label} is unavailable: the blocks' {part}s differ in it ({widths}); read each block's "
            f"{part}.{name}"
        )
    return next(iter(found)) if found else fallback()


class TextSizes(Standard):
    """The text model's sizes on the model root: what its blocks agree on (`agreed`), else
    its config's. A base of `StandardizedTransformer`."""

    @property
    def hidden_size(self) -> int:
        """The width of the text model's residual stream."""
        return self._text_config.hidden_size

    @property
    def num_heads(self) -> int:
        """Query heads per text attention (`vlreg.core.envoys.sizes`: what the blocks agree on)."""
        return agreed(self.layers, "self_attn", "num_heads", "num_heads", lambda: self._text_config.num_attention_heads)

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads per text attention (fewer than `num_heads` under GQA)."""
        return agreed(self.layers, "self_attn", "num_kv_heads", "num_kv_heads",
                      lambda: _text_size(self, "num_key_value_heads", "num_kv_heads") or self.num_heads)

    @property
    def head_dim(self) -> int:
        """The width of one text attention head."""
        return agreed(self.layers, "self_attn", "head_dim", "head_dim",
                      lambda: _text_size(self, "head_dim", "head_dim") or self.hidden_size // self.num_heads)

    @property
    def qk_head_dim(self) -> int:
        """The width of one text attention head's queries and keys (``head_dim`` where they
        are as wide as the values, as on every family served today)."""
        return agreed(self.layers, "self_attn", "qk_head_dim", "qk_head_dim", lambda: self.head_dim)

    @property
    def intermediate_size(self) -> int:
        """The hidden width of the text blocks' MLPs (an expert's, on a mixture of experts),
        read off the modules: `Unavailable` where the blocks differ in it."""
        return agreed(self.layers, "mlp", "intermediate_size", "intermediate_size",
                      lambda: self._text_config.intermediate_size)

    @property
    def vocab_size(self) -> int:
        """The number of rows of the readout."""
        return self._text_config.vocab_size

    @property
    def _text_config(self) -> Any:
        return self._module.config.get_text_config()


def _text_size(model: Any, field: str, name: str) -> Any:
    """``field`` of the text config, or None; `Unavailable` where the config says the
    blocks differ in it (Gemma 4's global blocks have heads of their own width)."""
    try:
        return getattr(model._text_config, field, None)
    except RuntimeError as error:  # transformers' AmbiguousGlobalPerLayerAttributeError
        raise Unavailable(
            f"{name} is unavailable: the text blocks differ in it (the config sets it per block); "
            f"read each block's self_attn.{name}"
        ) from error
