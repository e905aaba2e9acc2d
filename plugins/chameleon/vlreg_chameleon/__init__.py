"""vlreg-chameleon: Chameleon and Emu3, declared against `vlreg.plugin`.

Both read an image as discrete codes (`vlreg.plugin.ImageCodes`): a VQ encoder
(``vision``) reduces the image to a grid of latents, its quantizer (``projector``) picks a
codebook entry per cell, the wrapper maps the codes to ids of the text vocabulary and
embeds them with the text model's own ``embed_tokens`` (its second call in the forward),
then scatters the embeddings over the ``<image>`` placeholders:

* ``vision.tower_output``: the encoder's latents, ``[images, cells, latent channels]``;
* ``vision.image_codes``: the ids the embedding reads, ``[image_tokens]``; written, they
  are embedded in their place;
* ``vision.image_features``: their embeddings, where the scatter writes them.

transformers builds Emu3 on Chameleon's classes; the two differ in where the text model
sits, in Emu3's end-of-line token after each row of codes and its resize to any multiple
of a cell (Chameleon's processor crops a square), and in Chameleon's forward suppressing
the image codes' logits after ``lm_head`` (`wrappers`). Parts: the wrappers (``chameleon``,
``emu3``), the text models (``chameleon``: the flat config is its own text part;
``emu3_text_model``; `text`) and the VQ models (``chameleon_vqgan``, ``emu3_vqgan``: each
config's ``vq_config``, which the host takes for the vision part where there is no
``vision_config``; `vision`). `geometry` lays out the codes, `checkpoints` builds tiny
checkpoints for tests. Emu3's VQ decoder, which turns generated image codes back into
pixels outside the forward, has no standard names: its claim refuses it by name.
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper

from . import text, vision, wrappers
from .geometry import chameleon_image_grids, emu3_image_grids


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("chameleon", text="model", **wrappers.VQ, entry=wrappers.CHAMELEON_ENTRY,
            suppressed_tokens=wrappers.image_code_ids, image_grids=lambda part: chameleon_image_grids(part.config)),
    # a text-generation load is Emu3ForCausalLM, the text model at `model`
    Wrapper("emu3", text="model.text_model", text_only="model", **wrappers.VQ, entry=wrappers.EMU3_ENTRY,
            load_options=wrappers.EMU3_LOAD_OPTIONS, refuses=wrappers.EMU3_REFUSES,
            image_grids=lambda part: emu3_image_grids(part.config)),
    Text(("chameleon", "emu3_text_model"), envoys=text.envoys),
    Tower(("chameleon_vqgan", "emu3_vqgan"), envoys=vision.envoys),
    checkpoints=builders,
)
