"""What T5Gemma 2 adds to the names: the image entering the encoder, the decoder's one
attention over its own positions and the encoder's, its start, generation, and where each
image token sits."""

import pytest
import torch
from PIL import Image

from vlreg import Unavailable
from vlreg.plugin import MergedAttention
from vlreg.testing import chat
from vlreg.testing.conformance import image, lit

CHECKPOINT = "t5gemma2"


def test_the_image_enters_the_encoder_and_every_decoder_block_weighs_it(model):
    prompt, images = chat(model), [image(40, 30)]
    keys = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(prompt, images=images):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        entering = model.encoder.input_embeddings.save()
        encoded = model.encoder.encoder_output.save()
        for block in model.layers:
            keys.append(block.self_attn.attention_keys.save())
        pattern = model.layers[-1].self_attn.attention_probabilities.save()
    assert torch.equal(entering[mask], features)
    positions = encoded.shape[1]
    assert positions == mask.shape[1] and pattern.shape[-1] == 1 + positions  # the start token, then the prompt
    for block, joined in zip(model.layers, keys):
        attention = block.self_attn._module  # the encoder's keys: this block's normed projection, unrotated
        projected = attention.k_proj(encoded).view(1, positions, -1, attention.head_dim).transpose(1, 2)
        torch.testing.assert_close(MergedAttention.encoder_part(joined, positions, axis=-2), attention.k_norm(projected))
    assert MergedAttention.encoder_part(pattern, positions)[..., mask[0]].sum() > 0
    with model.trace(prompt, images=images):
        model.encoder.encoder_output[:] = 0
        zeroed = model.layers[0].self_attn.attention_keys.save()
    assert MergedAttention.encoder_part(zeroed, positions, axis=-2).abs().max() == 0


def test_a_trace_starts_the_decoder_where_generate_does(model):
    prompt, images = chat(model), [image(40, 30)]
    with model.trace(prompt, images=images):
        logits = model.logits.save()
    encoding = model.processor(text=prompt, images=images, return_tensors="pt")
    with torch.no_grad():
        first = model._module.generate(**encoding, max_new_tokens=1, do_sample=False, output_logits=True,
                                       return_dict_in_generate=True).logits[0]
    assert logits.shape[1] == 1
    torch.testing.assert_close(logits[:, -1], first)


def test_generate_serves_the_image_and_the_encoder_at_the_first_step_only(model):
    prompt, images = chat(model), [image(40, 30)]
    with model.generate(prompt, images=images, max_new_tokens=2, min_new_tokens=2, do_sample=False):
        model.vision.image_features[:] = 0
        entering = model.encoder.input_embeddings.save()
    with model.trace(prompt, images=images):
        mask = model.vision.image_token_mask.save()
    assert entering[mask].abs().max() == 0 and entering[~mask].abs().max() > 0
    with pytest.raises(Unavailable, match="encoder runs once"):
        with model.generate(prompt, images=images, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
            for _ in tracer.iter[1:2]:
                model.encoder.encoder_output.save()


@pytest.mark.parametrize("size", [(40, 30), (56, 56), (23, 70)])
def test_a_lit_pixel_lands_in_its_tokens_patches(model, size):
    """Gemma 3's square: the image is squeezed to 56 x 56, 4 x 4 patches pooled 2 x 2, so 4
    tokens; a white pixel at a token's box's centre changes only a patch of that token."""
    (geometry,) = model.vision.geometry(chat(model), [image(*size)])
    (grid,) = geometry.grids
    assert (grid.rows, grid.columns, grid.fold) == (2, 2, 2)
    with model.trace(chat(model), images=[image(*size)]):
        mask = model.vision.image_token_mask.save()
    assert int(mask.sum()) == grid.tokens
    black = Image.new("RGB", size, "black")
    with model.trace(chat(model), images=[black]):
        dark = model.vision.patch_embeddings.save()
    for token, (x0, y0, x1, y1) in enumerate(grid.boxes.tolist()):
        with model.trace(chat(model), images=[lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)]):
            lit_patches = model.vision.patch_embeddings.save()
        changed = ((lit_patches - dark).abs().amax(-1)[0] > 0).nonzero().flatten().tolist()
        assert changed and all((p // 4 // 2) * 2 + (p % 4) // 2 == token for p in changed), (size, token, changed)
