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


def unpadded(model: Any, logits: torch.Tensor) -> torch.Tensor:
    """Inkling 1's ``lm_head`` output as the wrapper returns it: cut to
    ``text_config.unpadded_vocab_size`` columns where that is set and narrower."""
    width = model._module.config.text_config.unpadded_vocab_size
    return logits if width is None else logits[..., :width]


def narrowed(model: Any, stream: torch.Tensor) -> torch.Tensor:
    """The normed stream as ``lm_head`` reads it: divided by ``logits_mup_width_multiplier``."""
    return stream / model._module.config.text_config.logits_mup_width_multiplier


#: Inkling 1: the normed stream divided by the width multiplier, then ``lm_head``, then the cut.
INKLING1 = Readout(after=unpadded, before=narrowed)

#: What Inkling 1's claim refuses (`Claim.refuses`).
INKLING1_REFUSES = {
    "vision.layers": (
        "Inkling 1's tower has no blocks: each of its encoder_layers folds a square of the previous grid (and two "
        "frames) into one row and projects it (model.vision_tower.encoder_layers[i]: projection, layer_norm), with no "
        "attention and no residual stream; read them natively, or read vision.tower_output (one row per image token)"
    ),
    "vision.patch_embeddings": (
        "Inkling 1's tower embeds no patch whole: its first layer folds 2 x 2 pixels, and each later one folds the "
        "previous grid again until one row is left per image token; read vision.tower_output"
    ),
    "audio": (
        "audio is not served: vlreg claims no audio part, so Inkling's audio tower (model.audio_tower) has no "
        "standard names, and a trace hands the processor only text and images (audio= is refused before the model "
        "runs); images and text are served"
    ),
}
