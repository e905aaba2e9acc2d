"""The Apertus 1.5 wrapper: where the text model, the vision tokenizer and its quantizer
sit, how the image's codes enter, and what is not served.

``model``'s forward (``Apertus1p5Model``) embeds the prompt first, with the text model's
``embed_tokens`` (its first call); then, image by image, runs the vision tokenizer's
encoder (``vision``) and its quantizer (``projector``: a code per cell), offsets the codes
into the text vocabulary (``image_token_offset``), embeds them with the same
``embed_tokens``, joins the images' embeddings and writes them over the ``<|image|>``
placeholders with ``inputs_embeds.masked_scatter(mask, features)``: an `ImageCodes` entry
whose codes are embedded one call an image.

Audio is not served (`REFUSES`): the WavTokenizer encoder (``model.audio_tokenizer``) turns
a clip into codes embedded as the image's are, but vlreg claims no audio part.
"""

from __future__ import annotations

from vlreg.plugin import ImageCodes

#: The vision tokenizer's encoder (``vision``) and its quantizer (``projector``).
PARTS = {"vision": "model.vision_tokenizer.encoder", "projector": "model.vision_tokenizer.quantize"}

ENTRY = ImageCodes(host="model", operation="inputs_embeds_masked_scatter_0", argument=1,
                   embedder="model.language_model.embed_tokens", per_image=True)

#: What of Apertus 1.5 is not served (`Claim.refuses`): audio.
REFUSES = {
    "audio": (
        "audio is not served: vlreg claims no audio part, so Apertus 1.5's audio tokenizer (model.audio_tokenizer, "
        "a WavTokenizer encoder) has no standard names, and a trace hands the processor only text and images "
        "(audio= is refused before the model runs); images and text are served"
    ),
}
