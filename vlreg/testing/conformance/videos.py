"""The video side of the conformance suite: a video's mask and features, or their refusal.

A family that writes a video's features in at a scatter of its own declares it on its entry
(`vlreg.plugin.VIDEO_SCATTER`); every other family refuses ``vision.video_features`` by name.
Either way is checked here, on every family: a served video value is exactly what the text
model receives at the video tokens, apart from the image's, and an edit of it lands; a
refused one raises `Unavailable` with its reason before the model runs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch

from ..kit import chat
from .helpers import image, refused_before_running


#: Why the checks of a served video skip: the family serves none (its refusal is checked instead).
NO_VIDEOS = ("this family serves no video values (the first video check asserts their refusal, by name, before "
             "the model runs)")


class VideoConformance:
    """Set ``video_frames`` (width, height, frames) to the video the tests pass: small, and
    as many frames as the family's video processor takes without sampling (the Qwen line's
    temporal patch covers 2)."""

    video_frames: ClassVar[tuple[int, int, int]] = (56, 56, 4)

    def video(self, seed: int = 0) -> list:
        """A video as a list of PIL frames, each its own random image."""
        width, height, frames = self.video_frames
        return [image(width, height, seed=seed * 100 + index) for index in range(frames)]

    def serves_videos(self, model: Any) -> bool:
        return not model.vision.no_videos() and not model.support().get("vision.video_features")

    def test_video_features_are_what_block_0_receives_at_the_video_tokens(self, model):
        """With an image and a video in one prompt, each value is at its own tokens: the
        masks are apart, ``layers[0].input`` holds the image's features at the image's
        tokens and the video's at the video's."""
        if not self.serves_videos(model):
            # refused by name where the model takes videos; left out of support() where it takes none
            assert model.support().get("vision.video_features") or model.vision.no_videos()
            with refused_before_running(model, "video"):
                with model.trace(self.image_prompt(model), images=self.images()[:1]):
                    model.vision.video_features.save()
            return
        prompt = chat(model, "video", "image", text=self.question)
        with model.trace(prompt, images=self.images()[:1], videos=[self.video()], **(self.processor_options or {})):
            images = model.vision.image_token_mask.save()
            videos = model.vision.video_token_mask.save()
            image_features = model.vision.image_features.save()
            video_features = model.vision.video_features.save()
            first = model.layers[0].input.save()
        assert videos.any() and images.any() and not (videos & images).any()
        assert int(videos.sum()) == video_features.shape[0] and video_features.shape[1] == model.hidden_size
        assert torch.equal(first[videos], video_features)
        assert torch.equal(first[images], image_features)

    def test_an_edit_of_the_video_features_reaches_the_logits(self, model):
        """Zeroing a video's features lands at its tokens in block 0's input and changes the
        logits; the image's tokens keep their features. A prompt with no video refuses the
        value, naming how to pass one."""
        if not self.serves_videos(model):
            pytest.skip(NO_VIDEOS)
        prompt, video = chat(model, "video", text=self.question), [self.video(seed=1)]
        with model.trace(prompt, videos=video, **(self.processor_options or {})):
            clean = model.logits[:, -1].save()
        with model.trace(prompt, videos=video, **(self.processor_options or {})):
            mask = model.vision.video_token_mask.save()
            model.vision.video_features[:] = 0
            first = model.layers[0].input.save()
            edited = model.logits[:, -1].save()
        assert (first[mask] == 0).all()
        assert not torch.allclose(clean, edited)
        with refused_before_running(model, r"no video.*videos=\[\.\.\.\]"):
            with model.trace(self.image_prompt(model), images=self.images()[:1]):
                model.vision.video_features.save()

    def test_each_invoke_reads_its_own_video(self, model):
        """Two invokes, each a video prompt (different videos): each reads its own video's
        features (``"video_tokens"``), equal to a trace of that prompt alone."""
        if not self.serves_videos(model):
            pytest.skip(NO_VIDEOS)
        prompt, options = chat(model, "video", text=self.question), self.processor_options or {}
        videos = [self.video(seed=2), self.video(seed=3)]
        alone = []
        for video in videos:
            with model.trace(prompt, videos=[video], **options):
                alone.append(model.vision.video_features.save())
        together = []
        with model.trace() as tracer:
            for video in videos:
                with tracer.invoke(prompt, videos=[video], **options):
                    together.append(model.vision.video_features.save())
        for one, other in zip(together, alone):
            torch.testing.assert_close(one, other)
        assert not torch.allclose(together[0], together[1])

    def test_the_video_features_gradient_is_block_0s_at_the_video_tokens(self, model):
        """``vision.video_features.grad`` is the gradient of the metric at what the text model
        receives there: block 0's input gradient at the video tokens (the features are copied
        into those rows as they are), as autograd computes it."""
        if not self.serves_videos(model):
            pytest.skip(NO_VIDEOS)
        prompt = chat(model, "video", text=self.question)
        with model.trace(prompt, videos=[self.video(seed=4)], **(self.processor_options or {})):
            mask = model.vision.video_token_mask.save()
            features, first = model.vision.video_features, model.layers[0].input
            with model.logits[:, -1].sum().backward():
                at_block = first.grad.save()  # the backward runs from the logits down: block 0's first
                at_features = features.grad.save()
        assert at_features.shape == (int(mask.sum()), model.hidden_size) and bool(at_features.abs().sum() > 0)
        assert torch.equal(at_block[mask], at_features)
