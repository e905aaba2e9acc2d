"""One test per hookspec: a throwaway plugin serves Qwen2-VL with one contribution
changed, registered by hand in place of the built-in plugin, and the change shows."""

import copy
import inspect
from pathlib import Path

import pytest
import torch

from vlreg_qwen2_vl import plugin as qwen2_vl
from vlreg import ReadOnly, StandardizedTransformer, Unavailable, analysis, hookimpl
from vlreg.core.host import hookspecs
from vlreg.plugin import ImageGrid, Layer, VideoGrid, read_only, value
from vlreg.testing import Forwarding, build, builders, load, registered
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def path():
    return str(build("qwen2_vl"))


class Qwen2VLAgain(Forwarding):
    """Serves what the built-in plugin serves, its hooks written by hand; tests override one
    hook each."""

    def __init__(self):
        super().__init__(qwen2_vl)


def prompt(model):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def test_every_hookspec_is_documented_and_tested():
    specs = [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("vlreg_")]
    assert specs
    source = inspect.getsource(inspect.getmodule(test_every_hookspec_is_documented_and_tested))
    guide = (Path(__file__).resolve().parents[1] / "docs" / "writing-a-plugin.md").read_text()
    for name in specs:
        assert inspect.getdoc(getattr(hookspecs, name)), f"{name} has no docstring"
        assert f"### `{name}(" in guide, f"{name} has no section in docs/writing-a-plugin.md"
        assert f"def test_{name}" in source, f"{name} has no test here"


def test_vlreg_claims(path):
    class Again(Qwen2VLAgain):
        pass

    with registered(Again(), name="again", replacing=[qwen2_vl]):
        model = load(path)
        assert model.family.name == "again"
        assert set(model.family.plugins) == {"wrapper", "text", "vision"}
    assert load(path).family.name == "qwen2_vl"


def test_vlreg_rename(path):
    class Renamed(Qwen2VLAgain):
        @hookimpl
        def vlreg_rename(self, part):
            rename = dict(qwen2_vl.vlreg_rename(part) or {})
            if part.kind == "wrapper":
                rename["model.language_model.rotary_emb"] = "rotary"
            return rename

    with registered(Renamed(), name="renamed", replacing=[qwen2_vl]):
        model = load(path)
        assert model.rotary.path == "model.model.language_model.rotary_emb"
        assert model._aliases["rotary"] == "model.language_model.rotary_emb"
    assert "rotary" not in load(path)._aliases


class NormedLayer(Layer):
    """A block serving one more value: its output's norm per token."""

    @value("output")
    def output_norm(self, raw):
        return raw.norm(dim=-1)


def test_vlreg_envoys(path):
    class Envoys(Qwen2VLAgain):
        @hookimpl
        def vlreg_envoys(self, part):
            envoys = dict(qwen2_vl.vlreg_envoys(part) or {})
            if part.kind == "text":
                from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLDecoderLayer

                envoys[Qwen2VLDecoderLayer] = NormedLayer
            return envoys

    with registered(Envoys(), name="envoys", replacing=[qwen2_vl]):
        model = load(path)
        with model.trace("Hello"):
            out = model.layers[1].layer_output.save()
            norms = model.layers[1].output_norm.save()
        torch.testing.assert_close(norms, out.norm(dim=-1))
        assert model.support()["output_norm"] is None


def test_vlreg_entry(path):
    class NoEntry(Qwen2VLAgain):
        vlreg_entry = hookimpl(lambda self, part: None)

    with registered(NoEntry(), name="no-entry", replacing=[qwen2_vl]):
        model = load(path)
        assert "names no projector" in model.vision.no_images()
        assert not [row for row in model.support() if row.startswith("vision")]
        with pytest.raises(Unavailable, match="names no projector"):
            with model.trace("Hello"):
                model.vision.image_features.save()


def test_vlreg_video_grids(path):
    """A video's grids: one `VideoGrid` a temporal patch here, a row of strips over its 2 frames;
    undeclared, `vision.geometry(videos=...)` refuses by name."""
    def strips(encoding, videos, processor):
        return [[VideoGrid(1, h * w // 4, [(0, 0, 1, 1)] * (h * w // 4), frames=(2 * k, 2 * k + 1)) for k in range(t)]
                for (t, h, w), video in zip(encoding["video_grid_thw"].tolist(), videos)]

    video, text = [image(56, 56, seed=k) for k in range(4)], "<|vision_start|><|video_pad|><|vision_end|>Why?"
    with registered(type("Strips", (Qwen2VLAgain,), {"vlreg_video_grids": hookimpl(lambda self, part: strips)})(),
                    name="strips", replacing=[qwen2_vl]):
        model = load(path)
        (seen,) = model.vision.geometry(text, videos=[video])
        assert seen.frames.tolist() == [[0, 1]] * 4 + [[2, 3]] * 4 and seen.seconds is None
    with registered(type("Undeclared", (Qwen2VLAgain,), {"vlreg_video_grids": hookimpl(lambda self, part: None)})(),
                    name="undeclared", replacing=[qwen2_vl]):
        model = load(path)
        with pytest.raises(Unavailable, match="declares no video grids"):
            model.vision.geometry(text, videos=[video])


def test_vlreg_image_grids(path):
    def one_row(encoding, images, processor):
        """Every image as one row of tokens, each over a vertical strip of the image."""
        grids = []
        for (t, h, w), picture in zip(encoding["image_grid_thw"].tolist(), images):
            n, width = h * w // 4, picture.size[0]
            boxes = [(width * i / n, 0, width * (i + 1) / n, picture.size[1]) for i in range(n)]
            grids.append(ImageGrid(1, n, boxes, label="strips"))
        return grids

    class Strips(Qwen2VLAgain):
        @hookimpl
        def vlreg_image_grids(self, part):
            assert part.kind == "wrapper"
            return one_row

    class Undeclared(Qwen2VLAgain):
        vlreg_image_grids = hookimpl(lambda self, part: None)

    class Miscounted(Qwen2VLAgain):
        vlreg_image_grids = hookimpl(
            lambda self, part: lambda encoding, images, processor: [ImageGrid(1, 1, [(0, 0, 1, 1)]) for _ in images])

    picture = image(112, 84)
    with registered(Strips(), name="strips", replacing=[qwen2_vl]):
        model = load(path)
        (seen,) = model.vision.geometry(prompt(model), [picture])
        assert (seen.grids[0].label, seen.grids[0].rows, seen.grids[0].columns) == ("strips", 1, 12)
        assert seen.boxes[-1].tolist() == [112 - 112 / 12, 0, 112, 84]
    with registered(Undeclared(), name="undeclared", replacing=[qwen2_vl]):
        model = load(path)
        with pytest.raises(Unavailable, match="declares no image grids"):
            model.vision.geometry(prompt(model), [picture])
    with registered(Miscounted(), name="miscounted", replacing=[qwen2_vl]):
        model = load(path)
        with pytest.raises(ValueError, match=r"grids give \[1\] tokens per image .* put 12 image tokens"):
            model.vision.geometry(prompt(model), [picture])
    model = load(path)
    assert model.vision.geometry(prompt(model), [picture])[0].grids[0].label == "image"


def test_vlreg_load_options(path):
    """What the wrapper asks of a load of one task reaches from_pretrained for that task
    alone, where the user set no such keyword (Emu3's asks a key mapping of its text-only
    class, `plugins/chameleon/tests/test_emu3.py`)."""

    class HalfImages(Qwen2VLAgain):
        vlreg_load_options = hookimpl(lambda self, part: {"image-text-to-text": {"dtype": torch.bfloat16}})

    with registered(HalfImages(), name="half-images", replacing=[qwen2_vl]):
        assert load(path)._module.dtype == torch.bfloat16
        assert load(path, dtype=torch.float32)._module.dtype == torch.float32  # the user's keyword wins
        assert StandardizedTransformer(path, dispatch=True, device="cpu")._module.dtype == torch.float32
    assert load(path)._module.dtype == torch.float32


def test_vlreg_processor(path):
    """The wrapper's adaptation of the processor transformers loads is ``model.processor``:
    traces encode with it, and a lazy build that dispatches keeps it (ShieldGemma 2's, which
    keeps the text it is given, `plugins/gemma/tests/test_shieldgemma2.py`)."""
    seen = []

    def adapt(processor):
        if getattr(processor, "adapted", False):
            return processor
        adapted = copy.copy(processor)
        adapted.adapted = True
        call = type(processor).__call__
        adapted.__class__ = type("Counted", (type(processor),), {"__call__": lambda self, *a, **k: seen.append(1) or call(self, *a, **k)})
        return adapted

    class Adapting(Qwen2VLAgain):
        vlreg_processor = hookimpl(lambda self, part: adapt)

    with registered(Adapting(), name="adapting", replacing=[qwen2_vl]):
        for dispatch in (True, False):
            model = StandardizedTransformer(path, task="image-text-to-text", dispatch=dispatch, device="cpu")
            assert model.processor.adapted and model.family.processor is adapt
            with model.trace(prompt(model), images=[image(56, 56)]):
                model.logits.save()
            assert model.processor.adapted and seen, dispatch
            seen.clear()
    assert not getattr(load(path).processor, "adapted", False)


def test_vlreg_suppressed_tokens(path):
    """Ids the wrapper's forward sets lowest after lm_head (Chameleon's image codes): the
    logits are read where the model returns them, and every readout vlreg makes itself (the
    logit lens) sets them lowest too. An answer given as a list reaches the host whole."""

    class Suppressing(Qwen2VLAgain):
        vlreg_suppressed_tokens = hookimpl(lambda self, part: [3, 5])

    with registered(Suppressing(), name="suppressing", replacing=[qwen2_vl]):
        model = load(path)
        assert model.family.suppressed_tokens == (3, 5)
        assert type(model).logits.location(model) == f"{model.path}.output"
        with model.trace("Hello"):
            last = model.layers[-1].layer_output.save()
        lens = analysis.project_on_vocab(model, last)
        plain = model.lm_head._module(model.norm._module(last))
        assert (lens[..., [3, 5]] == torch.finfo(lens.dtype).min).all()
        keep = [index for index in range(model.vocab_size) if index not in (3, 5)]
        torch.testing.assert_close(lens[..., keep], plain[..., keep])
    model = load(path)
    assert model.family.suppressed_tokens == () and type(model).logits.location(model) == f"{model.lm_head.path}.output"


def test_vlreg_readout(path):
    """The family's readout: a transform after lm_head moves where the logits are read and
    reaches the lens; a sentence refuses the lens by name before anything runs."""
    from vlreg.plugin import Readout

    class Halving(Qwen2VLAgain):
        vlreg_readout = hookimpl(lambda self, part: Readout(after=lambda model, logits: logits / 2))

    with registered(Halving(), name="halving", replacing=[qwen2_vl]):
        model = load(path)
        assert type(model).logits.location(model) == f"{model.path}.output"
        with model.trace("Hello"):
            last = model.layers[-1].layer_output.save()
        torch.testing.assert_close(analysis.project_on_vocab(model, last),
                                   model.lm_head._module(model.norm._module(last)) / 2)

    class Refusing(Qwen2VLAgain):
        vlreg_readout = hookimpl(lambda self, part: "this model reads its stream out otherwise")

    with registered(Refusing(), name="refusing", replacing=[qwen2_vl]):
        model = load(path)
        with pytest.raises(Unavailable, match="project_on_vocab is unavailable: this model reads"):
            analysis.project_on_vocab(model, torch.zeros(model.hidden_size))


def test_vlreg_layers():
    """IDEFICS's blocks in two lists, run in turn: ``layers`` is both in call order, each
    entry the envoy of its module, with no module added to the model; a declaration whose
    lists do not interleave so is refused when the model is built, naming them."""
    from vlreg.plugin import Interleaved
    from vlreg_idefics import plugin as idefics

    path = str(build("idefics"))
    model = load(path)
    text = model.model
    assert [block.path for block in model.layers] == [
        text.gated_cross_attn_layers[0].path, text.layers[0].path, text.gated_cross_attn_layers[1].path, text.layers[1].path]
    assert model.layers[2] is text.gated_cross_attn_layers[1] and model.cross_attention_layers == [0, 2]
    assert not [name for name in model._module.state_dict() if not name.startswith(("model.", "lm_head."))]
    lazy = load(path, dispatch=False)
    lazy.dispatch()
    assert lazy.layers._module[1] is lazy.layers[1]._module is lazy._module.model.layers[0]  # the real modules now
    assert next(lazy.layers[1]._module.parameters()).device.type == "cpu"

    class Sparser(Forwarding):
        vlreg_layers = hookimpl(lambda self, part: Interleaved("model.layers", "model.gated_cross_attn_layers", every=2)
                                if part.kind == "wrapper" else None)

    with registered(Sparser(idefics), name="sparser", replacing=[idefics]):
        with pytest.raises(ValueError, match="gated_cross_attn_layers holds 2 blocks, but the 2 blocks at model.layers, one of them run before every 2, need 1"):
            load(path)


def test_vlreg_refuses(path):
    def second_block_only(envoy):
        return "this block is out of service; read layers[0] instead" if envoy.place.label.startswith("layers[1]") else None

    class Limited(Qwen2VLAgain):
        vlreg_refuses = hookimpl(lambda self, part: {"mlp.mlp_output": second_block_only} if part.kind == "text" else None)

    with registered(Limited(), name="limited", replacing=[qwen2_vl]):
        model = load(path)
        rows = model.support()
        assert "mlp.mlp_output" not in rows
        assert rows["layers.0.mlp.mlp_output"] is None
        assert "out of service" in rows["layers.1.mlp.mlp_output"]
        before = {name: tensor.clone() for name, tensor in model._module.state_dict().items()}
        with pytest.raises(Unavailable, match=r"layers\[1\]\.mlp\.mlp_output is unavailable: this block"):
            with model.trace(prompt(model), images=[image(56, 56)]):
                model.layers[0].mlp.mlp_output[:] = 0
                model.layers[1].mlp.mlp_output.save()
        after = model._module.state_dict()
        assert all(torch.equal(tensor, after[name]) for name, tensor in before.items())


def test_vlreg_refuses_read_only(path):
    def frozen_second_block(envoy):
        return "layers[1] is frozen; edit layers[0]" if envoy.block_index == 1 else None

    class Frozen(Qwen2VLAgain):
        vlreg_refuses = hookimpl(lambda self, part: {"mlp.*": read_only(frozen_second_block)} if part.kind == "text" else None)

    with registered(Frozen(), name="frozen", replacing=[qwen2_vl]):
        model = load(path)
        assert model.read_only()["layers.1.mlp.mlp_output"] == "layers[1] is frozen; edit layers[0]"
        assert "layers.0.mlp.mlp_output" not in model.read_only()
        text = prompt(model)
        for write in ("assign", "in place"):
            with pytest.raises(ReadOnly, match=r"layers\[1\]\.mlp\.mlp_output cannot be written: layers\[1\] is frozen"):
                with model.trace(text, images=[image(56, 56)]):
                    if write == "assign":
                        model.layers[1].mlp.mlp_output = torch.zeros(1)
                    else:
                        model.layers[1].mlp.mlp_output[:] = 0
        with model.trace(text, images=[image(56, 56)]):
            model.layers[0].mlp.mlp_output[:] = 0
            read = model.layers[1].mlp.mlp_output.save()  # reading stays allowed
        read[:] = 1  # and the saved tensor is the user's after the trace
        assert bool((read == 1).all())


def test_vlreg_declines(path):
    """A plugin that declines a checkpoint is named with its reason, before any weight is
    read; its other checkpoints load as before."""
    from vlreg.core.errors import NoFamily

    class Picky(Qwen2VLAgain):
        @hookimpl
        def vlreg_declines(self, part):
            if part.kind == "text" and part.config.num_hidden_layers == 2:
                return "two text blocks are too few for this plugin"
            return None

    deeper = str(build("qwen2_vl", text_config={"num_hidden_layers": 3}))
    with registered(Picky(), name="picky", replacing=[qwen2_vl]):
        with pytest.raises(NoFamily, match="plugin 'picky'.*two text blocks are too few"):
            StandardizedTransformer(path, task="image-text-to-text")
        assert load(deeper).num_layers == 3


def test_vlreg_adapters():
    from vlreg.plugin import adapter
    from vlreg_qwen2_vl.vision import QwenVision, QwenVisionAttention

    qwen_vit = adapter("qwen_vit")  # what Qwen2.5-VL (and Qwen3-VL) build on
    assert qwen_vit.Vision is QwenVision and qwen_vit.Attention is QwenVisionAttention
    assert qwen_vit.tower_rename["blocks"] == "layers" and qwen_vit.mounts == {"vision": "model.visual",
                                                                               "projector": "model.visual.merger"}
    siglip = adapter("siglip")  # what towers laid out as SigLIP's under other classes build on
    assert siglip.rename["encoder.layers"] == "layers" and siglip.rename["post_layernorm"] == "norm"
    with pytest.raises(LookupError, match="no installed vlreg plugin publishes the adapter 'no_such_tower'"):
        adapter("no_such_tower")

    class Rival:
        @hookimpl
        def vlreg_adapters(self):
            return {"qwen_vit": object()}

    with registered(Rival(), name="rival"):
        with pytest.raises(LookupError, match="'qwen_vit' is published by plugin .* and plugin 'rival'"):
            adapter("qwen_vit")
    assert adapter("qwen_vit") is qwen_vit


def test_vlreg_checkpoints(tmp_path):
    written = []

    def tiny(path, **overrides):
        written.append((path, overrides))
        return path

    class Builder:
        @hookimpl
        def vlreg_checkpoints(self):
            return {"nothing": tiny}

    with registered(Builder(), name="builder"):
        assert "nothing" in builders() and "qwen2_vl" in builders()
        assert build("nothing", tmp_path / "out", depth=3) == tmp_path / "out"
        assert written == [(tmp_path / "out", {"depth": 3})]
    with pytest.raises(KeyError, match="no plugin builds a checkpoint named 'nothing'"):
        build("nothing")


def test_every_hookspec_states_what_it_takes_and_returns():
    """A plugin author reads the types off the one page of hooks (and a type checker does)."""
    import inspect
    import typing

    from vlreg.core.host import hookspecs

    specs = [f for name, f in vars(hookspecs).items() if name.startswith("vlreg_") and inspect.isfunction(f)]
    assert specs
    for spec in specs:
        hints = typing.get_type_hints(spec, {**vars(hookspecs), **_parts()})
        assert "return" in hints, f"{spec.__name__} does not say what it returns"
        assert set(inspect.signature(spec).parameters) <= set(hints), f"{spec.__name__}'s parameters are untyped"


def _parts():
    from vlreg.core.host import parts
    from vlreg.core.images import entries

    return {**vars(parts), **vars(entries)}
