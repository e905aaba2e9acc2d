"""Inkling 2's wrapper: its readout, ``lm_head``'s output capped by the wrapper's softcap module and cut to
the unpadded vocabulary, the logit lens refused by name.

The text model's last step is one more block attention residual (``final_input``) over every
stored group and the last stream, then ``norm``: what a block's stream reads out as depends on
the groups stored before it, which no stream alone carries, so the lens is refused rather than
served wrong.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import Readout


def capped_and_cut(model: Any, logits: torch.Tensor) -> torch.Tensor:
    """``lm_head``'s output as the wrapper returns it: in float, through its softcap module
    (``tanh(z / cap) * cap``), cut to ``text_config.unpadded_vocab_size`` columns."""
    root = model._module
    cap = root.logit_softcap.softcap
    capped = torch.tanh(logits.float() / cap) * cap
    return capped[..., : root.config.text_config.unpadded_vocab_size]


INKLING2 = Readout(
    after=capped_and_cut,
    lens="Inkling 2 reads its last stream out through an attention over the stream of every earlier group of "
         "blocks (the text model's final_input), which one block's stream alone does not give; read the logits",
)
