"""vlreg-muse: Muse Glimmer and Muse Spark, declared against `vlreg.plugin`.

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

Videos run through the same tower and projector and are written at the second scatter
(`VIDEO_SCATTER`): ``vision.video_token_mask`` and ``vision.video_features`` are served. Trace
them with ``return_metadata=True``: transformers' Muse processor writes a video's prompt from
the metadata its video processor returns only when asked (without it the processor raises
``KeyError: 'video_metadata'``). Their grids (`geometry.muse_video_grids`) follow the
processor's sampling: a grid a temporal patch, over the two frames it folds, with the time the
processor writes before it.

MuseSparkForConditionalGeneration is Glimmer's layout, tower and readout, over a
``muse_spark_text`` model whose residual adds are gated and whose MLPs route to experts in a
narrower space (`text`), plus an audio tower (``model.audio_tower``, ``audio_config`` =
``muse_spark_audio``) written in at a third scatter: vlreg claims no audio part, so audio is
refused by name.
"""

from typing import Any

import torch

from vlreg.plugin import VIDEO_SCATTER, Plugin, Readout, Text, Tower, Wrapper, adapter

from . import text, vision
from .geometry import muse_image_grids, muse_video_grids

def softcapped(model: Any, logits: torch.Tensor) -> torch.Tensor:
    """``lm_head``'s output as the wrapper returns it: times ``output_multiplier``, then
    ``cap * tanh(z / cap)`` (``final_logit_softcapping``)."""
    config = model._module.config.get_text_config()
    cap = config.final_logit_softcapping
    return torch.tanh(logits * config.output_multiplier / cap) * cap


#: lm_head(norm(stream)), times the multiplier, then capped.
READOUT = Readout(after=softcapped)


#: What Muse Spark's claim refuses beside videos (`Claim.refuses`).
AUDIO = (
    "audio is not served: vlreg claims no audio part, so Muse Spark's audio tower (model.audio_tower) has no "
    "standard names, and a trace hands the processor only text, images and videos (audio= is refused before the "
    "model runs); images and text are served"
)


def builders():
    from .checkpoints import build_muse_glimmer, build_muse_spark

    return {"muse_glimmer": build_muse_glimmer, "muse_spark": build_muse_spark}


plugin = Plugin(
    Wrapper("muse_glimmer", projector="model.vision_adapter", entry=VIDEO_SCATTER, readout=READOUT,
            image_grids=lambda part: muse_image_grids, video_grids=lambda part: muse_video_grids),
    Wrapper("muse_spark", projector="model.vision_adapter", entry=VIDEO_SCATTER, refuses={"audio": AUDIO},
            readout=READOUT, image_grids=lambda part: muse_image_grids, video_grids=lambda part: muse_video_grids),
    Text("muse_glimmer_text", envoys=text.glimmer_envoys),
    Text("muse_spark_text", envoys=text.spark_envoys),
    Tower("muse_glimmer_vision", rename=adapter("kimi_vit").tower_rename, envoys=vision.envoys),
    Tower("muse_spark_vision", rename=adapter("kimi_vit").tower_rename, envoys=vision.spark_envoys),
    checkpoints=builders,
)
