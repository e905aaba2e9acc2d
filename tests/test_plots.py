"""`vlreg.plots`: the per-block curves of the analysis helpers as matplotlib plots, from
real helper runs on a small random-weight Qwen2-VL."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from PIL import Image

from vlreg import analysis
from vlreg.demo import scene
from vlreg.pictures import caption, number

CHECKPOINT = "qwen2_vl"

plots = pytest.importorskip("vlreg.plots", reason="matplotlib is not installed (pip install 'vlreg[plots]')")


@pytest.fixture(scope="module")
def inputs(model):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return prompt, scene(112, 84), scene(112, 84, swap=True)


def axes(plot):
    (found,) = plot.figure.axes
    return found


def test_patching_is_a_bar_per_block_of_the_effect_on_the_target_logit(model, inputs):
    prompt, image, source = inputs
    patched = analysis.patch_image(model, prompt, [image], [source])
    plot = plots.patching(patched, model, caption=caption(model, prompt))
    found = axes(plot)
    heights = [bar.get_height() for bar in found.patches]
    assert heights == pytest.approx(patched.effects.tolist())
    assert [t.get_text() for t in found.get_xticklabels()] == [str(layer) for layer in patched.layers]
    name = model.tokenizer.decode(patched.target)
    assert found.get_ylabel() == f"change of the {name!r} logit (logits)" and found.get_xlabel() == "text block"
    assert plot.figure.get_supxlabel() == caption(model, prompt)


def test_a_per_token_patching_is_plotted_at_chosen_tokens_or_refused(model, inputs):
    prompt, image, source = inputs
    each = analysis.patch_image(model, prompt, [image], [source], per_token=True, batch=8)
    with pytest.raises(ValueError, match="pass tokens="):
        plots.patching(each, model)
    found = axes(plots.patching(each, model, tokens=[0, 3]))
    assert [bar.get_height() for bar in found.patches] == pytest.approx(each.effects[:, [0, 3]].T.reshape(-1).tolist())
    assert [t.get_text() for t in found.get_legend().get_texts()] == ["token 0", "token 3"]


def test_the_lens_is_a_line_per_block_at_the_tokens_and_elsewhere(model, inputs):
    prompt, image, _ = inputs
    lens = analysis.logit_lens(model, prompt, [image], target=5)
    found = axes(plots.lens(lens, [2, 5], model))
    at, elsewhere = found.get_lines()[:2]
    probabilities = lens.target_probabilities[0]
    assert list(at.get_ydata()) == pytest.approx(probabilities[:, [2, 5]].mean(-1).tolist())
    others = [t for t in range(probabilities.shape[1]) if t not in (2, 5)]
    assert list(elsewhere.get_ydata()) == pytest.approx(probabilities[:, others].max(-1).values.tolist())
    assert found.get_ylabel().endswith("(probability)")
    with pytest.raises(ValueError, match="without a target"):
        plots.lens(analysis.logit_lens(model, prompt, [image]), [2])


def test_attention_is_the_share_on_the_tokens_per_block_against_chance(model, inputs):
    prompt, image, _ = inputs
    seen = analysis.attention_to_images(model, prompt, [image])
    found = axes(plots.attention(seen, [1]))
    line, chance = found.get_lines()[:2]
    weights = seen.weights[0].mean(1)
    assert list(line.get_ydata()) == pytest.approx((weights[:, 1] / weights.sum(-1)).tolist())
    assert list(chance.get_ydata()) == pytest.approx([1 / weights.shape[-1]] * 2)
    assert found.get_ylabel() == "share of the image's attention (fraction)"


def test_ticks_use_the_pictures_number_format():
    found = axes(plots.blocks([0.0123, 0.0456, 0.0789], label="p (probability)"))
    found.figure.canvas.draw()
    shown = [t.get_text() for t in found.get_yticklabels() if t.get_text()]
    assert shown and all(text == number(float(value)) for text, value in zip(shown, found.get_yticks()))


def test_a_plot_shows_itself_in_a_notebook_and_draws_the_same_bytes_twice(tmp_path):
    plot = plots.blocks({"a": [1, 2, 3], "b": [3, 1, 2]}, label="x (units)", kind="bar", title="t", caption="c")
    png = plot._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == plots.blocks(
        {"a": [1, 2, 3], "b": [3, 1, 2]}, label="x (units)", kind="bar", title="t", caption="c").png()
    plot.save(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes() == png
    assert Image.open(io.BytesIO(png)).size == plot.image().size == (640, 360)


def test_bad_curves_are_refused():
    with pytest.raises(ValueError, match="different lengths"):
        plots.blocks({"a": [1, 2], "b": [1]}, label="x")
    with pytest.raises(ValueError, match="'line' or a 'bar'"):
        plots.blocks([1, 2], label="x", kind="pie")
    with pytest.raises(ValueError, match="against 3 blocks"):
        plots.blocks([1, 2], label="x", layers=[0, 1, 2])


def test_without_matplotlib_the_import_says_what_to_install():
    code = "import sys; sys.modules['matplotlib'] = None\ntry:\n import vlreg.plots\nexcept ImportError as e:\n print(e)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'vlreg[plots]'" in done.stdout
