"""vlreg-hyperclovax: HyperCLOVA X SEED Vision, declared against `vlreg.plugin`.

HyperCLOVAXVisionV2ForConditionalGeneration (VideoLLaMA 3's layout) holds Qwen2.5-VL's
windowed tower at ``model.vision_model`` (``qwen2_5_vl_vision``, served by vlreg-qwen2-5-vl's
claim), its merger inside the tower, a linear projector after the tower (``model.projector``),
whose output ``model``'s first ``inputs_embeds.masked_scatter`` writes into the embeddings, a
video's its second (`VIDEO_SCATTER`), and a ``hyperclovax`` text model at
``model.language_model``, Granite's shape with µP multipliers:

* the text model multiplies the embeddings it is handed by ``embedding_multiplier``, after the
  scatter: the stream the blocks see at an image token is the features times it, so the
  embeddings are read where the text model is handed them (``Scatter.embeddings_to``);
* each block adds its sublayers' outputs times ``residual_multiplier``
  (`vlreg.plugin.ScaledResidualLayer`), each read after its own post-norm where
  ``use_post_norm`` gives one (`text`);
* the wrapper multiplies ``lm_head``'s output by ``text_config.logits_scaling``, which the
  readout declares (`READOUT`), so ``logits`` and the logit lens are the model's own.

The image grids are the adapter ``"qwen_vit"``'s over ``image_grid_thw``.
"""

import attrs

from vlreg.plugin import VIDEO_SCATTER, Plugin, Readout, Text, Wrapper, adapter, read_only

from . import text


def _scaled(model, logits):
    return logits * model._module.config.get_text_config().logits_scaling


#: ``lm_head(norm(stream))`` times ``text_config.logits_scaling``, as the wrapper's forward does.
READOUT = Readout(after=_scaled)

#: The merger runs inside the tower, before the tower returns: a write to the tower's output
#: (the blocks' stream) reaches nothing; the same stream is the last block's output.
READ_ONLY = {
    "vision.tower_output": read_only(
        "the tower's merger (model.vision_model.merger) runs inside the tower and has read the stream before "
        "the tower returns it; edit vision.layers[-1].layer_output, the same stream before the merger"
    )
}


def builders():
    from .checkpoints import build_hyperclovax_vision_v2

    return {"hyperclovax_vision_v2": build_hyperclovax_vision_v2}


plugin = Plugin(
    Wrapper("hyperclovax_vision_v2", vision="model.vision_model", projector="model.projector", refuses=READ_ONLY,
            entry=attrs.evolve(VIDEO_SCATTER, embeddings_to="model.language_model"), readout=READOUT,
            image_grids=lambda part: adapter("qwen_vit").image_grids,
            video_grids=lambda part: adapter("qwen_vit").video_grids()),
    Text("hyperclovax", envoys=text.envoys),
    checkpoints=builders,
)
