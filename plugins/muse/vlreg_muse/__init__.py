"""vlreg-muse: Muse Glimmer, declared against `vlreg.plugin`.

MuseGlimmerForConditionalGeneration holds the text model at ``model.language_model`` (a
``muse_glimmer_text`` model: `text`), its tower at ``model.vision_tower`` (Kimi K2.5's blocks
in Qwen2.5-VL's windows: `vision`) and a projector of three modules in sequence:
``model.vision_adapter`` (two linear maps, each followed by the activation; the projector
vlreg serves), ``model.vision_projection`` (a linear map to the text width) and
``model.perception_emb_norm`` (a weight-less RMS norm). ``model``'s forward writes the normed
tokens into the embeddings with its first ``inputs_embeds.masked_scatter`` (what
``vision.image_features`` reads), a video's with its second.

The readout is ``lm_head``'s output times the text config's ``output_multiplier``, then the
tanh softcap (``final_logit_softcapping``): declared (`READOUT`), so ``logits``, the logit
lens and every helper reading a stream out apply the multiplier as the model does.

Videos run through the same tower and projector and are written at the second scatter,
which no standard value reads: refused by name on the wrapper's claim.
"""

from typing import Any

import torch

from vlreg.plugin import Plugin, Readout, Text, Tower, Wrapper, adapter

from . import text, vision
from .geometry import muse_image_grids

#: Videos reach the model but none of their values are served.
VIDEOS = (
    "a video's frames reach the model (its logits and text values are served), but they run through the tower "
    "in a call of their own and are written at a scatter of their own, which no standard value reads; pass the "
    "frames as images=[...] to read them"
)


def softcapped(model: Any, logits: torch.Tensor) -> torch.Tensor:
    """``lm_head``'s output as the wrapper returns it: times ``output_multiplier``, then
    ``cap * tanh(z / cap)`` (``final_logit_softcapping``)."""
    config = model._module.config.get_text_config()
    cap = config.final_logit_softcapping
    return torch.tanh(logits * config.output_multiplier / cap) * cap


#: lm_head(norm(stream)), times the multiplier, then capped.
READOUT = Readout(after=softcapped)


def builders():
    from .checkpoints import build_muse_glimmer

    return {"muse_glimmer": build_muse_glimmer}


plugin = Plugin(
    Wrapper("muse_glimmer", projector="model.vision_adapter", refuses={"videos": VIDEOS}, readout=READOUT,
            image_grids=lambda part: muse_image_grids),
    Text("muse_glimmer_text", envoys=text.envoys),
    Tower("muse_glimmer_vision", rename=adapter("kimi_vit").tower_rename, envoys=vision.envoys),
    checkpoints=builders,
)
