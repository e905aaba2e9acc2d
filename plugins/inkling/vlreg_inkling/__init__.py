"""vlreg-inkling: Inkling 2 and Inkling 1, declared against `vlreg.plugin`.

Inkling2ForConditionalGeneration holds the text model at ``model.language_model``
(``inkling2_text``: block attention residuals, a short convolution after each sublayer, routed
experts: `text`), the tower at ``model.vision_tower`` (packed, a class token before each
image: `vision`) with its projector inside (``model.vision_tower.merger``), and ``model``'s
forward writes the merger's output into the embeddings with one ``inputs_embeds.masked_scatter``.

The readout (`wrappers.INKLING2`): the text model reads its last stream out through one more
block attention residual (``final_input``) over every stored group, then ``norm``; the wrapper
caps ``lm_head``'s output with a softcap *module* (``logit_softcap``) and cuts it to
``text_config.unpadded_vocab_size``. ``logits`` are read where the model returns them; the
logit lens is refused by name, since one block's stream alone does not give the readout.

The image processor pads each image to whole tokens (no resize) and cuts one row of pixels
per image token; ``image_grid_thw`` counts tokens (`geometry.image_grids`).

Inkling 2 Loop (Inkling2LoopForConditionalGeneration, ``inkling2_loop``, transformers 5.25) is
Inkling 2 whose text model (``inkling2_loop_text``) runs a run of its blocks several passes
a forward (`text.Inkling2LoopLayer`): ``layers`` is its blocks' calls in forward order,
one entry per pass of a looped block (`vlreg.plugin.Layer.passes`); the rest is Inkling 2's.

Inkling 1 (InklingForConditionalGeneration, ``inkling_mm_model``) has the same layout and
scatter, with an audio tower beside (refused by name: `wrappers.INKLING1_REFUSES`): its text
blocks are plain sums whose sublayers are each followed by a short convolution (``attn_sconv``,
``mlp_sconv``, read as what they add), a dense MLP on the first blocks, routed and shared
experts after; its readout divides the normed stream by ``logits_mup_width_multiplier`` before
``lm_head`` and cuts to the unpadded vocabulary (`wrappers.INKLING1`); its tower is folding
layers that end at the text width, with no blocks and no projector (``vision.layers`` refused
by name), one row per image token; its image processor cuts an image into squares, one token
each (`geometry.inkling_grids`).
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper, read_only

from . import geometry, text, vision, wrappers


def builders():
    from .checkpoints import build_inkling2

    from .checkpoints import build_inkling2_loop, build_inkling_mm_model

    return {"inkling2": build_inkling2, "inkling2_loop": build_inkling2_loop, "inkling_mm_model": build_inkling_mm_model}


#: The merger runs inside the tower, on its last block's patch rows, before the tower returns.
READ_ONLY = {
    "vision.tower_output": read_only(
        "the merger (model.projector) runs inside the tower and has read the stream before the tower returns it; "
        "edit vision.layers[-1].layer_output, the same stream before the merger"
    )
}

#: transformers runs the model only with eager attention (its relative logits reach the eager
#: function alone), and refuses sdpa when asked for it: a load that names none is eager.
EAGER = {task: {"attn_implementation": "eager"} for task in ("image-text-to-text", "text-generation")}

plugin = Plugin(
    Wrapper(("inkling2", "inkling2_loop"), projector="model.vision_tower.merger", refuses=READ_ONLY, readout=wrappers.INKLING2,
            load_options=lambda part: EAGER,
            image_grids=lambda part: geometry.image_grids),
    Wrapper("inkling_mm_model", projector=None, refuses=wrappers.INKLING1_REFUSES, readout=wrappers.INKLING1,
            load_options=lambda part: EAGER, image_grids=lambda part: geometry.inkling_grids),
    Text("inkling2_text", envoys=text.envoys),
    Text("inkling2_loop_text", envoys=text.loop_envoys),
    Text("inkling_text", envoys=text.inkling1_envoys),
    Tower("inkling_vision", envoys=vision.inkling1_envoys),
    Tower("inkling2_vision", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
