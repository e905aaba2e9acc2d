"""What Chameleon promises beyond the conformance suite and `tests/test_codes.py`: its
prompt and image expansion, the parts of a flat config and who serves them, the codes
against the quantizer, the image codes' logits its forward suppresses (and the logit lens
with them), and its Swin-ordered blocks read where the stream adds their sublayers."""

from __future__ import annotations

import pytest
import torch

import vlreg_chameleon
from vlreg import Unavailable, analysis
from vlreg.testing import load
from vlreg.testing.conformance import image
from vlreg_chameleon.checkpoints import BOI, BOS, EOI, IMAGE, SEP
from vlreg_chameleon.wrappers import CHAMELEON_ENTRY

CHECKPOINT = "chameleon"

PICTURE = image(112, 84)  # resized to 42 x 32, its centre 32 x 32 cropped: 4 x 4 codes
SIDE = 4
PROMPT = "What is in this image?" + IMAGE


def test_the_prompt_and_the_image_expansion(model):
    """The tokenizer writes the BOS, the processor the image's brackets around its tokens
    and the separator after the prompt (its chat mode); Chameleon's checkpoint has no
    chat template."""
    ids = model.processor(text=PROMPT, images=[PICTURE], return_tensors="pt")["input_ids"][0]
    tokens = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    assert tokens[0] == BOS and tokens[-1] == SEP and model.processor.chat_template is None
    start = tokens.index(BOI)
    assert tokens[start + 1 : start + 1 + SIDE * SIDE] == [IMAGE] * SIDE * SIDE and tokens[start + 1 + SIDE * SIDE] == EOI
    completion = model.processor(text=PROMPT, images=[PICTURE], return_for_text_completion=True, return_tensors="pt")
    assert completion["input_ids"][0, -1] != model.tokenizer.sep_token_id
    with pytest.raises(ValueError, match=r"no chat template to write one: put <image> where each image goes"):
        with model.trace("What is in this image?", images=[PICTURE]):  # no placeholder, and no template to point to
            model.logits.save()


def test_the_parts_of_a_flat_config_and_who_serves_them(model):
    assert model.family.plugins["wrapper"] is vlreg_chameleon.plugin and model.family.entry == CHAMELEON_ENTRY
    parts = {kind: part.model_type for kind, part in model.family.parts.items()}
    assert parts == {"wrapper": "chameleon", "text": "chameleon", "vision": "chameleon_vqgan"}
    assert model.family.parts["text"].config is model.family.parts["wrapper"].config  # the flat config is its own text part
    vision = model.vision
    assert (vision.num_layers, vision.patch_size, vision.image_size, vision.codebook_size) == (0, 8, 32, 64)
    assert model.projector._module is model._module.model.vqmodel.quantize
    for size in ("num_heads", "head_dim", "intermediate_size", "patch_embedding_size"):
        with pytest.raises(Unavailable):
            getattr(vision, size)


def test_the_codes_are_the_quantizers_in_the_vocabulary(model):
    """No line ends here: the codes are the quantizer's ids mapped into the vocabulary, in
    raster order, as many as the processor's image tokens."""
    mapping = model._module.model.vocabulary_mapping
    with model.trace(PROMPT, images=[PICTURE]):
        latents = model.vision.tower_output.save()
        quantized = model.projector.output.save()
        codes = model.vision.image_codes.save()
    assert latents.shape == (1, SIDE * SIDE, model.vision.vision_hidden_size)
    indices = quantized[2]  # the quantizer returns the quantized latents, its loss, then the ids
    assert torch.equal(codes.long(), mapping.img2bpe_mapping_tensor[indices].long())
    assert set(codes.tolist()) <= set(model.family.suppressed_tokens)


def test_an_edit_of_the_latents_changes_the_codes(model):
    with model.trace(PROMPT, images=[PICTURE]):
        plain = model.vision.image_codes.save()
    with model.trace(PROMPT, images=[PICTURE]):
        model.vision.tower_output[:] = 0
        codes = model.vision.image_codes.save()
    assert (codes == codes[0]).all() and not torch.equal(codes, plain)


def test_the_forward_suppresses_the_image_codes_logits_and_so_does_every_readout(model):
    """The forward sets every image code's logit lowest after lm_head (so text generation
    never emits one): ``logits`` is read after that, what the model returns; the logit
    lens sets them lowest too, so its distribution at the last block is the model's."""
    suppressed = list(model.family.suppressed_tokens)
    assert suppressed == model._module.model.vocabulary_mapping.image_tokens
    with model.trace(PROMPT, images=[PICTURE]):
        last = model.layers[-1].layer_output.save()
        logits = model.logits.save()
        returned = model.output.logits.save()
    assert torch.equal(logits, returned) and (logits[..., suppressed] == torch.finfo(logits.dtype).min).all()
    lens = analysis.project_on_vocab(model, last)
    torch.testing.assert_close(lens.softmax(-1), logits.softmax(-1))
    assert float(analysis.next_token_probs(model, PROMPT, [PICTURE])[suppressed].sum()) == 0.0


def test_swin_ordered_blocks_serve_what_the_stream_adds():
    """With ``swin_norm`` each sublayer's output is normed before the stream adds it:
    ``attention_output`` and ``mlp_output`` are the norms' outputs, not the sublayers'."""
    swin = load("chameleon_swin")
    with swin.trace(PROMPT, images=[PICTURE]):
        block = swin.layers[0]
        x, own = block.input.save(), block.self_attn.output.save()
        attention, mlp, out = block.self_attn.attention_output.save(), block.mlp.mlp_output.save(), block.layer_output.save()
    torch.testing.assert_close(x + attention + mlp, out)
    torch.testing.assert_close(attention, swin.layers[0].input_layernorm._module(own[0]))
