"""What is particular to Mistral 3's Pixtral tower: images of different shapes padded
for the convolution, then cropped and packed into one row."""

from __future__ import annotations

import torch

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image


def test_patch_embeddings_are_every_images_patches_cropped_and_packed_into_one_row():
    model = StandardizedTransformer(str(build("mistral3")), task="image-text-to-text", dispatch=True, device="cpu")
    pictures = [image(112, 84), image(64, 128, seed=1)]  # resized to 64 x 48 and 32 x 64 pixels
    content = [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "What is in these?"}]
    prompt = model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                 tokenize=False)
    with model.trace(prompt, images=pictures):
        grids = model.vision.patch_embed.output.save()  # [images, hidden, 8, 8]: padded to the largest
        packed = model.vision.patch_embeddings.save()
        first = model.vision.layers[0].input.save()
    assert grids.shape[0] == 2 and grids.shape[-2:] == (8, 8)
    crops = [grids[0, :, :6, :8], grids[1, :, :8, :4]]  # each image's own grid of 8-pixel patches
    expected = torch.cat([crop.flatten(1).T for crop in crops]).unsqueeze(0)
    assert packed.shape == (1, 48 + 32, model.vision.vision_hidden_size) and torch.equal(packed, expected)
    torch.testing.assert_close(first, model.vision.ln_pre._module(packed))
