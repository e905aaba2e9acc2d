"""Partial coverage: a claim declares what of its part it does not serve (`Claim.refuses`),
and the host says so everywhere a user looks: `support()`, the value's refusal, the
video-only trace's refusal and `vlreg plugins --coverage`."""

import json

import numpy
import pytest

from vlreg_timm.wrappers import FASTVIT_BLOCKS
from vlreg_qwen2_vl import plugin as qwen2_vl
from vlreg import Unavailable, hookimpl
from vlreg.cli import main, partial
from vlreg.plugin import Claim
from vlreg.testing import Forwarding, build, chat, load, registered
from vlreg.testing.conformance import image

PATCHES = "the patch embedding is not served by this patched build; read vision.layers[0].input"
SECOND_TOWER = "the high-resolution tower has no standard names; its output reaches the features with the rest"
AUDIO = "audio is not served: the processor is handed text, images and videos only"


class Patched(Forwarding):
    """Qwen2-VL as a patched build that serves less of it, and says what."""

    def __init__(self):
        super().__init__(qwen2_vl)

    @hookimpl
    def vlreg_claims(self):
        refuses = {"vision.patch_embeddings": PATCHES, "vision.high_resolution": SECOND_TOWER, "audio": AUDIO}
        return [Claim("wrapper", "qwen2_vl", overrides="qwen2_vl", refuses=refuses)]


@pytest.fixture(scope="module")
def path():
    return str(build("qwen2_vl"))


def test_a_claim_takes_reasons_only():
    with pytest.raises(ValueError, match="refuses= maps a name to the sentence saying why"):
        Claim("wrapper", "x", refuses={"videos": " "})
    assert Claim("wrapper", "x", refuses={"videos": "why"}) == Claim("wrapper", "x")  # not part of who serves it


def test_the_videos_row_and_the_video_only_traces_refusal_of_an_images_value(path):
    """Qwen2-VL's claim refuses nothing; the core's ``videos`` row says how the tower's values
    are told apart on a video, and an image's value on a video-only trace is refused."""
    model = load(path)
    rows = model.support()
    assert "the video's call's" in rows["videos"] and list(rows)[-1] == "logits"
    assert model.family.sentences == {}
    video = [numpy.random.default_rng(0).integers(0, 255, (4, 56, 56, 3), dtype=numpy.uint8)]
    with pytest.raises(Unavailable, match="no images, only videos, and this value is an image's alone"):
        with model.trace(chat(model, "video", text="What is this?"), videos=video):
            model.vision.image_features.save()
    with model.trace(chat(model, "image", text="What is this?"), images=[image(56, 56)]):
        features = model.vision.image_features.save()  # images are served whole
    assert features.shape[0] > 0


def test_a_refused_row_refuses_reads_and_names_without_values_sit_with_their_part(path):
    with registered(Patched(), name="patched"):
        model = load(path)
        rows = model.support()
        assert rows["vision.patch_embeddings"] == PATCHES
        assert rows["vision.high_resolution"] == SECOND_TOWER and rows["audio"] == AUDIO
        assert rows["videos"] == model.vision.video_calls()  # the core's: the patched claim refuses no videos
        names = list(rows)
        last_tower_row = max(i for i, row in enumerate(names) if row.startswith("vision.") and row != "vision.high_resolution")
        assert names.index("vision.high_resolution") == last_tower_row + 1
        assert names[names.index("audio") + 1:] in (["uncapped_logits", "logits"], ["logits"])  # before the readout
        assert model.vision.support()["high_resolution"] == SECOND_TOWER
        with pytest.raises(Unavailable, match="not served by this patched build"):
            with model.trace(chat(model, "image", text="What is this?"), images=[image(56, 56)]):
                model.vision.patch_embeddings.save()
        assert partial()["qwen2_vl"] == Patched().vlreg_claims()[0].refuses
    assert "qwen2_vl" not in partial()


BLOCKS = "this patched build does not serve the tower's blocks; read vision.tower_output"


class WithoutBlocks(Patched):
    """Qwen2-VL whose tower binds no blocks, and whose wrapper's claim says why."""

    @hookimpl
    def vlreg_claims(self):
        return [Claim("wrapper", "qwen2_vl", overrides="qwen2_vl", refuses={"vision.layers": BLOCKS}),
                Claim("vision", "qwen2_vl_vision", overrides="qwen2_vl")]

    @hookimpl
    def vlreg_rename(self, part):
        names = qwen2_vl.vlreg_rename(part)
        return {key: alias for key, alias in names.items() if alias != "layers"} if part.kind == "vision" else names


def test_a_refused_child_the_load_does_not_bind_says_the_claims_reason(path):
    with registered(WithoutBlocks(), name="without-blocks"):
        model = load(path)
        assert "layers" not in model.vision.__dict__
        assert model.support()["vision.layers"] == BLOCKS
        with pytest.raises(AttributeError, match="model.vision.layers is not served: this patched build"):
            model.vision.layers
        assert model.vision.without_blocks() == BLOCKS


def test_coverage_marks_a_partial_type_with_its_reasons(capsys):
    assert main(["plugins", "--coverage"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("fast_vlm "))
    assert line.endswith("(partial)") and "vlreg-timm" in line
    assert f"refuses vision.layers: {FASTVIT_BLOCKS}" in out
    assert f"({len(partial())} of them partially)" in out.splitlines()[-1]
    assert main(["plugins", "--coverage", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows["fast_vlm"]["refuses"]["vision.layers"] == FASTVIT_BLOCKS and rows["qwen2_vl"]["refuses"] == {}
    assert rows["kosmos-2.5"] == {"plugin": None, "refuses": {}, "declines": None}


#: The types refused by name (docs/surveys/coverage-iv.md §2; π0.5 is transformers 5.25's):
#: the plugin that declines each, and a fragment of its reason.
REFUSED = {"evolla": ("text", "reads protein sequences"), "pi0": ("gemma", "robot action policy"),
           "pi05": ("gemma", "robot action policy"), "mistral4": ("mistral3", "text-only in transformers"),
           "diffusion_gemma": ("gemma", "block-diffusion generator")}


@pytest.mark.parametrize("model_type", sorted(REFUSED))
def test_a_type_refused_by_name_says_why_in_the_census_and_at_load(model_type, capsys):
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    from vlreg import NoFamily
    from vlreg.cli import coverage
    from vlreg.core.host.family import resolve

    if model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        pytest.skip(f"{model_type!r} is not in this transformers release (5.25 adds it)")
    plugin, reason = REFUSED[model_type]
    assert coverage()[model_type] is None, "a type refused by name is not counted as served"
    assert main(["plugins", "--coverage"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith(f"{model_type} "))
    assert f"refused by plugin '{plugin}'" in line and reason in line
    assert out.splitlines()[-1].endswith(f"{sum(1 for t in REFUSED if t in coverage())} refused by name")
    assert main(["plugins", "--coverage", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[model_type]
    assert row["plugin"] is None and reason in row["declines"]
    with pytest.raises(NoFamily, match=f"plugin '{plugin}'.*{reason}"):
        resolve(AutoConfig.for_model(model_type))


def test_a_declined_type_is_a_sentence_on_the_claim():
    from vlreg.plugin import Plugin, Wrapper

    declared = Plugin(Wrapper("tiny_policy", declines="a policy, not a text generator"))
    assert [claim.declines for claim in declared.vlreg_claims()] == ["a policy, not a text generator"]
    assert Plugin(Wrapper("tiny", declines=lambda part: None)).vlreg_claims()[0].declines is None
    with pytest.raises(ValueError, match="declines= is the sentence saying why"):
        Claim("wrapper", "tiny", declines=" ")
