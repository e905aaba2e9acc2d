"""`vlreg.collect`: a store's rows are the values a trace of each image alone gives, its
boxes the geometry's, its index aligned with every value; bad input is refused before
the model runs."""

import numpy
import pytest
import torch
from PIL import Image
from vlreg.cli import main
from vlreg.collect import collect, open_store
from vlreg.testing import build, load
from vlreg.testing.server import ServerBackend

#: Qwen2-VL's tiny processor gives these sizes 4, 6, 12 and 16 image tokens, so a batch pads.
SIZES = [(56, 56), (84, 56), (112, 84), (112, 112), (56, 56)]
QUESTION = "What is in this image?"


@pytest.fixture(scope="module")
def qwen():
    return load("qwen2_vl")


@pytest.fixture(scope="module")
def llava():
    return load("llava_interleave")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    found = tmp_path_factory.mktemp("images")
    for index, size in enumerate(SIZES):
        picture = torch.randint(0, 256, (size[1], size[0], 3), generator=torch.Generator().manual_seed(index))
        Image.fromarray(picture.byte().numpy()).save(found / f"photo{index}.png")
    (found / "labels.txt").write_text("not an image, and not read")
    return found


def pictures(folder):
    return {path.name: Image.open(path).convert("RGB") for path in sorted(folder.glob("*.png"))}


def full(model, question=QUESTION):
    content = [{"type": "image"}, {"type": "text", "text": question}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                               tokenize=False)


def alone(model, prompt, image, read):
    """``read(model)``'s values in a trace of the image alone, with the masks first."""
    saved = []
    with torch.no_grad(), model.trace(prompt, images=[image]):
        saved.append(model.attention_mask.save())
        saved.append(model.vision.image_token_mask.save())
        for found in read(model):
            saved.append(found.save())
    return saved


def test_rows_are_each_images_own_trace_and_boxes_its_geometry(qwen, folder, tmp_path):
    values = ["vision.image_features", "layers[0].input", "layers[1].layer_output", "logits"]
    summary = collect(qwen, values, folder, tmp_path / "store", prompt=QUESTION, batch=3, progress=False)
    store = open_store(tmp_path / "store")
    assert summary.images == 5 and store.images == [f"photo{i}.png" for i in range(5)]
    assert store.values == values  # forward order
    prompt = full(qwen)
    assert set(store.prompts.values()) == {prompt}
    index = store.index
    assert len(index) == len(store) == sum(len(store[name]) for name in values) // len(values)
    for name, image in pictures(folder).items():
        _, mask, features, first, last, logits = alone(qwen, prompt, image, lambda m: (
            m.vision.image_features, m.layers[0].input, m.layers[1].layer_output, m.logits))
        rows = index.rows(name)
        for stored, own in zip(values, (features, first[mask], last[mask], logits[mask])):
            assert torch.allclose(store[stored][rows], own, atol=1e-5), (name, stored)
        (geometry,) = qwen.vision.geometry(prompt, [image])
        assert torch.equal(index.box[rows], geometry.boxes.float())
        assert index.token[rows].tolist() == list(range(geometry.tokens))
        assert set(index.image[rows]) == {name} and set(index.prompt[rows]) == set(store.prompts)
    record = index[0]
    assert record.image == "photo0.png" and record.token == 0 and record.box == tuple(geometry.boxes[0].tolist())


@pytest.mark.parametrize("at", ["all", "text", "last"])
def test_rows_at_text_all_and_last_are_the_prompts_positions(qwen, folder, tmp_path, at):
    collect(qwen, ["layers[1].layer_output"], folder, tmp_path / at, prompt=QUESTION, at=at, batch=5, progress=False)
    store = open_store(tmp_path / at)
    prompt = full(qwen)
    for name, image in pictures(folder).items():
        _, mask, value = alone(qwen, prompt, image, lambda m: (m.layers[1].layer_output,))
        where = {"all": torch.ones_like(mask), "text": ~mask, "last": torch.arange(mask.shape[1]) == mask.shape[1] - 1}[at]
        where = where.expand_as(mask)
        rows = store.index.rows(name)
        assert torch.allclose(store["layers[1].layer_output"][rows], value[where], atol=1e-5)
        assert store.index.token[rows].tolist() == where[0].nonzero()[:, 0].tolist()
        boxes = store.index.box[rows]
        lit = mask[where]
        assert boxes[~lit].isnan().all()
        if at == "all":
            (geometry,) = qwen.vision.geometry(prompt, [image])
            assert torch.equal(boxes[lit], geometry.boxes.float())


def test_a_second_family_and_tower_values(llava, qwen, folder, tmp_path):
    """LLaVA (SigLIP: one tower entry per image, a patch a token) with a prompt per image, so
    the batch pads; its tower rows are its patches, with their boxes. On Qwen2-VL the tower
    packs every image in one row, so each image runs alone and the patches' boxes are NaN
    (the merge blocks are the family's order)."""
    questions = {f"photo{i}.png": ("Describe the picture." if i % 2 else QUESTION) for i in range(5)}
    ask = lambda record: questions[record["image"]]  # noqa: E731
    collect(llava, ["layers[1].layer_output", "vision.image_features"], folder, tmp_path / "text", prompt=ask,
            batch=5, progress=False)
    collect(llava, ["vision.layers[0].layer_output", "vision.tower_output"], folder, tmp_path / "tower", prompt=ask,
            batch=5, progress=False)
    text, tower = open_store(tmp_path / "text"), open_store(tmp_path / "tower")
    assert len(text.prompts) == 2
    for name, image in pictures(folder).items():
        prompt = full(llava, questions[name])
        _, mask, patches, out, features, stream = alone(llava, prompt, image, lambda m: (
            m.vision.layers[0].layer_output, m.vision.tower_output, m.vision.image_features, m.layers[1].layer_output))
        rows = text.index.rows(name)
        assert torch.allclose(text["layers[1].layer_output"][rows], stream[mask], atol=1e-5)
        assert torch.allclose(text["vision.image_features"][rows], features, atol=1e-5)
        rows = tower.index.rows(name)
        assert torch.allclose(tower["vision.layers[0].layer_output"][rows], patches[0], atol=1e-5)
        assert torch.allclose(tower["vision.tower_output"][rows], out[0], atol=1e-5)
        (geometry,) = llava.vision.geometry(prompt, [image])
        assert geometry.grids[0].fold == 1 and torch.equal(tower.index.box[rows], geometry.boxes.float())
    summary = collect(qwen, ["vision.tower_output"], folder, tmp_path / "qwen", prompt=QUESTION, batch=5, progress=False)
    assert any("one image a forward" in note for note in summary.notes)
    store, prompt = open_store(tmp_path / "qwen"), full(qwen)
    for name, image in pictures(folder).items():
        _, _, out = alone(qwen, prompt, image, lambda m: (m.vision.tower_output,))
        rows = store.index.rows(name)
        assert torch.allclose(store["vision.tower_output"][rows], out.reshape(-1, out.shape[-1]), atol=1e-5)
        assert store.index.box[rows].isnan().all()


def test_transparent_and_16_bit_files_are_their_own_trace(qwen, tmp_path):
    """A half-transparent PNG and a 16-bit grey PNG: each image's rows are a trace of the
    file opened with PIL, whose transparency the processor lays over white (the loader
    dropped it instead), and the 16-bit file's are the 8-bit grey image's (each value
    times 257, which the RGB conversion clipped to white)."""
    pixels = torch.randint(0, 256, (56, 84, 3), generator=torch.Generator().manual_seed(9), dtype=torch.uint8).numpy()
    grey = Image.fromarray(pixels).convert("L")
    files = tmp_path / "files"
    files.mkdir()
    Image.fromarray(numpy.concatenate([pixels, numpy.full((56, 84, 1), 128, numpy.uint8)], -1), "RGBA").save(files / "clear.png")
    Image.fromarray(numpy.asarray(grey).astype(numpy.uint16) * 257).save(files / "deep.png")
    collect(qwen, ["vision.image_features"], files, tmp_path / "store", prompt=QUESTION, batch=2, progress=False)
    store = open_store(tmp_path / "store")
    for name, same in (("clear.png", Image.open(files / "clear.png")), ("deep.png", grey)):
        _, _, features = alone(qwen, full(qwen), same, lambda m: (m.vision.image_features,))
        assert torch.allclose(store["vision.image_features"][store.index.rows(name)], features, atol=1e-5), name


def test_store_dtype_halves_the_disk(qwen, folder, tmp_path):
    collect(qwen, ["layers[1].layer_output"], folder, tmp_path / "wide", prompt=QUESTION, progress=False)
    collect(qwen, ["layers[1].layer_output"], folder, tmp_path / "half", prompt=QUESTION, dtype="bfloat16",
            progress=False)
    wide, half = open_store(tmp_path / "wide")["layers[1].layer_output"], open_store(tmp_path / "half")["layers[1].layer_output"]
    assert half.dtype == torch.bfloat16 and half.shape == wide.shape
    assert torch.equal(half[:], wide[:].to(torch.bfloat16))
    assert open_store(tmp_path / "half").manifest["dtype"] == "bfloat16"


def test_a_float16_store_refuses_what_float16_cannot_hold(folder, tmp_path):
    """A residual stream with a massive activation (real checkpoints reach 1e5) is finite
    in the model and past float16's largest value: a float16 store refuses it, naming the
    value and what to pass, and writes nothing; bfloat16 (common spellings taken) stores it."""
    model = load("qwen2_vl")
    with torch.no_grad():
        model.embed_tokens.weight[:] *= 2e6
    with torch.no_grad(), model.trace(full(model), images=[pictures(folder)["photo0.png"]]):
        stream = model.layers[0].input.save()
    assert stream.isfinite().all() and stream.abs().max() > 65504
    with pytest.raises(ValueError, match=r"layers\[0\].input reaches .* past float16's largest value .*'bfloat16'"):
        collect(model, ["layers[0].input"], folder, tmp_path / "half", prompt=QUESTION, at="text", dtype="fp16",
                progress=False)
    assert not list((tmp_path / "half" / "shards").glob("*.safetensors"))
    collect(model, ["layers[0].input"], folder, tmp_path / "wide", prompt=QUESTION, at="text", dtype="bf16",
            progress=False)
    stored = open_store(tmp_path / "wide")
    assert stored.manifest["dtype"] == "bfloat16" and stored["layers[0].input"][:].isfinite().all()
    with pytest.raises(ValueError, match=r"dtype='int8' is not a floating-point dtype .*'bfloat16' \('bf16'\)"):
        collect(model, ["layers[0].input"], folder, tmp_path / "ints", dtype="int8", progress=False)
    one = {"photo0.png": pictures(folder)["photo0.png"]}
    for value, dtype, stored in ((65519.0, "float16", 65504.0), (3.4e38, "bfloat16", None)):
        with torch.no_grad():  # the text rows of layers[0].input are the embeddings: ``value`` and zeros
            model.embed_tokens.weight.zero_()[:, 0] = value
        if stored is None:  # past bfloat16's range: the refusal names the wider dtype, not bfloat16 again
            with pytest.raises(ValueError, match=r"past bfloat16's largest value .*dtype='float32', into"):
                collect(model, ["layers[0].input"], one, tmp_path / dtype, prompt=QUESTION, at="text", dtype=dtype,
                        progress=False)
            continue
        collect(model, ["layers[0].input"], one, tmp_path / dtype, prompt=QUESTION, at="text", dtype=dtype,
                progress=False)  # 65519 rounds to float16's largest, 65504: finite, so stored
        assert set(open_store(tmp_path / dtype)["layers[0].input"][:][:, 0].tolist()) == {stored}


def test_a_dataset_with_a_key_and_a_prompt_column(qwen, folder, tmp_path):
    datasets = pytest.importorskip("datasets", reason="the datasets input needs `pip install vlreg[datasets]`")
    named = pictures(folder)
    keys = [f"row-{i}" for i in range(len(named))]
    questions = [QUESTION if i % 2 else "Describe the picture." for i in range(len(named))]
    dataset = datasets.Dataset.from_dict({"picture": list(named.values()), "key": keys, "question": questions})
    dataset = dataset.cast_column("picture", datasets.Image())
    collect(qwen, ["layers[0].layer_output"], dataset, tmp_path / "store", image_column="picture",
            key_column="key", prompt_column="question", batch=2, progress=False)
    store = open_store(tmp_path / "store")
    assert store.images == keys
    for key, image, question in zip(keys, named.values(), questions):
        prompt = full(qwen, question)
        _, mask, value = alone(qwen, prompt, image, lambda m: (m.layers[0].layer_output,))
        rows = store.index.rows(key)
        assert store.prompts[store.index.prompt[rows.start]] == prompt
        assert torch.allclose(store["layers[0].layer_output"][rows], value[mask], atol=1e-5)


def test_columns_read_across_shards_and_map_the_files(qwen, folder, tmp_path):
    collect(qwen, ["layers[0].layer_output"], folder, tmp_path / "store", prompt=QUESTION, batch=2, shard_images=2,
            progress=False)
    store = open_store(tmp_path / "store")
    column = store["layers[0].layer_output"]
    whole = torch.cat(list(column.chunks(7)))
    assert len(list((tmp_path / "store" / "shards").iterdir())) == 3 and whole.shape == column.shape
    assert torch.equal(column[3], whole[3]) and torch.equal(column[-1], whole[-1])
    assert torch.equal(column[2:30], whole[2:30]) and torch.equal(column[[29, 0, 5, 29]], whole[[29, 0, 5, 29]])
    assert torch.equal(torch.cat(list(store.batches("layers[0].layer_output", 5, shuffle=True))).sort(0).values,
                       whole.sort(0).values)
    assert column[0:2].data_ptr() == column[0:2].data_ptr()  # a view of the mapped file, not a copy
    with pytest.raises(KeyError, match="it holds layers"):
        store["layers[1].layer_output"]


# ---- refused before any work -------------------------------------------------------------


def refused(model, tmp_path, match, values=("layers[0].layer_output",), images=None, **options):
    out = tmp_path / "refused"
    with pytest.raises(ValueError, match=match):
        collect(model, list(values), images, out, progress=False, **options)
    assert not out.exists()  # nothing written: refused before the model ran


def test_refusals_before_any_work(qwen, folder, tmp_path):
    refused(qwen, tmp_path, r"not a value of this model.*did you mean layer_output", ["layers[0].layer_outptu"], folder)
    refused(qwen, tmp_path, r"layers has 2 blocks", ["layers[5].layer_output"], folder)
    refused(qwen, tmp_path, r"not one vector per token", ["layers[0].self_attn.attention_probabilities"], folder)
    refused(qwen, tmp_path, r"has rows only at the image's tokens, so at='text' gives it none",
            ["vision.image_features"], folder, at="text")
    refused(qwen, tmp_path, r"collect them into two stores", ["vision.tower_output", "layers[0].layer_output"], folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.txt").write_text("no images here")
    refused(qwen, tmp_path, r"no images in .*empty", images=empty)
    no_image = "<|im_start|>user\nWhat is in this image?<|im_end|>\n<|im_start|>assistant\n"
    refused(qwen, tmp_path, r"at='image' reads the image's tokens, but the prompt .* holds no image", images=folder,
            prompt=no_image)
    refused(qwen, tmp_path, r"image would never reach the model", images=folder, prompt=no_image, at="last")


def test_an_unreadable_image_stops_or_is_skipped_as_asked(qwen, folder, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for path in folder.glob("*.png"):
        (broken / path.name).write_bytes(path.read_bytes())
    (broken / "photo2.png").write_bytes(b"not a png at all")
    refused(qwen, tmp_path, r"image photo2.png cannot be read .*on_error='skip'", images=broken)
    summary = collect(qwen, ["layers[0].layer_output"], broken, tmp_path / "store", prompt=QUESTION,
                      on_error="skip", progress=False)
    assert [name for name, _ in summary.skipped] == ["photo2.png"] and "photo2.png" in str(summary)
    assert open_store(tmp_path / "store").images == ["photo0.png", "photo1.png", "photo3.png", "photo4.png"]
    (broken / "photo2.png").write_bytes((folder / "photo2.png").read_bytes())  # fixed: a rerun adds it
    assert collect(qwen, ["layers[0].layer_output"], broken, tmp_path / "store", prompt=QUESTION,
                   progress=False).images == 1
    # in a shard of its own, after the shard that began before it
    assert open_store(tmp_path / "store").images == ["photo0.png", "photo1.png", "photo3.png", "photo4.png", "photo2.png"]


def test_an_image_the_model_refuses_stops_or_is_skipped_as_asked(folder, tmp_path):
    """An image the family cannot run (Idefics2 splits images into crops of half their
    sides: a side of 1 pixel has none) is named before any work where it is a file, when its
    batch loads where it is in memory; skipped and named under on_error='skip'."""
    model = load("idefics2")
    thin = tmp_path / "thin"
    thin.mkdir()
    for path in sorted(folder.glob("*.png"))[:2]:
        (thin / path.name).write_bytes(path.read_bytes())
    Image.new("RGB", (40, 1)).save(thin / "line.png")
    refused(model, tmp_path, r"image line.png is 40 x 1 pixels, too small or too thin .*at least 2 x 2", images=thin)
    summary = collect(model, ["vision.image_features"], thin, tmp_path / "store", on_error="skip", progress=False)
    assert [name for name, _ in summary.skipped] == ["line.png"] and summary.images == 2
    in_memory = {"line": Image.new("RGB", (40, 1)), **pictures(folder)}
    with pytest.raises(ValueError, match=r"image line is 40 x 1 pixels, too small or too thin"):
        collect(model, ["vision.image_features"], in_memory, tmp_path / "memory", progress=False)


def test_a_store_made_otherwise_is_refused_naming_the_difference(qwen, llava, folder, tmp_path):
    out = tmp_path / "store"
    collect(qwen, ["layers[0].layer_output"], folder, out, prompt=QUESTION, progress=False, shard_images=5)
    before = sorted(path.read_bytes() for path in (out / "shards").iterdir())
    for match, model, values, options in (
        (r"values: \[\"layers\[0\].layer_output\"\], not \[\"layers\[1\].layer_output\"\]", qwen,
         ["layers[1].layer_output"], {}),
        (r"prompt: \"What is in this image\?\", not \"Describe the picture.\"", qwen, ["layers[0].layer_output"],
         {"prompt": "Describe the picture."}),
        (r"at: \"image\", not \"all\"", qwen, ["layers[0].layer_output"], {"at": "all"}),
        (r"dtype: \"float32\", not \"float16\"", qwen, ["layers[0].layer_output"], {"dtype": "float16"}),
        (r"model: \{.*\}, not \{", llava, ["layers[0].layer_output"], {}),
    ):
        options = {"prompt": QUESTION, **options}
        with pytest.raises(ValueError, match=match):
            collect(model, values, folder, out, progress=False, **options)
    assert sorted(path.read_bytes() for path in (out / "shards").iterdir()) == before


def test_the_command_line(qwen, folder, tmp_path, capsys):
    checkpoint = str(build("qwen2_vl"))
    out = tmp_path / "store"
    assert main(["collect", checkpoint, "--images", str(folder), "--values", "layers[0].layer_output",
                 "vision.image_features", "--out", str(out), "--prompt", QUESTION, "--batch", "2",
                 "--store-dtype", "float16", "--attn-implementation", "eager"]) == 0
    assert "collected 5 images" in capsys.readouterr().err
    store = open_store(out)
    assert store.values == ["vision.image_features", "layers[0].layer_output"] and len(store.images) == 5
    library = tmp_path / "library"
    collect(qwen, ["layers[0].layer_output", "vision.image_features"], folder, library, prompt=QUESTION,
            dtype="float16", batch=2, progress=False)
    assert torch.equal(open_store(library)["layers[0].layer_output"][:], store["layers[0].layer_output"][:])
    assert main(["collect", checkpoint, "--images", str(tmp_path / "nothing"), "--values", "layers[0].layer_output",
                 "--out", str(tmp_path / "x")]) == 1
    assert "no folder" in capsys.readouterr().err


def test_remote_batches_come_back_as_the_local_rows(qwen, folder, tmp_path):
    """Each batch's trace sent as a remote request: run by what arrives, as an NDIF model
    actor runs it (`ServerBackend`), and by the command line's ``--remote local`` (nnsight's
    serialized rehearsal, on a model built here without its weights)."""
    values = ["vision.image_features", "layers[1].layer_output"]
    collect(qwen, values, folder, tmp_path / "here", prompt=QUESTION, batch=2, progress=False)
    collect(qwen, values, folder, tmp_path / "server", prompt=QUESTION, batch=2, progress=False,
            remote=ServerBackend(qwen))
    assert main(["collect", str(build("qwen2_vl")), "--images", str(folder), "--values", *values, "--out",
                 str(tmp_path / "local"), "--prompt", QUESTION, "--batch", "2", "--remote", "local"]) == 0
    here = open_store(tmp_path / "here")
    for made in ("server", "local"):
        store = open_store(tmp_path / made)
        assert store.images == here.images and torch.equal(store.index.token, here.index.token)
        assert torch.equal(store.index.box.nan_to_num(-1), here.index.box.nan_to_num(-1))
        for name in values:
            assert torch.allclose(store[name][:], here[name][:], atol=1e-6), (made, name)


def test_a_video_on_a_model_that_reads_none_stops_or_is_skipped_as_asked(llava, folder, tmp_path):
    """LLaVA-Interleave's config has no video token: a folder's video file is refused by
    name before any work, or left out under on_error='skip' (the file is not decoded, so
    this needs no PyAV)."""
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "photo.png").write_bytes((folder / "photo0.png").read_bytes())
    (mixed / "clip.mp4").write_bytes(b"never decoded")
    with pytest.raises(ValueError, match=r"video clip.mp4 is a video, and this model reads none: .*no video token"):
        collect(llava, ["layers[0].layer_output"], mixed, tmp_path / "never", progress=False)
    assert not (tmp_path / "never").exists()
    summary = collect(llava, ["layers[0].layer_output"], mixed, tmp_path / "store", on_error="skip", progress=False)
    assert summary.images == 1 and [name for name, _ in summary.skipped] == ["clip.mp4"]
    assert open_store(tmp_path / "store").images == ["photo.png"]
