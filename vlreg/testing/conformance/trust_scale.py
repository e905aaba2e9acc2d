"""Classes of silently wrong answers at scale, checked on every vision family (issue 33).

A collect store that mixed an image with its batch neighbours (a processor padding a
batch's pixels, which a VQ encoder saw), a float16 store holding inf where the model's
value was finite, thin arrays read with their rows as colours, images a processor or
tower fails on deep inside, placeholders without images, and offload maps transformers
runs that failed in vlreg. Each check is cheap: two images, sampled sizes, one offloaded
load. `VisionConformance` mixes this in.
"""

from __future__ import annotations

import warnings
import zlib
from typing import Any, ClassVar

import numpy
import pytest
import torch
from PIL import Image

from .helpers import image

#: Thin sizes (width, height), as a hostile user passes them: arrays 1, 3 or 4 rows tall
#: were read channels first. Each family takes two, chosen by its class's name.
THIN = ((40, 3), (40, 4), (3, 40), (40, 1), (1, 40), (64, 3))
#: Tiny and far-from-square sizes, which crashed inside transformers on some families (the
#: Qwen processors' resize refuses a side over 200 times the other).
SMALL = ((1, 1), (2, 2), (16, 16), (200, 3), (1, 201))


def close(value: torch.Tensor, want: torch.Tensor) -> None:
    """Equal up to 1e-4 of ``want``'s largest magnitude: a batch pads the prompts, which
    moves what a block's matrix products sum, not what they compute."""
    scale = max(1.0, float(want.abs().max())) if want.numel() else 1.0
    torch.testing.assert_close(value.float(), want.float(), atol=1e-4 * scale, rtol=1e-4)


class ScaleTrust:
    """Mixed into `VisionConformance`; also set ``collect_sizes``: the two image sizes a
    store is collected of (of different sizes, so a batch pads), where the class's
    ``image_sizes`` do not give two; ``on_disk``: the standard name of the module an
    offloaded load puts on disk (the tower; where transformers' own forward cannot run
    with it there, another it can: Mllama's tower moves its pixels to its first weight's
    device, the meta device when offloaded)."""

    collect_sizes: ClassVar[tuple[tuple[int, int], ...] | None] = None
    on_disk: ClassVar[str] = "vision"

    def two_sizes(self) -> list[tuple[int, int]]:
        if self.collect_sizes:
            return list(self.collect_sizes)
        first = self.image_sizes[0]
        other = next((size for size in self.image_sizes[1:] if size != first), None)
        return [first, other or ((first[1], first[0]) if first[0] != first[1] else (first[0], first[1] // 2))]

    def sampled(self, sizes: tuple, count: int) -> list:
        start = zlib.crc32(type(self).__name__.encode()) % len(sizes)
        return [sizes[(start + step) % len(sizes)] for step in range(count)]

    # -- collect ---------------------------------------------------------------

    def test_a_collect_store_is_each_images_own_trace(self, model, tmp_path):
        """Two images of different sizes collected in one batch: each image's rows are a
        trace of it alone (a processor padding pixels must not show an image its
        neighbour's padding); a float16 store is the same rows in float16, finite, or
        refused naming the value."""
        from ...collect import collect, open_store
        from ...collect.sites import _not_in_stream

        pictures = {f"image{i}": image(width, height, seed=i) for i, (width, height) in enumerate(self.two_sizes())}
        prompt = self.image_prompt(model)
        values = ["vision.image_features"]
        if "encoder" in model.__dict__:
            values.append("encoder.layers[0].layer_output")
        elif _not_in_stream(model) is None:
            values.append("layers[0].input")
        collect(model, values, pictures, tmp_path / "store", prompt=prompt, batch=2, progress=False)
        store = open_store(tmp_path / "store")
        (full,) = set(store.prompts.values())
        for name, picture in pictures.items():
            alone = []  # made outside the trace: names first bound in a comprehension inside one do not leave it
            with torch.no_grad(), model.trace(full, images=[picture]):
                mask = model.vision.image_token_mask.save()
                for value in values:
                    alone.append(_value(model, value).save())
            rows = store.index.rows(name)
            grids = model.family.image_grids is not None  # else the boxes are NaN (a new plugin's skeleton)
            (geometry,) = model.vision.geometry(full, [picture]) if grids else (None,)
            for value, own in zip(values, alone):
                if value != "vision.image_features":
                    own = own[mask]
                elif own.dim() == 3:  # cross-attention states: the image's positions
                    own = own[0, geometry.positions]
                close(store[value][rows], own)
            boxes = geometry.boxes.float() if grids else torch.full((len(store.index.box[rows]), 4), float("nan"))
            assert torch.equal(store.index.box[rows].nan_to_num(-1), boxes.nan_to_num(-1))
        if _not_in_stream(model) is not None:  # cross-attention: the stream is collected at the text's tokens
            _text_rows_are_each_prompts_own(model, pictures, prompt, tmp_path / "text")
        try:
            collect(model, values, pictures, tmp_path / "half", prompt=prompt, batch=2, dtype="float16", progress=False)
        except ValueError as error:
            assert "past float16's largest value" in str(error)
            return
        half = open_store(tmp_path / "half")
        for value in values:
            assert half[value][:].isfinite().all() and torch.equal(half[value][:], store[value][:].to(torch.float16))

    def test_what_collect_refuses_by_name_says_why(self, model, tmp_path):
        """A value under a part the family refuses by name names the family's reason; on an
        encoder-decoder, the decoder's values (which run over the output, not the prompt)
        are refused naming the encoder's."""
        from ...collect import collect

        pictures = {"image": self.images()[0]}
        refused = [(f"{row}[0].layer_output", reason) for row, reason in model.family.sentences.items()
                   if row.endswith("layers")]
        if "encoder" in model.__dict__:
            refused.append(("layers[0].layer_output", "encoder.layers"))
        for value, reason in refused:
            with pytest.raises(ValueError) as caught:
                collect(model, [value], pictures, tmp_path / "refused", prompt=self.image_prompt(model), progress=False)
            assert reason[:60] in str(caught.value)
            assert not (tmp_path / "refused").exists()

    # -- what images= takes ------------------------------------------------------

    def test_arrays_of_every_layout_and_size_have_the_geometry_of_the_pil_image(self, model):
        """A numpy array (height x width x 3) and a torch tensor (3 x height x width) of a thin
        image, 1, 3 or 4 pixels tall or wide, are the PIL image's: the same geometry, and
        the same features; a size the family refuses is refused in every layout."""
        import numpy

        if not model.vision.takes_arrays:
            return  # refused as arrays, checked by test_geometry_takes_every_image_type_a_trace_takes
        prompt = self.image_prompt(model)
        grids = model.family.image_grids is not None
        for index, size in enumerate(self.sampled(THIN, 2)):
            picture = image(*size, seed=index)
            pixels = numpy.asarray(picture)
            layouts = (picture, pixels, torch.from_numpy(pixels.copy()).permute(2, 0, 1))
            if model.vision.image_refusal(*size):
                for given in layouts:
                    with pytest.raises(ValueError, match="too small or too thin"):
                        with model.trace(prompt, images=[given]):
                            model.logits.save()
                continue
            if grids:
                (plain,) = model.vision.geometry(prompt, [picture])
                assert plain.size == size
                for given in layouts[1:]:
                    (other,) = model.vision.geometry(prompt, [given])
                    assert other.size == size and torch.equal(other.positions, plain.positions)
                    torch.testing.assert_close(other.boxes, plain.boxes, equal_nan=True)
            if index == 0:
                features = []
                for given in layouts:
                    with torch.no_grad(), model.trace(prompt, images=[given]):
                        features.append(model.vision.image_features.save())
                for other in features[1:]:
                    assert torch.equal(other, features[0])

    def test_grey_transparent_and_16_bit_images_are_their_rgb_image(self, model):
        """A PIL image of another mode than RGB, a uint8 grey or RGBA array, a flipped view:
        the image of its RGB conversion (grey repeated, transparency over white, 16 bits
        scaled to 8), on every processor (some convert nothing and failed on any of them, a
        16-bit one reached the model all white). Each family takes three of the forms."""
        prompt = self.image_prompt(model)
        forms = [form for form in _FORMS if model.vision.takes_arrays or form[0].startswith("PIL")]
        for name, given, reference in self.sampled(tuple(forms), 3):
            picture = image(48, 40, seed=3)
            pixels = numpy.asarray(picture)
            alpha = numpy.concatenate([pixels, numpy.full((*pixels.shape[:2], 1), 128, numpy.uint8)], -1)
            made = {"rgba": Image.fromarray(alpha, "RGBA"), "grey": picture.convert("L")}
            with torch.no_grad(), model.trace(prompt, images=[reference(picture, made)]):
                want = model.vision.image_features.save()
            with torch.no_grad(), model.trace(prompt, images=[given(picture, made)]):
                got = model.vision.image_features.save()
            assert torch.equal(got, want), name

    def test_tiny_and_thin_images_run_or_are_refused_first(self, model):
        """An image the family's processor or tower would fail on deep inside is refused
        before the processor runs, naming its size; every other one runs."""
        prompt = self.image_prompt(model)
        for size in SMALL:
            picture = image(*size)
            if model.vision.image_refusal(*size):
                forwards = _forwards(model)
                with pytest.raises(ValueError, match=rf"{size[0]} x {size[1]} pixels, too small or too thin"):
                    with model.trace(prompt, images=[picture]):
                        model.logits.save()
                assert not forwards(), "the model ran before the refusal"
                continue
            with torch.no_grad(), model.trace(prompt, images=[picture]):
                features = model.vision.image_features.save()
            assert features.numel() > 0, size

    def test_placeholders_without_images_are_refused(self, model):
        """A prompt holding the image placeholder with no image would read it as text."""
        if model.vision.writes_placeholders or not model.family.entry.in_prompt:
            return  # its prompts hold none
        forwards = _forwards(model)
        with pytest.raises(ValueError, match="no images= was given"):
            with model.trace(self.image_prompt(model)):
                model.logits.save()
        assert not forwards(), "the model ran before the refusal"

    # -- offload -----------------------------------------------------------------

    def test_an_offloaded_model_traces_as_in_memory(self, model, path, tmp_path):
        """The map a checkpoint too big for memory takes: the tower (``on_disk``; its first
        parameter is the model's, on most families) on disk, named first, everything else
        in memory. The features and the logits are the in-memory model's, bit for bit."""
        args, kwargs = self.image_prompt(model), {"images": self.images()[:1]}
        with torch.no_grad(), model.trace(args, **kwargs):
            features, logits = model.vision.image_features.save(), model.logits.save()
        placed = _on_disk(model, self.on_disk)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # accelerate's note that offloaded weights are on the meta device
            offloaded = self.load(path, attn_implementation="eager", device=placed, offload_folder=str(tmp_path))
        assert "disk" in set(offloaded._module.hf_device_map.values())
        with torch.no_grad(), offloaded.trace(args, **kwargs):
            features_on_disk, logits_on_disk = offloaded.vision.image_features.save(), offloaded.logits.save()
        assert torch.equal(features_on_disk, features) and torch.equal(logits_on_disk, logits)


def _over_white(rgba: Any) -> Any:
    """An RGBA image laid over white, as a processor makes it RGB."""
    return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")


#: (what, the image given, the image it is): of an RGB picture and the RGBA and grey ones made of it.
_FORMS = (
    ("PIL L", lambda p, m: m["grey"], lambda p, m: m["grey"].convert("RGB")),
    ("PIL RGBA", lambda p, m: m["rgba"], lambda p, m: _over_white(m["rgba"])),
    ("PIL P", lambda p, m: p.convert("P"), lambda p, m: p.convert("P").convert("RGB")),
    ("PIL I;16", lambda p, m: _sixteen(m["grey"]), lambda p, m: m["grey"].convert("RGB")),
    ("numpy grey", lambda p, m: numpy.asarray(m["grey"]), lambda p, m: m["grey"].convert("RGB")),
    ("numpy RGBA", lambda p, m: numpy.asarray(m["rgba"]), lambda p, m: _over_white(m["rgba"])),
    ("torch grey", lambda p, m: torch.from_numpy(numpy.asarray(m["grey"]).copy())[None],
     lambda p, m: m["grey"].convert("RGB")),
    ("numpy flipped view", lambda p, m: numpy.asarray(p)[::-1], lambda p, m: p.transpose(Image.Transpose.FLIP_TOP_BOTTOM)),
)


def _sixteen(grey: Any) -> Any:
    """The 16-bit grey image of an 8-bit one (each value times 257)."""
    return Image.fromarray(numpy.asarray(grey).astype(numpy.uint16) * 257)


def _text_rows_are_each_prompts_own(model: Any, pictures: dict, prompt: str, folder: Any) -> None:
    """A stream value collected at ``at="text"`` on a cross-attention family: each image's
    rows are its prompt's tokens in a trace of it alone, [tokens, hidden] (they were read
    as the image's cross-attention positions, a few scalars an image)."""
    from ...collect import collect, open_store

    collect(model, ["layers[0].layer_output"], pictures, folder, prompt=prompt, at="text", batch=2, progress=False)
    store = open_store(folder)
    (full,) = set(store.prompts.values())
    for name, picture in pictures.items():
        with torch.no_grad(), model.trace(full, images=[picture]):
            mask = model.vision.image_token_mask.save()
            own = model.layers[0].layer_output.save()
        close(store["layers[0].layer_output"][store.index.rows(name)], own[0][~mask[0]])


def _on_disk(model: Any, name: str) -> dict[str, str]:
    """A device map with the module standard ``name`` names on disk, first, and everything
    else (the siblings along its path from the root, and those modules' own parameters)
    on the CPU."""
    tower = _value(model, name).path.removeprefix("model.")
    placed = {tower: "disk"}
    parent, parts = model._module, tower.split(".")
    for depth, part in enumerate(parts):
        prefix = ".".join(parts[:depth])
        siblings = [name for name, _ in parent.named_children() if name != part]
        siblings += [name for name, _ in [*parent.named_parameters(recurse=False), *parent.named_buffers(recurse=False)]]
        for name in siblings:
            placed[f"{prefix}.{name}" if prefix else name] = "cpu"
        parent = getattr(parent, part)
    return placed


def _value(model: Any, name: str) -> Any:
    """Inside a trace: the value a collect name (``"encoder.layers[0].layer_output"``) reads."""
    found = model
    for part in name.split("."):
        attribute, _, index = part.partition("[")
        found = getattr(found, attribute)
        if index:
            found = found[int(index.rstrip("]"))]
    return found


def _forwards(model: Any) -> Any:
    """Count the model's forwards from now; call the result to read the count."""
    counts = []
    hook = model._module.register_forward_pre_hook(lambda *_: counts.append(1))

    def read() -> int:
        hook.remove()
        return len(counts)

    return read
