"""Conformance of `vlreg.analysis` on a family: every helper runs on its checkpoint and
gives the shapes the family's geometry says, or refuses as the family declares."""

from __future__ import annotations

import inspect
from typing import Any, Callable, ClassVar

import torch

from ... import analysis
from ...analysis.saliency import pixel_refusal
from ...core.envoys.readout import refused_lens
from ..sampling import repeat, sample
from .helpers import image, refused_before_running
from .videos import frame_helper_checks

#: How many of the helpers a family runs (not refuses) are checked in one run.
HELPERS_A_RUN = 6


class AnalysisConformance:
    """Mix in before `VisionConformance` to run every function of ``vlreg.analysis.__all__``
    on the class's model, prompt and first image. A helper added to ``vlreg.analysis``
    fails the test until it is checked here. Also set:

    * ``analysis_refuses``: helpers the family refuses, each with a fragment (a pattern) of
      the reason its `vlreg.Unavailable` gives, e.g. ``{"tower_patterns": "has no blocks"}``:
      each must raise that, before the model runs;
    * ``image_token``: the image token as a user writes it (by default the tokenizer's
      name for the model's ``image_token_id``).

    Occlusion runs in two chunks of copies (the chunks' scores must join in order) and the
    image patched in is the first image's size. Every declared refusal is checked each run (it
    costs nothing: it is raised before the model runs); of the helpers that run, `HELPERS_A_RUN`
    are, drawn from the run's seed (`vlreg.testing.sampling`: over runs, all of them)."""

    analysis_refuses: ClassVar[dict[str, str]] = {}
    image_token: ClassVar[str | None] = None

    def test_every_analysis_helper_runs_or_says_why_not(self, model):
        checks = self.analysis_checks(model)
        helpers = {name for name in analysis.__all__ if inspect.isfunction(getattr(analysis, name))}
        assert helpers <= set(checks), f"helpers the conformance suite does not check: {helpers - set(checks)}"
        assert set(self.analysis_refuses) <= helpers, "a refusal declared for no helper"
        for helper in sorted(self.analysis_refuses):
            with refused_before_running(model, self.analysis_refuses[helper]):
                checks[helper]()
        running = sorted(helpers - set(self.analysis_refuses))
        wrong = [helper for helper in sample(running, HELPERS_A_RUN, f"{type(self).__name__} analysis")
                 if not checks[helper]()]
        assert not wrong, f"helpers whose results disagree with the model or its geometry: {wrong} ({repeat()})"

    def analysis_checks(self, model: Any) -> dict[str, Callable[[], bool]]:
        """Per helper, a call as a user makes it and whether its result holds."""
        prompt, images = self.image_prompt(model), self.images()[:1]
        other = image(*images[0].size, seed=7)
        (geometry,) = model.vision.geometry(prompt, images)
        tokens = geometry.tokens
        with model.trace(prompt, images=images):
            stream = model.layers[0].layer_output.save()
            clean = model.logits.save()
        stream = stream[0, -1]

        def changes_logits(edit: Callable[[], None]) -> bool:
            with model.trace(prompt, images=images):
                edit()
                logits = model.logits.save()
            return logits.shape == clean.shape and not torch.equal(logits, clean)

        def tower_patterns() -> bool:
            found = analysis.tower_patterns(model, prompt, images)
            return found.patterns[0].shape[-1] == geometry.grids[found.grids[0]].tokens

        def token_id() -> bool:
            wanted = model.image_token_id
            if wanted is None:  # no image token (`Prefix`): a special token of the tokenizer's
                wanted = model.tokenizer.convert_tokens_to_ids(model.tokenizer.all_special_tokens[0])
            name = self.image_token or model.tokenizer.convert_ids_to_tokens(wanted)
            return analysis.token_id(model, name) == wanted

        def top_tokens() -> bool:  # of the lens, or of the logits where the family refuses the lens
            logits = clean[0, -1] if refused_lens(model) is not None else analysis.project_on_vocab(model, stream)
            found = analysis.top_tokens(model, logits, k=3)
            return len(found) == 3 and found[0][0] == model.tokenizer.convert_ids_to_tokens(int(logits.argmax()))

        def next_token_probs() -> bool:
            probabilities = analysis.next_token_probs(model, prompt, images)
            return probabilities.shape == (model.vocab_size,) and abs(float(probabilities.sum()) - 1) < 1e-3

        def compare_streams() -> bool:
            similarity = analysis.compare_streams(model, model, "The quick brown fox")
            return torch.allclose(similarity, torch.ones(model.num_layers, dtype=similarity.dtype))

        def attribution_patching() -> bool:
            found = analysis.attribution_patching(model, prompt, images, [other])
            effects = found.of_image(0)
            return effects.shape == (len(model.prompt_layers), tokens) and bool(effects.isfinite().all()) \
                and bool(found.effects["layer_output"].any())

        pixels = pixel_refusal(model) is None

        def saliency() -> bool:
            if not pixels:  # refused in vlreg's words before anything runs
                with refused_before_running(model, "gradients at the pixels are unavailable"):
                    analysis.saliency(model, prompt, images)
            found = analysis.saliency(model, prompt, images, pixels=pixels)
            sized = not pixels or found.pixels[0].shape == (images[0].size[1], images[0].size[0])
            return found.tokens[0].shape == (tokens,) and sized and bool(found.tokens[0].isfinite().all())

        def integrated_gradients() -> bool:
            # the path's points one a forward and two a forward must agree (the batch of copies is
            # the points run alone); completeness is tests/test_saliency.py's, on families with no
            # jump along the path (a router's top-k switching, a normalized zero)
            at = "pixels" if pixels else "tokens"
            alone, together = (analysis.integrated_gradients(model, prompt, images, at=at, baseline=[other], steps=2,
                                                             batch=batch) for batch in (1, 2))
            first, second = alone.attributions[0].float(), together.attributions[0].float()
            scale = float(first.abs().max())
            return together.per_token(0).shape == (tokens,) and scale > 0 and bool(first.isfinite().all()) \
                and torch.allclose(first, second, rtol=2e-2, atol=2e-2 * scale)

        def relevancy() -> bool:
            found = analysis.relevancy(model, prompt, images)
            # the identity's diagonal plus what the blocks add: the position's own relevancy is at least 1
            return found.tokens[0].shape == (tokens,) and bool(found.sequence.isfinite().all()) \
                and bool((found.sequence >= 0).all()) and float(found.sequence[found.position]) >= 1

        def ablate_image() -> bool:
            found = analysis.ablate_image(model, prompt, images)  # zeroed: what the entry makes of zeros
            with model.trace(prompt, images=images):
                embeddings = model.token_embeddings.save()
            at = found.geometry[0]
            zeros = model.family.entry.received(model, embeddings[at.row, at.positions], torch.zeros_like(found.received))
            return found.received.shape[0] == tokens and torch.equal(found.received, zeros) \
                and float(found.effect.abs().max()) > 0

        batch = max(1, (tokens + 1) // 2)
        return {
            "logit_lens": lambda: analysis.logit_lens(model, prompt, images, top=2).top_ids[0].shape[1] == tokens,
            "ablate_image": ablate_image,
            "occlusion": lambda: analysis.occlusion(model, prompt, images, batch=batch).scores.shape == (tokens,),
            "patch_image": lambda: analysis.patch_image(model, prompt, images, [other]).effects.shape
            == (model.num_layers,),
            "attention_to_images": lambda: analysis.attention_to_images(model, prompt, images).weights[0].shape[-1]
            == tokens,
            "tower_patterns": tower_patterns,
            "token_id": token_id,
            "project_on_vocab": lambda: analysis.project_on_vocab(model, stream).shape == (model.vocab_size,),
            "top_tokens": top_tokens,
            "next_token_probs": next_token_probs,
            "steer": lambda: changes_logits(lambda: analysis.steer(model, [0], torch.ones(model.hidden_size),
                                                                   positions="image")),
            "skip_layers": lambda: changes_logits(lambda: analysis.skip_layers(model, 1, 1)),
            "compare_streams": compare_streams,
            "attribution_patching": attribution_patching,
            "saliency": saliency,
            "integrated_gradients": integrated_gradients,
            "relevancy": relevancy,
            **frame_helper_checks(self, model),
        }
