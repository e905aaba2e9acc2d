"""ShieldGemma 2, served as Gemma 3 (`vlreg_gemma.wrappers`): what the suite
(`test_conformance.TestShieldGemma2`) cannot say.

* every weight lands: a ShieldGemma 2 model saved in each layout a user meets (the
  published one, under the 4.x classifier's keys; what transformers 5 writes for the
  classifier; what it writes for the image-text-to-text class) loads through vlreg with
  every tensor equal to the one saved, where transformers alone leaves the text model
  random; a text-generation load, which would build the classifier, is refused;
* the logits a trace reads are transformers' own: ``ShieldGemma2ForImageClassification``
  (the class the checkpoint is published for, which loads every weight) on its own
  processor's policy prompt, and the trace's prompt is the chat template over that policy;
* the processor encodes the prompt it is given, and refuses policies beside one;
* geometry: 4 x 4 patches pooled 2 x 2, a lit pixel lands in the patches of the token
  whose box holds it.
"""

from __future__ import annotations

import re
import shutil

import pytest
import torch
import transformers
from safetensors.torch import save_file

from vlreg import StandardizedTransformer
from vlreg.testing import build, chat, load
from vlreg.testing.conformance import image, lit
from vlreg_gemma.wrappers import PromptedShieldGemma2Processor, prompted

POLICY = "No violence: the image shall not show gratuitous violence."


CHECKPOINT = "shieldgemma2"


def policy_prompt(model, policy: str = POLICY) -> str:
    """The chat template over a policy: the template writes ShieldGemma 2's question itself."""
    return chat(model, text=policy, generation=False)


def _published(key: str) -> str:
    """A key of the image-text-to-text class as the published checkpoint holds it: as
    transformers 4.50's classifier saved it, its Gemma 3 model at ``model``."""
    for now, then in ((r"^model\.language_model\.", "language_model.model."),
                      (r"^model\.vision_tower\.", "vision_tower.vision_model."),
                      (r"^model\.multi_modal_projector\.", "multi_modal_projector."),
                      (r"^lm_head\.", "language_model.lm_head.")):
        key = re.sub(now, then, key)
    return "model." + key


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """The tiny model saved in each layout, beside its processor, and its weights as saved."""
    source = build("shieldgemma2")
    config = transformers.AutoConfig.from_pretrained(source)
    torch.manual_seed(1)
    reference = transformers.Gemma3ForConditionalGeneration(config).eval()
    weights = {name: tensor.clone() for name, tensor in reference.state_dict().items()}
    folders = {}
    for name in ("published", "classifier", "image-text-to-text"):
        folder = folders[name] = tmp_path_factory.mktemp(name)
        for file in source.iterdir():
            if not file.name.startswith("model"):
                shutil.copy(file, folder)
    tied = reference.config.get_text_config().tie_word_embeddings
    save_file({_published(key): tensor.contiguous() for key, tensor in weights.items() if not (tied and "lm_head" in key)},
              folders["published"] / "model.safetensors", metadata={"format": "pt"})
    classifier = transformers.ShieldGemma2ForImageClassification(config)
    classifier.model.load_state_dict(weights)
    classifier.save_pretrained(folders["classifier"])
    reference.save_pretrained(folders["image-text-to-text"])
    return folders, weights


@pytest.mark.parametrize("layout", ["published", "classifier", "image-text-to-text"])
def test_every_weight_lands_from_each_layout(layouts, layout):
    folders, weights = layouts
    loaded = load(folders[layout])._module.state_dict()
    assert loaded.keys() == weights.keys()
    wrong = [name for name, tensor in weights.items() if not torch.equal(loaded[name], tensor)]
    assert not wrong, (layout, wrong[:3])


def test_a_text_generation_load_is_refused_before_loading():
    """transformers has no text-only class for shieldgemma2: its text-generation pipeline
    would build the class the config names, the classifier, which does not generate."""
    with pytest.raises(ValueError, match="would build ShieldGemma2ForImageClassification .* task='image-text-to-text'"):
        StandardizedTransformer(str(build("shieldgemma2")), dispatch=True, device="cpu")


def test_transformers_alone_leaves_the_text_model_random(layouts):
    """Why the key mapping is declared: the image-text-to-text class, loaded plainly, finds
    none of the text model's weights (nor the tower's in the published layout)."""
    folders, _ = layouts
    for layout in ("published", "classifier"):
        _, info = transformers.AutoModelForImageTextToText.from_pretrained(folders[layout], output_loading_info=True)
        assert any(key.startswith("model.language_model.layers.") for key in info["missing_keys"]), layout


def test_the_logits_are_the_classifiers_own(model):
    """The chat template over a policy is the classifier's prompt for it (the same ids and
    pixels its processor builds), and the trace's logits are the ones its Gemma 3 model
    computes: the two it reads at the last position are its scores."""
    path = build("shieldgemma2")
    classifier = transformers.ShieldGemma2ForImageClassification.from_pretrained(path, attn_implementation="eager").eval()
    own = transformers.AutoProcessor.from_pretrained(path)
    assert type(own) is transformers.ShieldGemma2Processor
    picture = image(112, 84)
    theirs = own(images=[picture], custom_policies={"mine": POLICY}, policies=["mine"], return_tensors="pt")
    mine = model.processor(text=policy_prompt(model), images=[picture], return_tensors="pt")
    for key in theirs:
        assert torch.equal(mine[key], theirs[key]), key
    with model.trace(policy_prompt(model), images=[picture]):
        logits = model.logits.save()
    with torch.no_grad():
        expected = classifier.model(**theirs).logits
        scores = classifier(**theirs).logits
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)
    assert torch.equal(logits[:, -1, [classifier.yes_token_index, classifier.no_token_index]], scores)


def test_the_processor_encodes_the_text_it_is_given(model):
    processor = model.processor
    assert isinstance(processor, PromptedShieldGemma2Processor) and prompted(processor) is processor
    ids = processor(text=["<start_of_image> one", "<start_of_image> two"], images=[[image(56, 56)], [image(56, 56)]],
                    padding=True, return_tensors="pt")["input_ids"]
    assert ids.shape[0] == 2  # a row per prompt, not one per image and default policy (6)
    assert processor(images=[image(56, 56)], return_tensors="pt")["input_ids"].shape[0] == 3  # no text: its policies
    with pytest.raises(ValueError, match="drops the one given"):
        processor(text="<start_of_image> one", images=[image(56, 56)], policies=["dangerous"])


@pytest.mark.parametrize("size", [(56, 56), (112, 84), (30, 200)])
def test_a_lit_pixel_lands_in_the_patches_of_the_token_whose_box_holds_it(model, size):
    (geometry,) = model.vision.geometry(policy_prompt(model), [image(*size)])
    (grid,) = geometry.grids
    assert (grid.rows, grid.columns, grid.fold) == (2, 2, 2)
    patch = model.vision.patch_size
    for token in range(grid.tokens):
        x0, y0, x1, y1 = grid.boxes[token].tolist()
        probe = lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)
        pixels = model.processor(text=policy_prompt(model), images=[probe], return_tensors="pt")["pixel_values"][0, 0]
        y, x = divmod(int(pixels.argmax()), pixels.shape[1])
        assert (y // patch // grid.fold, x // patch // grid.fold) == divmod(token, grid.columns), (size, token)
    with model.trace(policy_prompt(model), images=[image(*size)]):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
