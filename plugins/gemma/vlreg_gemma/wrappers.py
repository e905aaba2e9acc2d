"""ShieldGemma 2 (``shieldgemma2``): Gemma 3 under another config, with a weight layout and a
processor of its own.

transformers loads a ShieldGemma 2 checkpoint for image-text-to-text as
``Gemma3ForConditionalGeneration`` built from a ``ShieldGemma2Config`` (the auto table), so
the model is Gemma 3's: served by the ``gemma3`` declaration's answers. Two things differ.

**Its weights.** A ShieldGemma 2 checkpoint is saved from ``ShieldGemma2ForImageClassification``,
which holds the Gemma 3 model at ``model``: every key has one ``model.`` more than the
image-text-to-text class expects (two more where transformers 5 saved the classifier, whose
reverse mapping writes ``model.model.``). transformers' own conversion for ``shieldgemma2``
is written for the classifier and is applied to the image-text-to-text class too, where it
maps nothing onto the text model: loaded plainly, that class keeps its text weights at their
random initialisation, with a warning only. `LOAD_OPTIONS` gives an image-text-to-text
load a ``key_mapping`` that drops the classifier's prefix first; transformers' conversions
then place every key (checked by a save and load of each layout: the published one, the
classifier's and the image-text-to-text class's, `plugins/gemma/tests/test_shieldgemma2.py`).
A text-generation load is refused before loading: transformers has no text-only class for
``shieldgemma2``, so its pipeline would build the class the config names, the classifier,
which does not generate (`vlreg.core.tasks.text_task_fallback`); text prompts run on the
image-text-to-text load.

**Its processor.** ``ShieldGemma2Processor`` writes, for each image and each policy it is
given (``policies=``, ``custom_policies=``, by default its three), the classifier's prompt
through its chat template, and drops the text it is handed. vlreg's promise is that a
trace reads the prompt it is given, so a ShieldGemma 2 load encodes with
`PromptedShieldGemma2Processor` (`vlreg_processor`):

* given text, it encodes that text as Gemma 3's processor does (each ``<start_of_image>``
  expanded to the image's soft tokens between its markers), one row per prompt;
* the chat template over ``[{"type": "image"}, {"type": "text", "text": policy}]`` is the
  classifier's prompt for that policy: the same ids and pixels ``ShieldGemma2Processor``
  builds for it;
* given no text, it is ``ShieldGemma2Processor`` (a prompt per image and policy);
* text together with ``policies=`` or ``custom_policies=`` is refused: one of them would be
  dropped.

The model answers the classifier's prompt with ``Yes`` (the image violates the policy) or
``No`` at the next token: ``logits[:, -1]`` at those two ids are the classifier's scores.
"""

from __future__ import annotations

from typing import Any

from transformers import ShieldGemma2Processor
from transformers.processing_utils import ProcessorMixin

#: A ShieldGemma 2 checkpoint's keys as the image-text-to-text class finds them: the
#: classifier's ``model.`` dropped (``model.model.`` where transformers 5 saved it), for
#: transformers' own conversions to place (`vlreg_load_options`; see the module).
KEY_MAPPING = {r"^model\.model\.": "model.", r"^model\.": ""}
LOAD_OPTIONS = {"image-text-to-text": {"key_mapping": KEY_MAPPING}}

POLICY_KEYWORDS = ("policies", "custom_policies")


class PromptedShieldGemma2Processor(ShieldGemma2Processor):
    """``ShieldGemma2Processor`` that encodes the text it is given (see the module)."""

    def __call__(self, images: Any = None, text: Any = None, **kwargs: Any) -> Any:
        if text is None:
            return super().__call__(images=images, **kwargs)
        given = [key for key in POLICY_KEYWORDS if kwargs.get(key) is not None]
        if given:
            raise ValueError(
                f"{' and '.join(given)}= given with a prompt: ShieldGemma 2's own processor writes a prompt of its "
                f"own for each policy and drops the one given, and vlreg encodes the prompt it is given. Write the "
                f"policy into the prompt (the chat template over [{{'type': 'image'}}, {{'type': 'text', 'text': "
                f"policy}}] is the classifier's prompt for it), or call model.processor(images=...) without text "
                f"for its policy prompts"
            )
        encoding = ProcessorMixin.__call__(self, images=images, text=text, **kwargs)
        if "mm_token_type_ids" in encoding:
            encoding["token_type_ids"] = encoding.pop("mm_token_type_ids")
        return encoding


def prompted(processor: Any) -> Any:
    """``vlreg_processor`` for ShieldGemma 2: the loaded ``ShieldGemma2Processor`` as a
    `PromptedShieldGemma2Processor` over the same tokenizer, image processor, template,
    image length and policies; any other processor (one a caller passed, or one already
    adapted) as it is."""
    if type(processor) is not ShieldGemma2Processor:
        return processor
    return PromptedShieldGemma2Processor(
        image_processor=processor.image_processor,
        tokenizer=processor.tokenizer,
        chat_template=processor.chat_template,
        image_seq_length=processor.image_seq_length,
        policy_definitions=processor.policy_definitions,
    )
