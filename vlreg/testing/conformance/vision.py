"""The vision side of the conformance suite: the tower, the projector and the scatter."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch

from ...core.envoys.patches import VisionAttention, VisionLayer, VisionMlp
from ...core.envoys.seq2seq import with_decoder_start
from ...core.envoys.vision import Vision
from ...core.errors import Unavailable
from ...core.host import plugins
from ..kit import chat
from .helpers import attention_blocks, image, mixer
from .text import TextConformance
from .trust_scale import ScaleTrust
from .trust_vision import VisionTrust
from .text_loads import TextLoads
from .videos import VideoConformance


class VisionConformance(VideoConformance, TextLoads, ScaleTrust, VisionTrust, TextConformance):
    """What every vision-language family promises, on top of `TextConformance`.

    Also set:

    * ``image_sizes``: (width, height) of the images the tests use, one image a prompt;
    * ``projector_output_is_features``: whether ``projector.output`` is what the
      scatter writes (not on LLaVA-NeXT, which unpads it and adds newline rows);
    * ``tower_plain_sum``: ``plain_sum`` for the tower's blocks;
    * ``tower_o_proj``: the tower attention's output projection;
    * ``tower_blocks``: whether the vision part serves standard blocks (Gemma 4 unified's has
      none: its ``vision`` is an embedder; FastVLM's FastViT and Gemma 3n's MobileNetV5 have
      stages of other widths, which their claims refuse as ``vision.layers``), and the tests
      of blocks say so instead of running;
    * ``text_generation_load``: whether a text-generation load is served; where it is not
      (ShieldGemma 2's config names its classifier, which transformers' text-generation
      pipeline would build and which does not generate), it is refused before loading,
      naming ``task='image-text-to-text'``, and the tests of a text-only load check that;
    * ``projector_feature_calls``: on a projector the forward calls several times
      (`PerCall`), the calls whose outputs, joined in order, are the features: every call
      by default (LFM2-VL's, once per crop); Gemma 3n's embedder embeds the prompt's ids
      first, then the image (``slice(1, None)``).
    * ``has_projector``: whether a projector follows the vision part; where none does
      (Fuyu's vision part is one linear map to the text width), ``model.projector`` is not
      mounted and ``vision.tower_output`` is what the entry writes;
    * ``rewritten_tokens``: the config field (or fields) naming tokens, not image tokens, whose
      embeddings the wrapper writes over with rows of its own after the scatter (Ovis 2's
      ``visual_indicator_token_ids``; Ovis 2.5's boundary tokens, a field each): block 0
      receives the token embeddings everywhere else.
    """

    image_sizes: ClassVar[tuple[tuple[int, int], ...]] = ((112, 84),)
    projector_output_is_features: ClassVar[bool] = True
    has_projector: ClassVar[bool] = True
    tower_plain_sum: ClassVar[bool] = True
    tower_blocks: ClassVar[bool] = True
    projector_feature_calls: ClassVar[slice] = slice(None)
    rewritten_tokens: ClassVar[str | tuple[str, ...] | None] = None
    #: The processor's input marking the tokens that attend to the image's and it to them both
    #: ways (Molmo 2's ``mm_token_type_ids``: 1 at an image's start, column and end tokens too):
    #: zeroed features move the logits from the first of them on. ``None``: from the first image token.
    image_block: ClassVar[str | None] = None
    text_generation_load: ClassVar[bool] = True
    question: ClassVar[str] = "What is in this image?"

    def image_prompt(self, model: Any, images: int = 1, question: str | None = None) -> str:
        return chat(model, text=question or self.question, images=images)

    def entry(self, model: Any) -> Any:
        """Where the scattered embeddings enter the text model's first stack, read in a
        trace: the first block's ``input``, or, on an encoder-decoder, what the encoder is
        called with (``encoder.input_embeddings``: its blocks read them after the
        position embeddings and a norm)."""
        return model.prompt_entry()

    def images(self) -> list:
        return [image(width, height, seed) for seed, (width, height) in enumerate(self.image_sizes)]

    def order_input(self, model: Any) -> tuple[tuple, dict]:
        return (self.image_prompt(model),), {"images": self.images()[:1]}

    # -- names ----------------------------------------------------------------

    def test_tower_is_standard(self, model):
        assert isinstance(model.vision, Vision)
        assert model.vision.no_images() is None
        if not self.tower_blocks:
            assert model.vision.num_layers == 0 and "layers" not in model.vision.__dict__
            return
        assert model.vision.num_layers == len(model.vision.layers) > 0
        for block in model.vision.layers:  # a hybrid tower's blocks hold another mixer on some (`Layer.mixers`)
            assert isinstance(block, VisionLayer)
            assert len(block.present_mixers()) == 1
            assert "self_attn" not in block.__dict__ or isinstance(block.self_attn, VisionAttention)
            assert isinstance(block.mlp, VisionMlp)
        assert attention_blocks(model.vision), "a tower with no attention block"

    def test_tower_sizes_agree_with_its_blocks(self, model):
        self.needs_blocks()
        vision = model.vision
        assert vision.head_dim * vision.num_heads == vision.vision_hidden_size
        for block in attention_blocks(vision):
            attention = block.self_attn
            assert (attention.num_heads, attention.head_dim) == (vision.num_heads, vision.head_dim)
        widths = {block.mlp.intermediate_size for block in vision.layers}
        if len(widths) > 1:  # dense and experts' blocks (dots3.note's): the tower's is refused, naming them
            with pytest.raises(Unavailable, match="differ"):
                vision.intermediate_size
        else:
            assert widths == {vision.intermediate_size}
        first = attention_blocks(vision)[0]
        mixers = {type(mixer): mixer for block in vision.layers for mixer in block.present_mixers()}
        for envoy in (vision, vision.layers[0], first.self_attn, *mixers.values(), vision.layers[0].mlp):
            shown = repr(envoy)
            for name in type(envoy).values():
                assert getattr(type(envoy), name).description in shown, name

    def test_vision_values_are_in_forward_order(self, model):
        assert model.vision.values()[:2] == ["image_token_mask", "video_token_mask"]
        assert model.vision.values()[-2:] == ["image_features", "video_features"]
        rows = list(model.support())
        masks = ["vision.image_token_mask", *(["vision.video_token_mask"] if not model.vision.no_videos() else [])]
        assert rows[: len(masks) + 2] == ["input_ids", "attention_mask", *masks]
        # the tokens are embedded before the tower runs, or after it where the entry says so (Ovis 2.5's)
        if model.family.entry.order[0] == "vision":
            assert rows.index("vision.tower_output") < rows.index("token_embeddings")
        else:
            assert rows[len(masks) + 2] == "token_embeddings"
        assert rows.index("token_embeddings") < rows.index("vision.image_features")
        assert rows.index("vision.tower_output") < rows.index("vision.image_features") < rows.index("input")
        assert rows[-1] == "logits"

    def test_tower_keys_bind_only_in_the_tower(self, model):
        """No alias the tower's keys make binds on a text block: a text block may use the same
        standard name (``input_layernorm``) for a module of its own, never for the tower's
        native name. Where the text part's own declaration makes the same alias (LFM3-VL's
        blocks are LFM2-shaped in both parts: ``feed_forward`` is ``mlp``, ``conv`` is
        ``short_conv``), the text block holds it by its own right."""
        tower_aliases = set(model.vision._aliases.items())
        if self.tower_blocks:
            tower_aliases |= set(model.vision.layers[0]._aliases.items())
        tower_aliases = {(alias, native) for alias, native in tower_aliases if alias != "self_attn"}
        text = model.family.plugins.get("text")
        text_rename = plugins.call(text, "vlreg_rename", part=model.family.parts["text"]) if text else None
        own = {(alias, native) for native, alias in (text_rename or {}).items()}
        for block in model.layers:
            own_mixers = {(kind.name, kind.native) for kind in block.mixers if kind.native}
            assert not set(block._aliases.items()) & tower_aliases - own - own_mixers, "a tower key bound on a text block"

    # -- the scatter ----------------------------------------------------------

    def test_features_are_what_block_0_receives_at_the_image_tokens(self, model):
        ids = []  # the prompt's ids, read only where the family names tokens it rewrites
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            if self.rewritten_tokens:
                ids.append(model.input_ids.save())
            mask = model.vision.image_token_mask.save()
            embeddings = model.token_embeddings.save()
            features = model.vision.image_features.save()
            first = self.entry(model).save()
        assert mask.dtype == torch.bool and mask.shape == first.shape[:2]
        assert int(mask.sum()) == features.shape[0] > 0
        assert features.shape[1] == model.hidden_size
        embeddings = model.family.entry.along(model, embeddings, mask)  # at the stream's positions (`Entry.along`)
        # the features, or what an additive entry makes of them and the embeddings (`Entry.received`)
        assert torch.equal(first[mask], model.family.entry.received(model, embeddings[mask], features))
        rewritten = torch.zeros_like(mask)
        if self.rewritten_tokens:  # not image tokens: their own rows, which no image value covers
            fields = (self.rewritten_tokens,) if isinstance(self.rewritten_tokens, str) else self.rewritten_tokens
            named = torch.cat([torch.tensor(getattr(model.config, field)).reshape(-1) for field in fields])
            rewritten = torch.isin(ids[0], named)
            assert rewritten.any() and not (rewritten & mask).any()
            assert not torch.equal(first[rewritten], embeddings[rewritten])
        scale = model.family.entry.scale_of(model)  # Granite 4 Vision's embeddings scaled before block 0
        expected = embeddings if scale == 1 else embeddings * scale
        assert torch.equal(first[~mask & ~rewritten], expected[~mask & ~rewritten])

    def test_projector_output_is_the_features(self, model):
        if not self.has_projector:  # the vision part's output is what the entry writes
            assert "projector" not in model.__dict__
            with model.trace(self.image_prompt(model), images=self.images()[:1]):
                out = model.vision.tower_output.save()
                features = model.vision.image_features.save()
            assert torch.equal(out.reshape(features.shape), features)
            return
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            projected = model.projector.output.save()
            features = model.vision.image_features.save()
        if isinstance(projected, list):  # a projector called several times (`PerCall`): its calls' in order
            calls = projected[self.projector_feature_calls]
            projected = torch.cat([call.reshape(-1, call.shape[-1]) for call in calls])
        # a module returning more than its output (Chameleon's quantizer), or a ModelOutput (Molmo 2's adapter)
        if isinstance(projected, tuple) or hasattr(projected, "to_tuple"):
            projected = projected[0]
        if self.projector_output_is_features:
            assert torch.equal(projected.reshape(features.shape), features)
        else:
            assert projected.numel() != features.numel() or not torch.equal(projected.reshape(features.shape), features)

    def test_the_logits_are_the_models_own_forward_on_the_processors_encoding(self, model):
        """What a trace reads as ``logits`` is what the model's own forward returns, untraced,
        on the processor's encoding of the same prompt and images: vlreg's way in (chat
        prompt, images, processor options) adds or drops nothing but, on an encoder-decoder
        whose call starts no decoder, the start generate gives it (`with_decoder_start`)."""
        prompt, images = self.image_prompt(model), self.images()
        with model.trace(prompt, images=images[:1]):
            logits = model.logits.save()
        encoding = model.processor(text=prompt, images=images[:1], return_tensors="pt").to(model._module.dtype)
        with torch.no_grad():
            expected = model._module(**with_decoder_start(model._module, (), dict(encoding))).logits
        # the same values; a model may return them upcast (NemotronH's are float32 in a bfloat16 model)
        torch.testing.assert_close(logits, expected, rtol=0, atol=0, check_dtype=False)

    def test_zeroing_the_features_ablates_the_image(self, model):
        """Zeroed features are what the first block receives at the image tokens, and they
        move the logits from the first image token on, and none before it."""
        prompt, images = self.image_prompt(model), self.images()[:1]
        with model.trace(prompt, images=images):
            mask = model.vision.image_token_mask.save()
            plain = model.logits.save()
        with model.trace(prompt, images=images):
            embeddings = model.token_embeddings.save()
            model.vision.image_features[:] = 0
            first = self.entry(model).save()
            ablated = model.logits.save()
        embeddings = model.family.entry.along(model, embeddings, mask)
        zeros = torch.zeros_like(first[mask])
        assert torch.equal(first[mask], model.family.entry.received(model, embeddings[mask], zeros))
        # on an encoder-decoder the logits are the decoder's, each reading the whole prompt: all move
        start = int(mask[0].nonzero()[0]) if model.__dict__.get("encoder") is None else 0
        if self.image_block:
            kinds = model.processor(text=prompt, images=images, return_tensors="pt")[self.image_block][0]
            start = min(start, int(kinds.nonzero()[0]))
        # a routed MLP runs its experts over other token sets: a change at rounding is no move
        moved = (ablated - plain).abs().amax(-1)[0] > 1e-5
        assert not moved[:start].any() and moved[start:].all()

    def test_assigned_features_reach_block_0(self, model):
        prompt, images = self.image_prompt(model), self.images()[:1]
        with model.trace(prompt, images=images):
            mask = model.vision.image_token_mask.save()
            embeddings = model.token_embeddings.save()
            features = model.vision.image_features
            model.vision.image_features = torch.ones_like(features)
            first = self.entry(model).save()
        embeddings = model.family.entry.along(model, embeddings, mask)
        ones = torch.ones_like(first[mask])
        assert torch.equal(first[mask], model.family.entry.received(model, embeddings[mask], ones))

    # -- the tower ------------------------------------------------------------

    def test_tower_block_identity(self, model):
        self.needs_blocks()
        if not self.tower_plain_sum:
            pytest.skip("this tower's blocks norm their sublayers' outputs (not a plain sum)")
        rows = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            for block in model.vision.layers:
                rows.append((block.input.save(), mixer(block).attention_output.save(),
                             block.mlp.mlp_output.save(), block.layer_output.save()))
        for x, attn, mlp, out in rows:
            assert out.dim() == 3
            torch.testing.assert_close(x + attn + mlp, out)

    def test_in_place_edit_of_a_tower_block_reaches_the_next(self, model):
        self.needs_blocks()
        if model.vision.num_layers < 2:
            pytest.skip("the tower has one block")
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            model.vision.layers[0].layer_output[:] = 0
            after = model.vision.layers[1].input.save()
        assert after.abs().max() == 0

    def test_tower_values_are_patches(self, model):
        """The tower's values are ``[images, patches, width]``. A vision part that embeds no
        patches (a VQ encoder, whose first convolution runs at every pixel) declares
        ``vision.patch_embeddings`` in ``unavailable``: it refuses the value, and its width,
        with that reason."""
        refused = self.unavailable.get("vision.patch_embeddings")
        found = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            if refused is None:
                found.append(model.vision.patch_embeddings.save())
            out = (model.vision.layers[-1].layer_output if self.tower_blocks else model.vision.tower_output).save()
        assert out.dim() == 3 and out.shape[-1] == model.vision.vision_hidden_size
        if refused is None:
            assert found[0].dim() == 3 and found[0].shape[-1] == model.vision.patch_embedding_size
            return
        with pytest.raises(Unavailable, match=refused):
            with model.trace(self.image_prompt(model), images=self.images()[:1]):
                model.vision.patch_embeddings.save()
        with pytest.raises(Unavailable, match=refused):
            model.vision.patch_embedding_size

    def test_learned_positions_are_what_block_0_adds_to_the_patches(self, model):
        """On a tower declaring `vlreg.plugin.LearnedPositions` that adds them to the patch
        embeddings, ``vision.layers[0].input == patch_embeddings + position_embeddings``, and
        zeroing the positions leaves block 0 the patch embeddings alone."""
        if not getattr(model.vision, "positions_add_to_patches", False):
            pytest.skip("this tower declares no learned positions added to its patches (LearnedPositions)")
        prompt, images = self.image_prompt(model), self.images()[:1]
        with model.trace(prompt, images=images):
            patches = model.vision.patch_embeddings.save()
            positions = model.vision.position_embeddings.save()
            first = model.vision.layers[0].input.save()
        assert positions.shape == patches.shape and bool(positions.abs().sum() > 0)
        torch.testing.assert_close(patches + positions, first.reshape(patches.shape))
        with model.trace(prompt, images=images):
            model.vision.position_embeddings[:] = 0
            first = model.vision.layers[0].input.save()
        torch.testing.assert_close(first.reshape(patches.shape), patches)

    def test_vision_rows_in_support(self, model):
        rows = model.support()
        blocks = ("vision.layer_output", "vision.self_attn.attention_output",
                  "vision.self_attn.attention_probabilities", "vision.mlp.mlp_output")
        for row in ("vision.patch_embeddings", "vision.tower_output", "vision.image_token_mask",
                    "vision.image_features", *blocks):
            # a value the blocks serve differently (GOT-OCR 2's windowed and global attention) has a row a block
            per_block = [found for found in rows if found.startswith("vision.layers.")
                         and found.split(".", 3)[3] == row.removeprefix("vision.")]
            assert (row in rows or bool(per_block)) == (self.tower_blocks or row not in blocks), row
        assert model.vision.support() == {
            row.removeprefix("vision."): reason for row, reason in rows.items() if row.startswith("vision.")
        }

    def needs_blocks(self) -> None:
        if not self.tower_blocks:
            pytest.skip("this vision part serves no blocks (an embedder, or a tower whose blocks its family refuses)")
