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

from ...core.errors import Unavailable
from ...core.images.video_geometry import kept_frames

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
    #: Processor options the video traces add to ``processor_options``, as a user passes them
    #: with ``videos=`` (Muse's processor writes a video's prompt from metadata it returns only
    #: with ``return_metadata=True``).
    video_options: ClassVar[dict] = {}
    #: Whether each row of the processor's ``video_grid_thw`` is a chunk of ``t`` frames the
    #: tower pools into one ``h / merge`` x ``w / merge`` grid (Kimi K2.5's), not ``t`` temporal
    #: patches of ``temporal_patch_size`` frames, a grid each (the Qwen line's).
    pooled_video_chunks: ClassVar[bool] = False
    #: Whether each row of a frame's tokens ends with a newline token over no pixels (HY-V4-VL's
    #: merger writes one), which the count of a video's tokens from its patch grid then adds.
    video_row_newlines: ClassVar[bool] = False

    def options_with_videos(self) -> dict:
        return {**(self.processor_options or {}), **self.video_options}

    def video(self, seed: int = 0) -> list:
        """A video as a list of PIL frames, each its own random image."""
        width, height, frames = self.video_frames
        return [image(width, height, seed=seed * 100 + index) for index in range(frames)]

    def serves_videos(self, model: Any) -> bool:
        return not model.vision.no_videos() and not model.support().get("vision.video_features")

    def test_video_features_are_what_block_0_receives_at_the_video_tokens(self, model):
        """With an image and a video in one prompt, each value is at its own tokens: the
        masks are apart, the stream entering the blocks (``prompt_entry``: block 0's input, or
        what the text model is handed where it scales it) holds the image's features at the
        image's tokens and the video's at the video's."""
        if not self.serves_videos(model):
            # refused by name where the model takes videos; left out of support() where it takes none
            assert model.support().get("vision.video_features") or model.vision.no_videos()
            with refused_before_running(model, "video"):
                with model.trace(self.image_prompt(model), images=self.images()[:1]):
                    model.vision.video_features.save()
            return
        prompt, options = chat(model, "video", "image", text=self.question), self.options_with_videos()
        media = {"images": self.images()[:1], "videos": [self.video()]}
        if model.family.entry.apart:  # the forward cannot hold both (GLM's): refused, and the video read alone
            with refused_before_running(model, "images and videos in one trace", ValueError):
                with model.trace(prompt, **media, **options):
                    model.logits.save()
            prompt, media = chat(model, "video", text=self.question), {"videos": media["videos"]}
        with model.trace(prompt, **media, **options):
            images = model.vision.image_token_mask.save()
            videos = model.vision.video_token_mask.save()
            if "images" in media:
                image_features = model.vision.image_features.save()
            video_features = model.vision.video_features.save()
            first = model.prompt_entry().save()
        assert videos.any() and images.any() == ("images" in media) and not (videos & images).any()
        assert int(videos.sum()) == video_features.shape[0] and video_features.shape[1] == model.hidden_size
        assert torch.equal(first[videos], video_features)
        if "images" in media:
            assert torch.equal(first[images], image_features)

    def test_an_edit_of_the_video_features_reaches_the_logits(self, model):
        """Zeroing a video's features lands at its tokens in block 0's input and changes the
        logits; the image's tokens keep their features. A prompt with no video refuses the
        value, naming how to pass one."""
        if not self.serves_videos(model):
            pytest.skip(NO_VIDEOS)
        prompt, video = chat(model, "video", text=self.question), [self.video(seed=1)]
        with model.trace(prompt, videos=video, **self.options_with_videos()):
            clean = model.logits[:, -1].save()
        with model.trace(prompt, videos=video, **self.options_with_videos()):
            mask = model.vision.video_token_mask.save()
            model.vision.video_features[:] = 0
            first = model.prompt_entry().save()
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
        prompt, options = chat(model, "video", text=self.question), self.options_with_videos()
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
        with model.trace(prompt, videos=[self.video(seed=4)], **self.options_with_videos()):
            mask = model.vision.video_token_mask.save()
            features, first = model.vision.video_features, model.prompt_entry()
            with model.logits[:, -1].sum().backward():
                at_block = first.grad.save()  # the backward runs from the logits down: block 0's first
                at_features = features.grad.save()
        assert at_features.shape == (int(mask.sum()), model.hidden_size) and bool(at_features.abs().sum() > 0)
        assert torch.equal(at_block[mask], at_features)

    def test_the_towers_values_on_a_video_alone_are_the_videos_call(self, model):
        """On a trace of a video alone the tower's one call is the video's: ``vision.layers[0]``
        (``vision.video_tower.layers[0]`` where the frames run through a tower of their own)
        serves what that block received there (a hook on the module says so), an edit of its
        output reaches the video's features, and ``support()["videos"]`` says how the tower's
        values are told apart (a trace with images too reads the images' call). Where the
        family runs a video through a tower without standard names, its claim says so and
        the tower's values refuse before the model runs."""
        if not self.serves_videos(model) or not model.vision.num_layers:
            pytest.skip(NO_VIDEOS if not self.serves_videos(model) else "this vision part serves no blocks")
        prompt, video, options = chat(model, "video", text=self.question), [self.video(seed=5)], self.options_with_videos()
        if model.family.sentences.get("videos"):
            assert model.support()["videos"] == model.family.sentences["videos"]
            with refused_before_running(model, "only videos"):
                with model.trace(prompt, videos=video, **options):
                    model.vision.layers[0].input.save()
            return
        assert "the video's call's" in model.support()["videos"]
        # a video's frames run through the tower, or through a tower of their own (`Scatter.video_tower`)
        tower = model.vision.__dict__.get("video_tower") or model.vision
        block, calls = tower.layers[0], []
        handle = block._module.register_forward_pre_hook(lambda module, args, kwargs: calls.append(
            (args[0] if args else next(iter(kwargs.values()))).detach().clone()), with_kwargs=True)
        try:
            with model.trace(prompt, videos=video, **options):
                served = block.input.save()
                clean = model.vision.video_features.save()
        finally:
            handle.remove()
        assert len(calls) == 1 and torch.equal(served, calls[0])  # the tower ran once: the video's call
        with model.trace(prompt, videos=video, **options):
            block.layer_output[:] = 0
            edited = model.vision.video_features.save()
        assert not torch.allclose(clean, edited)

    def test_the_geometry_places_each_video_token_in_its_frames(self, model):
        """``vision.geometry(prompt, videos=[...])``: each video token's frames and box, at the
        positions the trace's video mask marks, every frame passed covered, the boxes within the
        frame; where the processor reports a grid of temporal patches (``video_grid_thw``), the
        grids patch after patch, each patch's covering its ``temporal_patch_size`` frames (one
        grid a patch, or one a window where the tower runs in windows, Ovis 2.5's; its ``t``
        counting temporal patches, or frames where the projector folds them, ERNIE 4.5-VL's), or
        chunk after chunk, each covering the frames it pools (`pooled_video_chunks`), of the frames
        the processor kept (its own sampling, read from its metadata), as many tokens as it makes.
        A family that declares no video grids refuses ``videos=`` by name."""
        if not self.serves_videos(model):
            pytest.skip(NO_VIDEOS)
        prompt, video, options = chat(model, "video", text=self.question), self.video(seed=6), self.options_with_videos()
        if model.family.video_grids is None:
            with pytest.raises(Unavailable, match="declares no video grids"):
                model.vision.geometry(prompt, videos=[video], **options)
            pytest.skip("this family declares no video grids (refused by name, checked above)")
        (geometry,) = model.vision.geometry(prompt, videos=[video], **options)
        with model.trace(prompt, videos=[video], **options):
            mask = model.vision.video_token_mask.save()
            features = model.vision.video_features.save()
        assert torch.equal(mask[geometry.row].nonzero()[:, 0], geometry.positions)
        assert features[geometry.features].shape[0] == geometry.tokens == int(mask.sum())
        frames, boxes, (width, height) = geometry.frames, geometry.boxes, video[0].size
        assert geometry.size == (width, height) and frames.shape == (geometry.tokens, 2)
        assert set(range(len(video))) == {k for first, last in frames.tolist() for k in range(first, last + 1)}
        over = boxes[~boxes.isnan().any(-1)]
        assert len(over) and (over[:, :2] >= 0).all() and (over[:, 2] <= width + 1e-6).all() and (over[:, 3] <= height + 1e-6).all()
        encoding = model.processor(text=[prompt], videos=[video], return_tensors="pt",
                                   **{**options, "return_metadata": True})
        if "video_grid_thw" in encoding:
            processor, kept = model.processor.video_processor, kept_frames(encoding, 0, video)
            fold, merge = processor.temporal_patch_size, processor.merge_size
            if self.pooled_video_chunks:  # a row a chunk of frames, pooled into one grid
                chunks = encoding["video_grid_thw"].tolist()
                starts = [sum(frames for frames, _, _ in chunks[:k]) for k in range(len(chunks))]
                tokens = sum(rows * columns for _, rows, columns in chunks) // merge ** 2
                expected = [(kept[start], kept[start + frames - 1]) for start, (frames, _, _) in zip(starts, chunks)]
            else:  # a grid a temporal patch of `temporal_patch_size` frames
                (slices, rows, columns), = encoding["video_grid_thw"].tolist()
                per_patch = rows // merge * (columns // merge + self.video_row_newlines)
                patches = slices if geometry.tokens == slices * per_patch else slices // fold
                tokens = patches * per_patch
                expected = [(kept[k * fold], kept[min(k * fold + fold, len(kept)) - 1]) for k in range(patches)]
            assert geometry.tokens == tokens
            covered = [grid.frames for grid in geometry.grids]  # several grids a patch where it runs in windows
            assert [one for k, one in enumerate(covered) if not k or one != covered[k - 1]] == expected


def frame_helper_checks(case: Any, model: Any) -> dict:
    """`AnalysisConformance`'s checks of the frame helpers (`vlreg.analysis.videos`): where the
    family serves a video and declares its grids, each helper's scores have one column a grid
    (or a token) of the video's tokens, and patching a frame gives one effect a block;
    elsewhere each refuses before the model runs, naming ``videos=``."""
    served = (not model.vision.no_videos() and not model.support().get("vision.video_features")
              and model.family.video_grids is not None)
    width, height, frames = case.video_frames  # the family's video, as the video checks pass it
    video = [image(width, height, seed=index) for index in range(frames)]
    other = [image(width, height, seed=50 + index) for index in range(frames)]
    options = case.options_with_videos()

    def check(helper: Any, holds: Any, *more: Any) -> bool:
        if not served:
            with refused_before_running(model, r"videos="):
                helper(model, case.image_prompt(model), video, *more)
            return True
        found = helper(model, chat(model, "video", text=case.question), video, *more, **options)
        return bool(holds(found))

    def per_grid(found: Any) -> bool:
        return found.scores.shape[-1] == len(found.geometry.grids) == len(found.frames) and found.scores.isfinite().all()

    def per_token(found: Any) -> bool:
        return found.scores.shape == (found.geometry.tokens,) and found.frames.shape == (found.geometry.tokens, 2) \
            and found.scores.isfinite().all()

    def per_block(found: Any) -> bool:
        return found.effects.shape == (len(model.prompt_layers),) and found.patched.shape[0] == len(found.layers) \
            and found.effects.isfinite().all()

    from ... import analysis

    return {"attention_to_frames": lambda: check(analysis.attention_to_frames, per_grid),
            "occlude_frames": lambda: check(analysis.occlude_frames, per_grid),
            "occlude_video_tokens": lambda: check(analysis.occlude_video_tokens, per_token),
            "patch_frame": lambda: check(analysis.patch_frame, per_block, other)}
