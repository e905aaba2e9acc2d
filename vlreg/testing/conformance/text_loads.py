"""The suite's checks of a vision-language checkpoint loaded for text: a prompt with no image
on an image load, and a load for text generation (the default task), built at once or lazily.
Mixed into `VisionConformance`."""

from __future__ import annotations

import warnings

import pytest
import torch

from ...core.errors import Unavailable


class TextLoads:
    """Uses the class's ``text``, ``text_images``, ``text_generation_load``, ``images`` and
    ``written`` (`TextConformance`, `VisionConformance`)."""

    def test_text_prompt_on_an_image_load(self, model):
        if self.text_images:  # the processor refuses a prompt without images
            with pytest.raises(ValueError, match="images"):
                with model.trace(self.text):
                    model.logits.save()
            return
        with model.trace(self.text_prompt(model)):
            mask = model.vision.image_token_mask.save()
            out = model.layers[-1].layer_output.save()
            logits = model.logits.save()
        assert not mask.any()
        assert logits.shape[:2] == out.shape[:2]

    def test_text_only_load_has_no_images(self, path, model):
        """Loaded for text generation (the default task), a vision-language checkpoint is
        the wrapper with no processor, or transformers' text-only class where it has one
        (Qwen3.5's): either way no image reaches it, images are refused, and the text
        model is the same one."""
        if not self.text_generation_load:
            for dispatch in (True, False):
                with pytest.raises(ValueError, match="task='image-text-to-text'"):
                    self.load(path, task=None, dispatch=dispatch)
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            text_only = self.load(path, task=None, attn_implementation="eager")  # as `model`
        assert text_only.processor is None
        assert any("task='image-text-to-text'" in str(w.message) for w in caught)
        assert not [row for row in text_only.support() if row.startswith("vision")]
        vision = text_only.__dict__.get("vision")
        if vision is not None:  # the wrapper, loaded for text
            reason = vision.no_images()
            assert "no processor" in reason and "task='image-text-to-text'" in reason
            assert vision.support() == {}
            with pytest.raises(Unavailable, match="no processor"):
                with text_only.trace(self.text):
                    vision.image_features.save()
        with pytest.raises(ValueError, match="task='image-text-to-text'"):
            with text_only.trace(self.text, images=self.images()[:1]):
                text_only.logits.save()
        with text_only.trace(self.written(model, self.text)):  # what the processor writes, written out
            logits = text_only.logits.save()
        # the same tokens, through the processor, or as the tokenizer's encoding where the
        # processor takes no prompt without images
        same = dict(text_only.tokenizer(self.text, return_tensors="pt")) if self.text_images else self.text
        with model.trace(same):
            expected = model.logits.save()
        assert logits.shape[-1] == text_only.vocab_size
        torch.testing.assert_close(logits, expected)

    def test_lazy_text_only_build(self, path, model):
        """Refused, naming the fix, where transformers has no text-generation class for
        the config (it could only fall back to the wrapper, which needs the weights);
        where it has one (the wrapper itself on Gemma 3, a text-only class on Qwen3.5),
        built lazily with the same text names and no images."""
        if _text_generation_class(path) is None:
            with pytest.raises(ValueError, match="image-text-to-text"):
                self.load(path, task=None, dispatch=False)
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lazy = self.load(path, task=None, dispatch=False)
        assert not lazy.dispatched and lazy.processor is None
        assert any("task='image-text-to-text'" in str(w.message) for w in caught)
        assert lazy.num_layers == model.num_layers
        assert [type(block) for block in lazy.layers] == [type(block) for block in model.layers]
        vision = lazy.__dict__.get("vision")
        assert vision is None or "no processor" in vision.no_images()
        with lazy.trace(self.text):
            logits = lazy.logits.save()
        assert lazy.dispatched and logits.shape[-1] == lazy.vocab_size


def _text_generation_class(path: str) -> type | None:
    """The class transformers loads this checkpoint as for text generation, if any
    (Gemma 3's is the wrapper itself; LLaVA and Qwen2-VL have none)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    config = AutoConfig.from_pretrained(path)
    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)] if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING else None
