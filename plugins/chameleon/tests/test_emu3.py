"""What Emu3 promises beyond the conformance suite and `tests/test_codes.py`: its chat
format and image expansion, the parts and who serves them, the codes against the quantizer
with an end-of-line id a row, what an edit of the latents changes, the codes of images
batched with others, and the text-only load's weights (`vlreg_load_options`)."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers

import vlreg_chameleon
from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build, chat
from vlreg.testing.conformance import image
from vlreg_chameleon.checkpoints import EMU3_BOS, EOF, EOL, IMAGE, IMAGE_END, IMAGE_START, IMAGE_WRAPPER
from vlreg_chameleon.wrappers import EMU3_ENTRY

CHECKPOINT = "emu3"

PICTURE = image(112, 84)  # resized to 72 x 48: 9 x 6 codes
ROWS, COLUMNS = 6, 9
TOKENS = ROWS * (COLUMNS + 1)


def codes(model, prompt, images) -> torch.Tensor:
    with model.trace(prompt, images=images):
        found = model.vision.image_codes.save()
    return found


def test_the_chat_format_and_the_image_expansion(model):
    messages = [{"role": "system", "content": [{"type": "text", "text": "You are a helpful assistant."}]},
                {"role": "user", "content": [{"type": "text", "text": "What is in this image?"}, {"type": "image"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt == "You are a helpful assistant. USER: <image>What is in this image? ASSISTANT:"  # images first
    ids = model.processor(text=chat(model), images=[PICTURE], return_tensors="pt")["input_ids"][0]
    tokens = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    assert tokens[0] == EMU3_BOS  # the processor writes it; the tokenizer adds none
    assert model.tokenizer("USER:")["input_ids"][0] != model.tokenizer.bos_token_id
    start = tokens.index(IMAGE_START)
    assert model.tokenizer.decode(ids[start + 1 : start + 4]) == f"{ROWS}*{COLUMNS}"
    assert tokens[start + 4] == IMAGE_WRAPPER
    assert tokens[start + 5 : start + 5 + TOKENS] == [IMAGE] * TOKENS
    assert tokens[start + 5 + TOKENS : start + 7 + TOKENS] == [EOF, IMAGE_END]


def test_the_parts_and_who_serves_them(model):
    assert model.family.name == "chameleon" and model.family.plugins["wrapper"] is vlreg_chameleon.plugin
    parts = {kind: part.model_type for kind, part in model.family.parts.items()}
    assert parts == {"wrapper": "emu3", "text": "emu3_text_model", "vision": "emu3_vqgan"}  # vision: the vq_config
    assert model.family.entry == EMU3_ENTRY and model.family.suppressed_tokens == ()
    vision = model.vision
    assert (vision.num_layers, vision.patch_size, vision.vision_hidden_size, vision.codebook_size) == (0, 8, 32, 64)
    assert model.projector._module is model._module.model.vqmodel.quantize
    for size in ("num_heads", "head_dim", "intermediate_size", "image_size", "patch_embedding_size"):
        with pytest.raises(Unavailable):
            getattr(vision, size)
    with pytest.raises(AttributeError, match="resnet blocks"):
        vision.layers
    assert "decode_image_tokens" in model.support()["vision.decoder"]  # image generation's path, refused by name


def test_the_codes_are_the_quantizers_in_the_vocabulary_with_a_line_end_a_row(model):
    mapping = model._module.model.vocabulary_mapping
    with model.trace(chat(model), images=[PICTURE]):
        latents = model.vision.tower_output.save()
        quantized = model.projector.output.save()
        found = model.vision.image_codes.save()
    assert latents.shape == (1, ROWS * COLUMNS, model.vision.vision_hidden_size)
    assert quantized.shape == (1, 1, ROWS, COLUMNS) and found.shape == (TOKENS,)
    grid = found.reshape(ROWS, COLUMNS + 1)
    assert (grid[:, -1] == model.tokenizer.convert_tokens_to_ids(EOL)).all()
    assert torch.equal(grid[:, :-1].long(), mapping.img2bpe_mapping_tensor[quantized[0, 0]].long())


def test_an_edit_of_the_latents_changes_the_codes(model):
    """Zeroed latents all reach the quantizer's convolution as its bias: one code a cell."""
    plain = codes(model, chat(model), [PICTURE])
    with model.trace(chat(model), images=[PICTURE]):
        model.vision.tower_output[:] = 0
        found = model.vision.image_codes.save()
    cells = found.reshape(ROWS, COLUMNS + 1)[:, :-1]
    assert (cells == cells[0, 0]).all() and not torch.equal(found, plain)


def test_two_invokes_each_get_their_own_codes(model):
    """Images of one size in two invokes get the codes each gets alone. A smaller image
    batched with a larger one is padded (bottom and right, by the processor, as in any
    transformers batch), and the encoder's convolutions see the padding near its edges: its
    codes can differ from its own alone, while the larger image's are unchanged."""
    other, small, longer = image(112, 84, seed=3), image(40, 32, seed=4), "What is in this image? Describe the picture."
    for first, second in ((other, PICTURE), (small, PICTURE)):
        alone = codes(model, chat(model), [first])
        expected = codes(model, chat(model, text=longer), [second])
        saved = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace() as tracer:
            with tracer.invoke(chat(model), images=[first]):
                saved.append(model.vision.image_codes.save())
            with tracer.invoke(chat(model, text=longer), images=[second]):
                saved.append(model.vision.image_codes.save())
        assert saved[0].shape == alone.shape and torch.equal(saved[1], expected)
        if first is other:
            assert torch.equal(saved[0], alone)
    assert alone.numel() == 4 * (5 + 1)  # 40 x 32: 5 x 4 codes


def test_a_text_only_load_reads_the_text_weights_of_the_whole_models_checkpoint(model):
    """Loaded for text generation, the checkpoint is transformers' Emu3ForCausalLM, which
    finds none of the text model's weights under the names the whole model saves them by;
    vlreg loads it with the key mapping the plugin declares, lazily or not."""
    path = str(build("emu3"))
    plain = transformers.AutoModelForCausalLM.from_pretrained(path)
    expected = model._module.model.text_model.embed_tokens.weight
    assert not torch.equal(plain.model.embed_tokens.weight, expected), "transformers now finds them itself"
    with model.trace("USER: Hello ASSISTANT:"):  # the processor writes the BOS
        same = model.logits.save()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dispatch in (True, False):
            text_only = StandardizedTransformer(path, dispatch=dispatch, device="cpu")
            with text_only.trace(EMU3_BOS + "USER: Hello ASSISTANT:"):
                logits = text_only.logits.save()
            assert isinstance(text_only._module, transformers.Emu3ForCausalLM)
            assert torch.equal(text_only.embed_tokens.weight, expected)
            assert torch.equal(text_only.lm_head.weight, model.lm_head.weight)
            torch.testing.assert_close(logits, same)
