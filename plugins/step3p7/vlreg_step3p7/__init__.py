"""vlreg-step3p7: Step 3.7, declared against `vlreg.plugin`.

Step3p7ForConditionalGeneration holds the tower at ``model.vision_model`` (``step3p5_vision``:
layer-scaled CLIP-named blocks, then two downsampling convolutions; `vision`), the projector at
``model.multi_modal_projector`` (one linear map from the convolutions' width) and the text model
at ``model.language_model`` (``step3p5``: per-block head counts, a sigmoid gate per head,
MiniMax-M3's experts; `text`). ``model``'s first ``inputs_embeds.masked_scatter`` writes the
image tokens into the embeddings.

Each image is its global view (`geometry`): an image the processor would also cut into local
crops is refused by name before the processor runs (the tower's second call, over the crops,
is read by no tower value).
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper

from . import text, vision
from .geometry import step3p7_image_grids

#: The local crops, refused by name on the claim (so the census marks the type partial); an image
#: that would have them is refused before the processor runs (`vision.Step3p7Vision.image_refusal`).
CROPS = ("the local crops the processor cuts a large or elongated image into run through the tower in a second "
         "call that no tower value reads, so such an image is refused; each image is served as its global view")


def builders():
    from .checkpoints import build_step3p7

    return {"step3p7": build_step3p7}


plugin = Plugin(
    Wrapper("step3p7", vision="model.vision_model", refuses={"vision.local_crops": CROPS}, image_grids=lambda part: step3p7_image_grids),
    Text("step3p5", envoys=text.envoys),
    Tower("step3p5_vision", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
