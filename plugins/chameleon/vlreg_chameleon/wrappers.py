"""The Chameleon and Emu3 wrappers: where the text model, the VQ encoder and the quantizer
sit, and how the image's codes enter.

Both forwards (``model``'s) embed the prompt first, with the text model's ``embed_tokens``
(its first call); then run the VQ model's encoder (``vision``) and its quantizer
(``projector``: a code per cell of the encoder's grid), map the codes to ids of the text
vocabulary, embed those with the same ``embed_tokens`` (its second call) and write the
embeddings over the ``<image>`` placeholders with ``inputs_embeds.masked_scatter(mask,
features)``: an `ImageCodes` entry each.

* Chameleon (``ChameleonForConditionalGeneration``) keeps one flat config, so its text
  model is the whole of ``model`` (``model.layers``, ``model.embed_tokens``) with the VQ
  model beside the blocks (``model.vqmodel``). After ``lm_head`` its forward sets the
  logits of every image code to the lowest value, in place, so text generation never
  emits one (`image_code_ids`, declared as its suppressed tokens).
* Emu3 (``Emu3ForConditionalGeneration``) keeps the text model at ``model.text_model``
  and ends each row of codes with an end-of-line id. Loaded for text generation it is
  transformers' ``Emu3ForCausalLM`` (the text model at ``model``), which finds the text
  weights of a checkpoint of the whole model only under a key mapping (`EMU3_LOAD_OPTIONS`):
  the checkpoint keeps them as ``text_model.model.*``, which transformers renames for the
  wrapper but not for the text-only class; without it the load would start from random
  weights without a word. Its VQ decoder, which turns generated image codes back into
  pixels outside the forward, has no standard names (`EMU3_REFUSES`).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import ImageCodes

#: The scatter in ``model``'s forward, as both wrappers write it.
SCATTER = {"host": "model", "operation": "inputs_embeds_masked_scatter_0", "argument": 1}

#: Both wrappers' tower (the VQ encoder) and projector (its quantizer).
VQ = {"vision": "model.vqmodel.encoder", "projector": "model.vqmodel.quantize"}
CHAMELEON_ENTRY = ImageCodes(**SCATTER, embedder="model.embed_tokens")

EMU3_ENTRY = ImageCodes(**SCATTER, embedder="model.text_model.embed_tokens")

#: Where Emu3ForCausalLM finds the text weights of a checkpoint of the whole model, which
#: keeps them as ``text_model.model.*`` and ``text_model.lm_head``.
EMU3_LOAD_OPTIONS = {"text-generation": {"key_mapping": {r"^text_model\.model\.": "model.",
                                                         r"^text_model\.lm_head\.": "lm_head."}}}


#: What of Emu3 is not served (`Claim.refuses`): the VQ decoder, image generation's.
EMU3_REFUSES = {
    "vision.decoder": "Emu3's VQ decoder (model.vqmodel.decoder) turns image codes the model generated back into "
                      "pixels, outside the forward (model.decode_image_tokens): it has no standard names; read it "
                      "natively (the codes themselves are generated as text is, and read in the logits)",
}


def image_code_ids(part: Any) -> list[int]:
    """The vocabulary ids of Chameleon's image codes (its ``IMGIMG...`` tokens), whose logits
    its forward sets to the lowest value: what ``vocabulary_mapping.image_tokens`` holds."""
    return sorted(index for name, index in (part.config.vocabulary_map or {}).items() if name.startswith("IMGIMG"))
