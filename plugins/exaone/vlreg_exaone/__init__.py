"""vlreg-exaone: EXAONE 4.5, declared against `vlreg.plugin`.

Exaone4_5_ForConditionalGeneration is Qwen2.5-VL's layout: the text model at
``model.language_model`` (an ``exaone4`` model, transformers' ``Exaone4Model``), the windowed
Qwen ViT at ``model.visual`` with its merger, the merger's output written into the token
embeddings by ``model``'s first ``inputs_embeds.masked_scatter`` (a video's by its second).
So the mounts, the tower's names, the image grids and the tower's envoy classes are the
adapters ``"qwen_vit"`` (vlreg-qwen2-vl) and ``"windowed_qwen_vit"`` (vlreg-qwen2-5-vl).

What differs:

* the text blocks norm no input: a block adds ``post_attention_layernorm(self_attn(x))`` and
  then ``post_feedforward_layernorm(mlp(h))`` to the stream, so what a sublayer adds is read
  at its norm's output, the adapter ``"sandwich"`` (vlreg-gemma); its attention norms its
  queries and keys per head, and only the sliding-window blocks rotate them (the global ones
  use no positions), which the queries and keys are read after;
* the tower's attention is grouped-query (fewer key and value heads than query heads), which
  the Qwen ViT's reads serve as they are (`vision`);
* a video's mask and features are served at the second scatter (`VIDEO_SCATTER`, as on
  Qwen2.5-VL), and the tower's values on a trace of videos alone are the video's call's.
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from . import text, vision

QWEN_VIT = adapter("qwen_vit")

def builders():
    from .checkpoints import build_exaone4_5

    return {"exaone4_5": build_exaone4_5}


plugin = Plugin(
    Wrapper("exaone4_5", **QWEN_VIT.mounts, entry=VIDEO_SCATTER, refuses=QWEN_VIT.refuses,
            image_grids=lambda part: QWEN_VIT.image_grids, video_grids=lambda part: QWEN_VIT.video_grids()),
    Text("exaone4", envoys=text.envoys),
    Tower("exaone4_5_vision", rename=QWEN_VIT.tower_rename, envoys=vision.envoys),
    checkpoints=builders,
)
