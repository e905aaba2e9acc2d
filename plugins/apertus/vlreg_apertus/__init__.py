"""vlreg-apertus: Apertus 1.5 (``apertus1p5``, transformers 5.24 and later), declared against `vlreg.plugin`.

Apertus 1.5 reads an image as discrete codes (`vlreg.plugin.ImageCodes`), as Emu3 does: its
vision tokenizer's encoder (``vision``) reduces each image to a grid of latents, its
quantizer (``projector``) picks a codebook entry per cell, the wrapper offsets the codes
into the text vocabulary and embeds them with the text model's own ``embed_tokens``, one
call per image after the prompt's, then scatters the embeddings over the ``<|image|>``
placeholders (`wrappers`). The processor writes each image as ``rows*columns`` text, then
a row of placeholders per row of codes, each row but the last ended by an end-of-line
token (`geometry`).

Parts: the wrapper (``apertus1p5``), the text model (``apertus1p5_text``, Apertus' blocks;
`text`) and the vision tokenizer (``apertus1p5_vision_tokenizer``; `vision`). Audio (a
WavTokenizer encoder's codes, embedded as the image's are) is refused by name. `checkpoints`
builds tiny checkpoints for tests.
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper

from . import text, vision, wrappers
from .geometry import image_grids


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("apertus1p5", **wrappers.PARTS, entry=wrappers.ENTRY, refuses=wrappers.REFUSES,
            image_grids=lambda part: image_grids(part.config)),
    Text("apertus1p5_text", rename=text.RENAME, envoys=text.envoys),
    Tower("apertus1p5_vision_tokenizer", envoys=vision.envoys),
    checkpoints=builders,
)
