"""Every helper of `vlreg.analysis`, and a picture, on LLaVA over Pixtral (Pixtral-12B's
layout): each runs and gives the shapes the geometry says (a token per patch, the tower
pattern drawn per image, the sweeps on a replayed packed row)."""

import inspect

import pytest
import torch

from vlreg import StandardizedTransformer, analysis
from vlreg.pictures import overlay
from vlreg.testing import build
from vlreg.testing.conformance import image

pytest.importorskip("vlreg_mistral3", reason="vlreg-mistral3 serves the Pixtral tower and its layout")

PICTURE, OTHER = image(50, 30), image(50, 30, seed=7)


def test_every_analysis_helper_runs_and_draws():
    model = StandardizedTransformer(str(build("llava_pixtral")), task="image-text-to-text", dispatch=True, device="cpu",
                                    attn_implementation="eager")
    content = [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]
    prompt = model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                 tokenize=False)
    with model.trace(prompt, images=[PICTURE]):
        stream, clean = model.layers[0].layer_output.save(), model.logits.save()
    with model.trace(prompt, images=[PICTURE]):
        analysis.steer(model, [0], torch.ones(model.hidden_size), positions="image")
        steered = model.logits.save()
    with model.trace(prompt, images=[PICTURE]):
        analysis.skip_layers(model, 1, 1)
        skipped = model.logits.save()
    (geometry,) = model.vision.geometry(prompt, [PICTURE])
    tokens = geometry.tokens
    assert tokens == 2 * 4  # 50 x 30 resized onto 64 x 32 pixels: 2 rows of 4 patches
    patterns = analysis.tower_patterns(model, prompt, [PICTURE])
    occlusion = analysis.occlusion(model, prompt, [PICTURE], batch=8)
    found = {
        "logit_lens": analysis.logit_lens(model, prompt, [PICTURE], top=2).top_ids[0].shape[1] == tokens,
        "ablate_image": analysis.ablate_image(model, prompt, [PICTURE]).received.shape[0] == tokens,
        "occlusion": occlusion.scores.shape[0] == tokens,
        "patch_image": analysis.patch_image(model, prompt, [PICTURE], [OTHER]).effects.shape[0] == model.num_layers,
        "attention_to_images": analysis.attention_to_images(model, prompt, [PICTURE]).weights[0].shape[-1] == tokens,
        "tower_patterns": patterns.patterns[0].shape[-1] == geometry.grids[patterns.grids[0]].tokens == tokens,
        "token_id": analysis.token_id(model, "[IMG]") == model._module.config.image_token_id,
        "project_on_vocab": len(analysis.top_tokens(model, analysis.project_on_vocab(model, stream[0, -1]), k=3)) == 3,
        "next_token_probs": analysis.next_token_probs(model, prompt, [PICTURE]).shape[0] == model.vocab_size,
        "steer": not torch.equal(steered, clean),
        "skip_layers": not torch.equal(skipped, clean),
        "compare_streams": torch.allclose(analysis.compare_streams(model, model, "The quick brown fox"),
                                          torch.ones(model.num_layers, dtype=torch.float64)),
    }
    found["top_tokens"] = found["project_on_vocab"]
    helpers = {helper for helper in analysis.__all__ if inspect.isfunction(getattr(analysis, helper))}
    assert helpers == set(found), helpers ^ set(found)
    assert all(found.values()), [helper for helper, held in found.items() if not held]
    assert overlay(PICTURE, geometry, occlusion.scores).size == PICTURE.size
