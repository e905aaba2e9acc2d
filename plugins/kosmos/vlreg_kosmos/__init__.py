"""vlreg-kosmos: Kosmos-2 (``Kosmos2ForConditionalGeneration``), declared against `vlreg.plugin`.

The root runs the tower (`vision`) and the projector (``image_to_text_projection``: latent
queries over the patches) first, then calls the text model (``text_model``, `text`) with the
projected queries as ``image_embeds`` and the processor's ``image_embeds_position_mask``. Its
``forward_embedding`` embeds the tokens, writes the features over the marked rows by subscript
assignment (``inputs_embeds[mask] = image_embeds``, no operation nnsight names at that level),
multiplies everything by ``embed_scale`` and hands the result to ``embed_positions`` before
adding the positions. So the entry (`ENTRY`):

* reads ``vision.image_features`` where ``forward_embedding`` is called, its ``image_embeds``;
* finds the image's tokens by the processor's mask, not by an id: the processor writes
  ``num_image_tokens`` consecutive ordinary ids after ``<s><image>`` (`Entry.marks`);
* reads the stream the first block starts from before the positions are added, as
  ``embed_positions`` is handed it, scaled (`Entry.scaled_by`);
* under ``generate`` the root's forward never runs: its generate steps ``text_model``.

Each image is 64 tokens (``latent_query_num``), every one the whole image's (each latent
query attends to every patch); the processor writes one image before each prompt's text.
"""

import copy

from vlreg.plugin import Plugin, QueryTokens, Text, Tower, Wrapper

from . import text, vision

ENTRY = QueryTokens(
    host="text_model.model", operation="self_forward_embedding_0", argument="image_embeds", qformer=None,
    assigned="self_forward_embedding_0.source.view_0",
    embeddings_to="text_model.model.embed_positions", steps="text_model", needs_images=True,
    marks="image_embeds_position_mask", scaled_by="text_model.model.embed_scale",
)


def named_placeholder(processor):
    """The loaded ``Kosmos2Processor`` with its ``<image>`` (``boi_token``) named ``image_token``,
    the name vlreg reads a processor's placeholder by (to refuse a prompt that writes one
    itself); any other processor as it is."""
    if getattr(processor, "image_token", None) is not None or not hasattr(processor, "boi_token"):
        return processor
    named = copy.copy(processor)
    named.image_token = processor.boi_token
    return named


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("kosmos-2", text="text_model.model", vision="vision_model.model", projector="image_to_text_projection",
            rename={"text_model.lm_head": "lm_head", "text_model.model.layer_norm": "norm"}, entry=ENTRY,
            processor=lambda part: named_placeholder,
            image_grids=lambda part: QueryTokens.query_grids(part.config.latent_query_num)),
    Text("kosmos_2_text_model", rename=text.rename, envoys=text.envoys),
    Tower("kosmos_2_vision_model", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
