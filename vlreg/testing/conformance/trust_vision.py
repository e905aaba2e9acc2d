"""Classes of silently wrong answers, checked on every vision family (issue 22, images).

A replayed tower cache that fed another image's features, a geometry that landed on an
invoke's padding, processor options dropped on the way to the processor, and the inputs
that used to fail deep inside (placeholders against images, arrays for geometry, ids that
move an image token). `VisionConformance` mixes this in.
"""

from __future__ import annotations

import collections
from typing import Any, ClassVar

import pytest
import torch

from ... import analysis
from ...core.errors import Unavailable
from .helpers import writable_stream


class VisionTrust:
    """Mixed into `VisionConformance`; also set ``processor_options``: processor options
    that change how many image tokens an image makes (``{"max_pixels": 56 * 56}`` on the
    Qwen line), checked against the processor; ``None`` where the tiny processor has no
    such option, and only an option every image processor takes (``do_normalize``, turned
    the other way) is."""

    processor_options: ClassVar[dict | None] = None

    def two_invokes(self, model: Any) -> list[tuple[tuple, dict]]:
        """Two invokes with images, the first prompt shorter (so left-padded in the batch)."""
        first, second = self.images()[0], self.images()[-1]
        longer = self.image_prompt(model, question="What is in this image? Describe the picture.")
        return [((self.image_prompt(model),), {"images": [first]}), ((longer,), {"images": [second]})]

    # -- the tower cache ---------------------------------------------------------

    def test_a_tower_cache_replays_only_into_its_own_images(self, model):
        """A cache made of one image refuses to replay into a trace of another of the same
        size (the tower's output would be the cached image's); into its own, it replays."""
        prompt, (picture,) = self.image_prompt(model), self.images()[:1]
        other = _other(picture)
        cache = model.vision.cache(prompt, [picture])
        with pytest.raises(ValueError, match="not 1 copy of the cached ones"):
            with model.trace(prompt, images=[other]):
                cache.replay()
                model.logits.save()
        with model.trace(prompt, images=[picture]):
            cache.replay()
            replayed = model.logits.save()
        with model.trace(prompt, images=[picture]):
            plain = model.logits.save()
        torch.testing.assert_close(replayed, plain)

    # -- generation steps --------------------------------------------------------

    def test_image_values_at_a_later_generation_step_are_refused(self, model):
        """After the first step of a generation the image's tokens are in the cache and the
        tower and the scatter do not run: an image value read at a later step is refused by
        name (nnsight would wait for a module never called, cut the loop short and drop
        the step's other values with a warning); at the first step it is served."""
        args, kwargs = self.order_input(model)
        with pytest.raises(Unavailable, match="generation step after the first"):
            with model.generate(*args, **kwargs, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
                for _ in tracer.iter[1:2]:
                    model.vision.image_features.save()
        first, later = [], []  # made outside the trace: names first bound inside one do not leave it
        with model.generate(*args, **kwargs, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
            for _ in tracer.iter[0:1]:
                first.append(model.vision.image_features.save())
            for _ in tracer.iter[1:2]:
                later.append(model.logits[:, -1].save())
        assert first[0].shape[0] > 0 and len(later) == 1

    # -- geometry inside a batch -------------------------------------------------

    def test_a_geometry_is_placed_inside_its_invoke(self, model):
        """A prompt's geometry, used in that prompt's invoke of a batch whose other prompt
        is longer, lands on its image tokens (moved by the padding); a geometry of another
        prompt is refused there."""
        if model.family.entry.not_in_stream():
            pytest.skip(f"{model.family.entry.not_in_stream()}: no positions to place")
        first, second = self.two_invokes(model)
        if not _declares_grids(model, *first[0], first[1]["images"]):
            return
        (geometry,) = model.vision.geometry(*first[0], first[1]["images"])
        (foreign,) = model.vision.geometry(*second[0], second[1]["images"])
        vector = torch.ones(model.hidden_size)
        out = writable_stream(model, model.prompt_layers)[0]

        def edit(at: Any) -> None:  # steering, or where the stream steer writes takes no write, every stream by hand
            if out == "layer_output":
                analysis.steer(model, [0], vector, positions=at)
            else:
                row, positions = at.placed(model)
                getattr(model.prompt_layers[0], out)[row, positions] += 1

        saved: list = []
        for steer in (False, True):
            with model.trace() as tracer:
                with tracer.invoke(*first[0], **first[1]):
                    mask = model.vision.image_token_mask.save()
                    if steer:
                        edit(geometry)
                    saved.append(getattr(model.prompt_layers[0], out).save())
                with tracer.invoke(*second[0], **second[1]):
                    pass
        moved = (saved[1] - saved[0]).flatten(2).abs().sum(-1) > 0
        assert torch.equal(moved, mask), "steering at the geometry did not land on the invoke's image tokens"
        with pytest.raises(ValueError, match="another prompt"):
            with model.trace() as tracer:
                with tracer.invoke(*first[0], **first[1]):
                    edit(foreign)
                    model.logits.save()
                with tracer.invoke(*second[0], **second[1]):
                    pass

    # -- processor options -------------------------------------------------------

    def test_processor_options_reach_the_processor(self, model):
        """An option given to a trace reaches the processor (the run is the run of the
        processor's encoding with it), `vision.geometry` takes the same options, and a
        keyword nothing takes is refused by name before the model runs."""
        prompt, images = self.image_prompt(model), self.images()[:1]
        normalizes = bool(getattr(model.processor.image_processor, "do_normalize", True))
        options = self.processor_options or {"do_normalize": not normalizes}
        encoding = dict(model.processor(text=prompt, images=images, **options, return_tensors="pt"))
        with model.trace(prompt, images=images, **options):
            mask = model.vision.image_token_mask.save()
            logits = model.logits.save()
        with model.trace(encoding):
            expected = model.logits.save()
        with model.trace(prompt, images=images):
            default = model.logits.save()
        torch.testing.assert_close(logits, expected)
        assert logits.shape != default.shape or not torch.equal(logits, default), f"{options} changed nothing"
        with pytest.raises(TypeError, match="not_an_option"):
            with model.trace(prompt, images=images, not_an_option=1):
                model.logits.save()
        if not _declares_grids(model, prompt, images):
            return
        geometry = model.vision.geometry(prompt, images, **options)
        if not model.family.entry.not_in_stream():
            assert sum(image.tokens for image in geometry) == int(mask.sum())
        with pytest.raises(TypeError, match="not_an_option"):
            model.vision.geometry(prompt, images, not_an_option=1)

    # -- inputs that used to fail deep inside ------------------------------------

    def test_placeholders_are_counted_against_images(self, model):
        """A prompt with more image placeholders than images, or fewer, is refused in
        vlreg's words before the model runs (where a prompt's images are a clip's frames,
        `Vision.clips`, any number of them is one clip)."""
        picture = self.images()[0]
        grids = _declares_grids(model, self.image_prompt(model), [picture])
        ran = _counting(model)
        cases = ((2, [picture]), (1, [picture, picture]))
        if model.vision.clips:  # a prompt's images are one clip's frames: two of them are a clip
            cases = cases[:1]
        if not model.family.entry.in_prompt:  # no placeholder (`Prefix`): each prompt takes one image
            cases = cases[1:]
        for placeholders, pictures in cases:
            with pytest.raises(ValueError, match="placeholder"):
                with model.trace(self.image_prompt(model, images=placeholders), images=pictures):
                    model.logits.save()
            if grids:
                with pytest.raises(ValueError, match="placeholder"):
                    model.vision.geometry(self.image_prompt(model, images=placeholders), pictures)
        assert not ran(), "the model ran before the refusal"

    def test_geometry_takes_every_image_type_a_trace_takes(self, model):
        """A numpy array (height x width x 3) or a torch tensor (3 x height x width) has the
        geometry of the same image as PIL; where the processor takes PIL images only
        (`Vision.takes_arrays`), the trace and the geometry both refuse them, saying how to
        convert, before the processor runs."""
        import numpy

        prompt, (picture,) = self.image_prompt(model), self.images()[:1]
        if not _declares_grids(model, prompt, [picture]):
            return
        (plain,) = model.vision.geometry(prompt, [picture])
        array = numpy.asarray(picture)
        given_forms = (array, torch.from_numpy(array).permute(2, 0, 1).contiguous())
        if not model.vision.takes_arrays:
            ran = _counting(model)
            for given in given_forms:
                with pytest.raises(TypeError, match="PIL.Image.fromarray"):
                    model.vision.geometry(prompt, [given])
                with pytest.raises(TypeError, match="PIL.Image.fromarray"):
                    with model.trace(prompt, images=[given]):
                        model.logits.save()
            assert not ran(), "the model ran before the refusal"
            return
        for given in given_forms:
            (other,) = model.vision.geometry(prompt, [given])
            assert other.size == plain.size and torch.equal(other.positions, plain.positions)
            torch.testing.assert_close(other.boxes, plain.boxes, equal_nan=True)

    def test_input_ids_that_move_an_image_token_are_refused_first(self, model):
        """Assigning ``model.input_ids`` that turn an image token into text is refused at
        the model's inputs, before the tower runs. Where the prompt holds no image token
        (`Prefix`: the image's go before it), every token of it may change."""
        if not model.family.entry.in_prompt:
            return
        tower = _counting(model, model.vision)
        with pytest.raises(ValueError, match="image tokens"):
            with model.trace(self.image_prompt(model), images=self.images()[:1]):
                ids = model.input_ids
                mask = model.vision.image_token_mask
                changed = ids.clone().as_subclass(torch.Tensor)
                changed[tuple(mask.as_subclass(torch.Tensor).nonzero()[0].tolist())] = int(ids[0, -1])
                model.input_ids = changed
                model.logits.save()
        assert not tower(), "the tower ran before the refusal"


def _other(picture: Any) -> Any:
    """Another image of ``picture``'s size."""
    from PIL import ImageOps

    return ImageOps.invert(picture.convert("RGB"))


def _counting(model: Any, envoy: Any = None) -> Any:
    """Count forwards of ``envoy``'s module (the whole model's by default) from now; call
    the result to read the count (and stop counting)."""
    module = (envoy or model)._module
    counts: collections.Counter = collections.Counter()
    hook = module.register_forward_pre_hook(lambda *_: counts.update(["run"]))

    def read() -> int:
        hook.remove()
        return counts["run"]

    return read


def _declares_grids(model: Any, prompt: str, images: list) -> bool:
    """Whether the family declares its image grids. Where it does not (a new plugin's
    skeleton, until its author works them out), `vision.geometry` is refused, naming the
    hook to implement, and a check of the geometry has nothing else to check."""
    if model.family.image_grids is not None:
        return True
    with pytest.raises(Unavailable, match="declares no image grids"):
        model.vision.geometry(prompt, images)
    return False
