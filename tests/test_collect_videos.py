"""`vlreg collect` over video files (PyAV, the ``video`` extra): a video's rows are the values
a trace of its frames gives, its ``frame`` column the geometry's frames as the file numbers
them, images beside it are collected as images; a missing decoder, a wrong prompt and
tower values are refused before the model runs; docs/collect.md's video section runs."""

import sys
from pathlib import Path

import numpy
import pytest
import torch
from PIL import Image
from vlreg.cli import main
from vlreg.collect import collect, open_store
from vlreg.testing import build, load
from vlreg.testing.server import ServerBackend

av = pytest.importorskip("av", reason="the video extra is not installed (pip install 'vlreg[video]')")

QUESTION = "What happens?"
VALUES = ["vision.video_features", "layers[0].input", "layers[1].layer_output"]


def write_video(path, size, count, seed):
    """A video of ``count`` random frames, encoded with PyAV's own MPEG-4 encoder."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=4)
        stream.width, stream.height, stream.pix_fmt = *size, "yuv420p"
        for index in range(count):
            pixels = numpy.random.default_rng(seed * 100 + index).integers(0, 256, (size[1], size[0], 3), numpy.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def decoded(path):
    """Every frame of the file, decoded by PyAV as RGB pictures."""
    with av.open(str(path)) as container:
        return [frame.to_image() for frame in container.decode(video=0)]


def prompt_of(model, kind):
    content = [{"type": kind}, {"type": "text", "text": QUESTION}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                               tokenize=False)


@pytest.fixture(scope="module")
def qwen():
    return load("qwen2_vl")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two videos (4 frames of 84 x 56; 3 of 56 x 56, whose last temporal patch repeats its
    last frame), a 6-frame one in a subfolder, and an image."""
    found = tmp_path_factory.mktemp("clips")
    write_video(found / "a.mp4", (84, 56), 4, 1)
    write_video(found / "b.mkv", (56, 56), 3, 2)
    (found / "more").mkdir()
    write_video(found / "more" / "c.mkv", (56, 84), 6, 3)
    picture = numpy.random.default_rng(7).integers(0, 256, (56, 56, 3), numpy.uint8)
    Image.fromarray(picture).save(found / "still.png")
    return found


@pytest.fixture(scope="module")
def store(qwen, folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("store") / "acts"
    summary = collect(qwen, VALUES, folder, out, prompt=QUESTION, batch=2, progress=False)
    assert summary.images == 4 and any("3 videos ran one a forward" in note for note in summary.notes)
    return open_store(out)


def test_a_videos_rows_are_its_trace_and_its_frames_the_geometrys(qwen, folder, store):
    assert store.images == ["a.mp4", "b.mkv", "more/c.mkv", "still.png"]
    assert set(store.prompts.values()) == {prompt_of(qwen, "video"), prompt_of(qwen, "image")}
    index = store.index
    prompt = prompt_of(qwen, "video")
    for name in ["a.mp4", "b.mkv", "more/c.mkv"]:
        frames = decoded(folder / name)
        with torch.no_grad(), qwen.trace(prompt, videos=[frames]):
            mask = qwen.vision.video_token_mask.save()
            features = qwen.vision.video_features.save()
            first = qwen.layers[0].input.save()
            last = qwen.layers[1].layer_output.save()
        rows = index.rows(name)
        for value, own in zip(VALUES, (features, first[mask], last[mask])):
            assert torch.allclose(store[value][rows], own, atol=1e-5), (name, value)
        (geometry,) = qwen.vision.geometry(prompt, videos=[frames])
        assert torch.equal(index.frame[rows], geometry.frames)
        assert torch.equal(index.box[rows], geometry.boxes.float())
        assert index.token[rows].tolist() == list(range(geometry.tokens))
    assert index.frame[index.rows("b.mkv")].unique(dim=0).tolist() == [[0, 1], [2, 2]]
    assert index[0].frame == (0, 1) and index[0].image == "a.mp4"


def test_an_image_beside_the_videos_is_collected_as_an_image(qwen, folder, store):
    image = Image.open(folder / "still.png").convert("RGB")
    with torch.no_grad(), qwen.trace(prompt_of(qwen, "image"), images=[image]):
        mask = qwen.vision.image_token_mask.save()
        features = qwen.vision.image_features.save()
        last = qwen.layers[1].layer_output.save()
    rows = store.index.rows("still.png")
    assert torch.allclose(store["vision.video_features"][rows], features, atol=1e-5)
    assert torch.allclose(store["layers[1].layer_output"][rows], last[mask], atol=1e-5)
    assert (store.index.frame[rows] == -1).all() and store.index[rows.start].frame == (-1, -1)


def test_frames_reads_that_many_evenly_numbered_as_the_file_and_a_rerun_keeps_them(qwen, folder, tmp_path):
    """``frames=2`` of c.mkv's 6 (Matroska: its header does not count them, so they are
    counted) are its first and last (0 and 5): one temporal patch over both, the rows a
    trace of those two frames. A rerun with another count is refused;
    with the same, it adds nothing. At ``"all"`` the text's rows cover no frame."""
    out = tmp_path / "two"
    collect(qwen, ["layers[1].layer_output"], [folder / "more" / "c.mkv"], out, prompt=QUESTION, at="all",
            frames=2, progress=False)
    store = open_store(out)
    frames = decoded(folder / "more" / "c.mkv")
    with torch.no_grad(), qwen.trace(prompt_of(qwen, "video"), videos=[[frames[0], frames[5]]]):
        mask = qwen.vision.video_token_mask.save()
        last = qwen.layers[1].layer_output.save()
    assert torch.allclose(store["layers[1].layer_output"][:], last[0], atol=1e-5)
    assert store.index.frame[mask[0]].unique(dim=0).tolist() == [[0, 5]]
    assert (store.index.frame[~mask[0]] == -1).all() and store.index.box[~mask[0]].isnan().all()
    with pytest.raises(ValueError, match=r"frames: 2, not 3"):
        collect(qwen, ["layers[1].layer_output"], [folder / "more" / "c.mkv"], out, prompt=QUESTION, at="all",
                frames=3, progress=False)
    again = collect(qwen, ["layers[1].layer_output"], [folder / "more" / "c.mkv"], out, prompt=QUESTION, at="all",
                    frames=2, progress=False)
    assert again.images == 0 and again.already == 1


def test_the_command_line_and_a_remote_trace_give_the_same_rows(qwen, folder, tmp_path):
    """``--frames 2`` from the shell, and each video's trace sent as a remote request (run by
    what arrives, as an NDIF model actor runs it): the rows and frames of the library's run."""
    here = tmp_path / "here"
    collect(qwen, ["layers[1].layer_output"], folder / "more", here, prompt=QUESTION, frames=2, progress=False)
    assert main(["collect", str(build("qwen2_vl")), "--images", str(folder / "more"), "--values",
                 "layers[1].layer_output", "--out", str(tmp_path / "shell"), "--prompt", QUESTION, "--frames", "2",
                 "--attn-implementation", "eager"]) == 0
    collect(qwen, ["layers[1].layer_output"], folder / "more", tmp_path / "server", prompt=QUESTION, frames=2,
            progress=False, remote=ServerBackend(qwen))
    expected = open_store(here)
    assert expected.index.frame.unique(dim=0).tolist() == [[0, 5]]
    for other in ("shell", "server"):
        store = open_store(tmp_path / other)
        assert torch.allclose(store["layers[1].layer_output"][:], expected["layers[1].layer_output"][:], atol=1e-5)
        assert torch.equal(store.index.frame, expected.index.frame), other


def test_refused_before_the_model_runs(qwen, folder, tmp_path, monkeypatch):
    def refused(match, error=ValueError, **given):
        arguments = {"values": ["layers[0].layer_output"], "images": folder, "out": tmp_path / "never",
                     "prompt": QUESTION, "progress": False, **given}
        with pytest.raises(error, match=match):
            collect(qwen, **arguments)
        assert not (tmp_path / "never").exists()

    refused(r"one video placeholder \(<\|video_pad\|>\) and no image's", prompt=prompt_of(qwen, "image"))
    refused(r"tower values are not collected over videos", values=["vision.tower_output"])
    refused(r"one column in a store", values=["vision.image_features", "vision.video_features"])
    refused(r"frames=0: the number of frames", frames=0)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "clip.mp4").write_bytes(b"not a video")
    refused(r"video clip.mp4 cannot be read \(.*\): fix or remove it, or pass on_error='skip'", images=broken)
    monkeypatch.setitem(sys.modules, "av", None)  # as where PyAV is not installed: `import av` fails
    refused(r"a.mp4 is a video file, and reading videos needs the video extra .*pip install 'vlreg\[video\]'",
            ImportError)
    with pytest.raises(ImportError, match=r"vlreg\[video\]"):  # the command says so before it loads the model
        main(["--debug", "collect", str(build("qwen2_vl")), "--images", str(folder), "--values",
              "layers[0].layer_output", "--out", str(tmp_path / "never")])
    assert not (tmp_path / "never").exists()


def test_the_collect_pages_video_section_runs_as_written(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from doc_blocks import blocks, mismatches, run

    page = Path(__file__).resolve().parents[1] / "docs" / "collect.md"
    text = page.read_text()
    section = text[text.index("## Videos"):]
    section = section[: section.index("\n## ", 3)]
    found = blocks(section)
    assert found, "docs/collect.md's video section has no Python block"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    wrong = mismatches(found, [run(block, namespace, "collect-videos") for block in found])
    assert not wrong, "\n".join(wrong)


def test_the_feature_site_refuses_a_store_with_videos_by_name(store, folder, tmp_path):
    from vlreg import features

    with pytest.raises(ValueError, match=r"rows of 3 videos \(first: 'a.mp4'\).*crops of images only"):
        features.build(store, tmp_path / "site", folder, directions={"a": torch.ones(64)},
                       value="vision.video_features", progress=False)
    assert not (tmp_path / "site").exists()
