"""vlreg-dots: dots3.note, declared against `vlreg.plugin`.

Dots3NoteForConditionalGeneration holds the text model at ``model.language_model``
(``dots3_note_text``, DeepSeek-V3.2's: `text`), a Qwen ViT at ``model.vision_tower`` with its
projector inside (``model.vision_tower.merger``) and experts on some of its blocks
(`vision`), and an audio tower (``model.audio_tower``). ``model``'s forward writes the merger's
output into the embeddings at its first ``inputs_embeds.masked_scatter``, a video's at the
second (`VIDEO_SCATTER`: a video's frames run through the tower in a call of their own, after
the image's scatter), audio at the third.

Images resize whole into 2 x 2 blocks of 14-pixel patches (``Qwen2VLImageProcessor``), so the
image grids, the video grids (each frame a temporal patch of its own) and the tower's attention
are the ``"qwen_vit"`` adapter's. Audio is refused by name.
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from . import text, vision

QWEN_VIT = adapter("qwen_vit")

REFUSES = {
    **QWEN_VIT.refuses,
    "audio": "audio is not served: vlreg claims no audio part, so dots3.note's audio tower (model.audio_tower) has "
             "no standard names, and a trace hands the processor only text, images and videos",
}


def builders():
    from .checkpoints import build_dots3_note

    return {"dots3_note": build_dots3_note}


plugin = Plugin(
    # a text-generation load is Dots3NoteForCausalLM, the text model at `model`
    Wrapper("dots3_note", text_only="model", vision="model.vision_tower", projector="model.vision_tower.merger",
            entry=VIDEO_SCATTER, refuses=REFUSES, image_grids=lambda part: QWEN_VIT.image_grids,
            video_grids=lambda part: QWEN_VIT.video_grids()),
    Text("dots3_note_text", envoys=text.envoys),
    Tower("dots3_note_vision_encoder", rename=QWEN_VIT.tower_rename, envoys=vision.envoys),
    checkpoints=builders,
)
