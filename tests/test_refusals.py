"""What vlreg refuses, and why: every value either does what it says or says why not,
in vlreg's names, before the model runs where the input already tells."""

import json
import shutil
import threading
import warnings

import numpy
import pytest
import torch

from vlreg import NoFamily, OutOfOrder, ReadOnly, StandardizedTransformer, Unavailable
from vlreg.testing import build, chat, load
from vlreg.testing.conformance import image

CHECKPOINT = "qwen2_vl"


@pytest.fixture(scope="module")
def llava():
    return load("llava_interleave")


def logits(model, prompt, images):
    with model.trace(prompt, images=images):
        out = model.logits.save()
    return out


def unchanged(model):
    """The weights, to compare after a refused trace: a trace never alters them."""
    return {name: tensor.clone() for name, tensor in model._module.state_dict().items()}


# -- 1. edits that would land nowhere -------------------------------------------------


@pytest.mark.parametrize("write", ["assign", "in place"])
def test_the_image_token_mask_refuses_writes_and_says_edit_the_prompt(model, write):
    prompt, images = chat(model), [image(112, 84)]
    before = unchanged(model)
    with pytest.raises(ReadOnly, match="vision.image_token_mask cannot be written: it is derived from the prompt's tokens"):
        with model.trace(prompt, images=images):
            if write == "assign":
                model.vision.image_token_mask = torch.zeros(1, 1, dtype=torch.bool)
            else:
                model.vision.image_token_mask[:] = False
            model.logits.save()
    assert all(torch.equal(tensor, model._module.state_dict()[name]) for name, tensor in before.items())
    with model.trace(prompt, images=images):
        mask = model.vision.image_token_mask.save()
    mask[0, 0] = True  # after the trace the saved mask is an ordinary tensor
    assert bool(mask[0, 0])


@pytest.mark.parametrize("family, instead", [("model", r"vision.layers\[-1\].layer_output"), ("llava", r"vision.layers\[1\].layer_output")])
def test_tower_output_refuses_writes_naming_the_value_the_projector_reads(family, instead, request):
    model = request.getfixturevalue(family)
    prompt, images = chat(model), [image(112, 84)]
    assert "vision.tower_output" in model.read_only()
    for write in ("assign", "in place"):
        with pytest.raises(ReadOnly, match=f"vision.tower_output cannot be written: .*edit {instead}"):
            with model.trace(prompt, images=images):
                if write == "assign":
                    model.vision.tower_output = torch.zeros(1)
                else:
                    model.vision.tower_output[:] = 0
    with model.trace(prompt, images=images):
        model.vision.layers[-1].layer_output[:] = 0  # the value it names instead lands
        edited = model.logits.save()
    assert not torch.equal(edited, logits(model, prompt, images))


# -- 2. images on a load no image can reach ------------------------------------------


def test_images_on_a_text_generation_load_are_refused_before_the_model_runs():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text_only = StandardizedTransformer(str(build("qwen2_vl")), dispatch=True, device="cpu")
    ran = []
    handle = text_only._module.register_forward_hook(lambda *args: ran.append(True))
    try:
        with pytest.raises(ValueError, match="task='image-text-to-text'"):
            with text_only.trace("What is in this image?", images=[image(112, 84)]):
                text_only.logits.save()
    finally:
        handle.remove()
    assert not ran


def test_videos_on_a_processor_that_reads_none_are_refused_before_the_model_runs(llava):
    # LLaVA's processor has no video processor: it would drop the frames and trace the text alone
    ran = []
    handle = llava._module.register_forward_hook(lambda *args: ran.append(True))
    try:
        with pytest.raises(ValueError, match=r"reads no videos .*pass a video's frames as images=\[\.\.\.\]"):
            with llava.trace(chat(llava, images=0), videos=[numpy.zeros((4, 56, 56, 3), dtype=numpy.uint8)]):
                llava.logits.save()
    finally:
        handle.remove()
    assert not ran


# -- 3. two threads, one model --------------------------------------------------------


def test_two_threads_tracing_one_model_take_turns_and_get_their_own_values(model):
    prompt = chat(model)
    pictures = [image(112, 84, seed=seed) for seed in (1, 2)]
    solo = []
    for picture in pictures:
        with model.trace(prompt, images=[picture]):
            features, out = model.vision.image_features.save(), model.logits.save()
        solo.append((features, out))
    results: dict[int, list] = {0: [], 1: []}
    errors: list = []

    def work(k):
        try:
            for _ in range(3):
                with model.trace(prompt, images=[pictures[k]]):
                    features, out = model.vision.image_features.save(), model.logits.save()
                results[k].append((features, out))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for k in (0, 1):
        assert len(results[k]) == 3
        for features, out in results[k]:
            assert torch.equal(features, solo[k][0]) and torch.equal(out, solo[k][1])


# -- 6. out of order, in vlreg's words --------------------------------------------------


def test_reading_the_mask_after_an_image_value_names_both_and_the_order(model):
    with pytest.raises(OutOfOrder) as caught:
        with model.trace(chat(model), images=[image(112, 84)]):
            model.vision.image_features.save()
            model.vision.image_token_mask.save()
    message = str(caught.value)
    assert "vision.image_token_mask was read after vision.image_features" in message
    masks = "vision.image_token_mask (off the inputs), then vision.video_token_mask (off the inputs)"
    assert f"{masks}, then token_embeddings" in message
    assert "model.input" not in message and ".i0" not in message


def test_reading_the_features_after_a_block_names_both(model):
    with pytest.raises(OutOfOrder, match=r"vision.image_features was read after layers\[0\].layer_output"):
        with model.trace(chat(model), images=[image(112, 84)]):
            model.layers[0].layer_output.save()
            model.vision.image_features.save()


# -- 7. image values on a prompt with no image ------------------------------------------


@pytest.mark.parametrize("name", ["image_features", "tower_output", "patch_embeddings"])
def test_image_values_on_a_text_prompt_are_unavailable_before_the_model_runs(model, name):
    prompt = model.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": "What is this?"}]}], add_generation_prompt=True, tokenize=False
    )
    ran = []
    handle = model._module.register_forward_hook(lambda *args: ran.append(True))
    try:
        with pytest.raises(Unavailable, match=f"vision.{name} is unavailable: this trace's input carries no images"):
            with model.trace(prompt):
                getattr(model.vision, name).save()
    finally:
        handle.remove()
    assert not ran
    with model.trace(prompt):
        mask = model.vision.image_token_mask.save()  # the mask is there: all False
    assert not mask.any()


def test_an_images_values_on_a_video_prompt_are_refused_as_an_images_alone(model):
    """On a video-only prompt the image's features are refused, saying it holds only videos
    and which values are the video's (not that the tower never ran), and how to read frames
    as images."""
    content = [{"type": "video"}, {"type": "text", "text": "What happens?"}]
    prompt = model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                 tokenize=False)
    video = [numpy.random.default_rng(0).integers(0, 255, (4, 56, 56, 3), dtype=numpy.uint8)]
    with pytest.raises(Unavailable, match="no images, only videos, and this value is an image's alone: .* pass the frames as images="):
        with model.trace(prompt, videos=video):
            model.vision.image_features.save()
    with model.trace(prompt, videos=video):
        mask, out = model.vision.image_token_mask.save(), model.logits.save()
    assert not mask.any() and out.shape[1] == mask.shape[1]


# -- 8. what images= takes ---------------------------------------------------------------


@pytest.mark.parametrize(
    "images, error, fragment",
    [
        ([], ValueError, "holds no image"),
        ([None], TypeError, r"images\[0\] is NoneType, not an image"),
        (["red.png"], TypeError, r"images\[0\] is str, not an image"),
        ([numpy.full((84, 112, 3), 0.5, dtype=numpy.float32)], ValueError, r"values in \[0, 1\]"),
        ([torch.rand(3, 84, 112)], ValueError, r"values in \[0, 1\]"),
        ([numpy.zeros((3, 84, 112), dtype=numpy.uint8)], ValueError, r"channels last .*array.transpose\(1, 2, 0\)"),
        ([torch.zeros(84, 112, 3, dtype=torch.uint8)], ValueError, r"channels first .*tensor.permute\(2, 0, 1\)"),
    ],
)
def test_images_that_would_fail_deep_inside_or_be_misread_are_refused(model, images, error, fragment):
    with pytest.raises(error, match=fragment) as caught:
        with model.trace(chat(model), images=images):
            model.logits.save()
    assert "images= takes" in str(caught.value) or "uint8" in str(caught.value) or "vlreg takes" in str(caught.value)


def test_float_pixels_in_0_255_and_uint8_arrays_are_taken(model):
    pixels = numpy.array(image(112, 84))
    expected = logits(model, chat(model), [image(112, 84)])
    assert torch.equal(logits(model, chat(model), [pixels]), expected)
    assert torch.allclose(logits(model, chat(model), [pixels.astype(numpy.float32)]), expected, atol=1e-4)


@pytest.mark.parametrize("size", [(40, 3), (40, 4), (40, 1)])
def test_a_thin_array_is_read_with_its_channels_last(model, size):
    """A height x width x 3 array 1, 3 or 4 rows tall, which transformers' processors take
    for channels first, is the same image as PIL: the same values and geometry."""
    picture = image(*size)
    expected = logits(model, chat(model), [picture])
    pixels = numpy.asarray(picture)
    for given in (pixels, torch.from_numpy(pixels.copy()).permute(2, 0, 1)):
        assert torch.equal(logits(model, chat(model), [given]), expected)
        (geometry,) = model.vision.geometry(chat(model), [given])
        assert geometry.size == size


def test_placeholders_and_images_must_meet(model):
    """A prompt holding placeholders with no images (or only videos) would read them as
    text; one with images and no placeholder has nowhere to put them: both are refused
    before the model runs, saying how to write the prompt. A placeholder without the
    markers the chat template writes around an image runs, with a warning."""
    before = unchanged(model)
    video = [numpy.zeros((4, 56, 56, 3), dtype=numpy.uint8)]
    for given in ({}, {"videos": video}):
        with pytest.raises(ValueError, match="holds 1 image placeholder .* and (no images=|only videos=) was given"):
            with model.trace(chat(model), **given):
                model.logits.save()
    with pytest.raises(ValueError, match=r"holds no image placeholder .*\{'type': 'image'\}"):
        with model.trace("What is in this image?", images=[image(112, 84)]):
            model.logits.save()
    with pytest.warns(UserWarning, match=r"stands without the markers .*<\|vision_start\|><\|image_pad\|><\|vision_end\|>"):
        logits(model, "<|image_pad|>What is in this image?", [image(112, 84)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logits(model, chat(model), [image(112, 84)])  # the chat template's prompt: no warning
    assert all(torch.equal(tensor, before[name]) for name, tensor in model._module.state_dict().items())


# -- 8. checkpoints that cannot load say so at once -----------------------------------------


@pytest.mark.parametrize("where", ["./no/such/checkpoint", "/no/such/checkpoint", "~/no-such-checkpoint"])
def test_a_path_that_does_not_exist_is_refused_before_any_hub_lookup(where):
    with pytest.raises(FileNotFoundError, match="no checkpoint folder at"):
        StandardizedTransformer(where, task="image-text-to-text")


@pytest.fixture
def copy(tmp_path):
    def make(change=None):
        folder = tmp_path / "checkpoint"
        shutil.copytree(build("qwen2_vl"), folder)
        if change is not None:
            change(folder)
        return str(folder)

    return make


def test_a_model_type_transformers_does_not_know_is_no_family(copy):
    def rename(folder):
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "model_type": "qwen9_vl"}))

    with pytest.raises(NoFamily, match="model_type 'qwen9_vl', which transformers .* does not know"):
        StandardizedTransformer(copy(rename), task="image-text-to-text")


@pytest.mark.parametrize("dispatch", [True, False])
@pytest.mark.parametrize("keep, fragment", [(0, "it is empty"), (1000, "its header claims .* bytes but the file has 1000"), (-64, "its tensors need")])
def test_a_cut_short_weights_file_is_named_at_load(copy, dispatch, keep, fragment):
    def cut(folder):
        weights = folder / "model.safetensors"
        data = weights.read_bytes()
        weights.write_bytes(data[:keep])

    with pytest.raises(OSError, match=f"model.safetensors is not a whole safetensors file: {fragment}"):
        StandardizedTransformer(copy(cut), task="image-text-to-text", dispatch=dispatch, device="cpu")
