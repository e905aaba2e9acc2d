"""The conformance suite of a family whose image reaches the text model by cross-attention.

    from vlreg.testing.conformance.cross import CrossAttentionConformance

    class TestMllama(CrossAttentionConformance):
        checkpoint = "mllama"

The image enters no token stream there (`vlreg.core.envoys.cross`): ``vision.image_features`` is
the states the text model is called with, and the blocks in
``model.cross_attention_layers`` read them through ``cross_attn``. This suite keeps every
test of `VisionConformance` that holds as it is, and replaces those that speak of the
scatter with what a cross-attention family promises instead:

* an edit of ``vision.image_features`` reaches every cross-attention block (each one's
  ``attention_keys`` and ``attention_values`` are its projections of the edited states)
  and changes no block before the first of them;
* each cross-attention pattern sums to 1 over the image's positions (under eager);
* every block's identity holds, a cross-attention block's with its gates:
  ``input + attention_gate * attention_output + mlp_gate * mlp_output == layer_output``
  (the sublayer its ``text_row_mask`` masks times it, where the family serves one);
* the cross-attention blocks' values refuse on a prompt without an image, which the text
  model runs without them; where the entry needs an image on every call (IDEFICS's), such a
  prompt is refused before the model runs.

The tests that run a text prompt through the blocks run the image prompt instead where a
cross-attention block is read (it does not run otherwise). The first block may
cross-attend (IDEFICS's does); the last block should cross-attend or follow one, so the
suite's writes reach one.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from ...core.envoys.cross import CrossAttentionLayer, CrossAttentionMixer
from ...core.envoys.text import Attention, Layer, Mlp
from ...core.errors import Unavailable
from .helpers import text_rows
from .vision import VisionConformance

CROSS_INTERIOR = ("attention_queries", "attention_keys", "attention_values", "attention_scores",
                  "attention_probabilities", "attention_head_outputs")


class CrossAttentionConformance(VisionConformance):
    """`VisionConformance` for a family that declares a `CrossAttention` (see the module)."""

    def image_input(self, model: Any) -> tuple[tuple, dict]:
        return (self.image_prompt(model),), {"images": self.images()[:1]}

    def cross_blocks(self, model: Any) -> list[CrossAttentionLayer]:
        return [model.layers[index] for index in model.cross_attention_layers]

    # -- names ----------------------------------------------------------------

    def test_blocks_are_standard(self, model):
        crossing = model.cross_attention_layers
        assert crossing and len(crossing) < len(model.layers), "blocks that cross-attend and blocks that do not"
        for index, block in enumerate(model.layers):
            assert isinstance(block, Layer) and isinstance(block.mlp, Mlp)
            mixers = [mixer.name for mixer in block.mixers if mixer.name in block.__dict__]
            assert len(mixers) == 1, f"layers[{index}] has {mixers}: one mixer per block"
            assert (mixers == ["cross_attn"]) == (index in crossing) == isinstance(block, CrossAttentionLayer)
            if index in crossing:
                assert isinstance(block.cross_attn, CrossAttentionMixer)
            else:
                assert isinstance(block.__dict__.get("self_attn"), (Attention, type(None)))

    def test_support_names_the_cross_attention_blocks(self, model):
        rows = model.support()
        spans = ",".join(str(index) for index in model.cross_attention_layers)
        for name in (*CROSS_INTERIOR, "attention_output"):
            found = text_rows(rows, f"cross_attn.{name}")
            assert found and all(rows[row] is None for row in found), name
            assert all(row.startswith("layers.") for row in found)
        described = " ".join(text_rows(rows, "cross_attn.attention_keys"))
        assert all(f"{index}" in described for index in model.cross_attention_layers), (described, spans)
        for block in self.cross_blocks(model):
            shown = repr(block.cross_attn)
            for name in type(block.cross_attn).values():
                assert getattr(type(block.cross_attn), name).description in shown, name

    def test_vision_values_are_in_forward_order(self, model):
        assert model.vision.values()[:2] == ["image_token_mask", "video_token_mask"]
        assert model.vision.values()[-2:] == ["image_features", "video_features"]
        rows = list(model.support())
        assert rows[:3] == ["input_ids", "attention_mask", "vision.image_token_mask"]
        assert rows.index("vision.tower_output") < rows.index("vision.image_features") < rows.index("input")
        # Mllama's wrapper runs the tower, then calls the text model, which embeds the tokens;
        # IDEFICS's text model embeds them, then runs the tower (`Entry.order`)
        embedded_first = model.family.entry.order.index("token_embeddings") < model.family.entry.order.index("vision")
        assert (rows.index("token_embeddings") < rows.index("vision.tower_output")) == embedded_first
        assert rows.index("token_embeddings") < rows.index("input") and rows[-1] == "logits"

    # -- the states -----------------------------------------------------------

    def test_features_are_what_every_cross_attention_block_reads(self, model):
        keys, values = [], []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(*self.image_input(model)[0], **self.image_input(model)[1]):
            mask = model.vision.image_token_mask.save()
            projected = model.projector.output.save()
            features = model.vision.image_features.save()
            for block in self.cross_blocks(model):
                keys.append(block.cross_attn.attention_keys.save())
                values.append(block.cross_attn.attention_values.save())
        assert features.dim() == 3 and features.shape[0] == mask.shape[0]
        assert int(mask.sum()) >= 1, "the prompt holds the image's placeholder"
        if self.projector_output_is_features:
            assert torch.equal(projected.reshape(features.shape), features)
        for block, k, v in zip(self.cross_blocks(model), keys, values):
            expected_keys, expected_values = block.cross_attn.project(features)
            assert k.shape[2] == features.shape[1] and block.cross_attn.k_proj.in_features == features.shape[-1]
            torch.testing.assert_close(k, expected_keys)
            torch.testing.assert_close(v, expected_values)

    def test_an_edit_to_the_features_reaches_every_cross_attention_block_and_no_block_before(self, model):
        args, kwargs = self.image_input(model)
        first = model.cross_attention_layers[0]
        before, plain_keys = [], []
        with model.trace(*args, **kwargs):
            for index in range(first):
                before.append(model.layers[index].layer_output.save())
            for block in self.cross_blocks(model):
                plain_keys.append(block.cross_attn.attention_keys.save())
            plain = model.logits.save()
        edited_before, keys, values = [], [], []
        with model.trace(*args, **kwargs):
            features = model.vision.image_features
            model.vision.image_features = features * -2 + 1
            states = model.vision.image_features.save()
            for index in range(first):
                edited_before.append(model.layers[index].layer_output.save())
            for block in self.cross_blocks(model):
                keys.append(block.cross_attn.attention_keys.save())
                values.append(block.cross_attn.attention_values.save())
            edited = model.logits.save()
        for a, b in zip(before, edited_before):
            assert torch.equal(a, b), "a block before the first cross-attention block changed"
        for block, k, v, old in zip(self.cross_blocks(model), keys, values, plain_keys):
            expected_keys, expected_values = block.cross_attn.project(states)
            torch.testing.assert_close(k, expected_keys)
            torch.testing.assert_close(v, expected_values)
            assert not torch.equal(k, old)
        assert not torch.equal(plain, edited)

    def test_zeroing_the_features_ablates_the_image(self, model):
        args, kwargs = self.image_input(model)
        with model.trace(*args, **kwargs):
            plain = model.logits.save()
        with model.trace(*args, **kwargs):
            model.vision.image_features[:] = 0
            states = model.vision.image_features.save()
            last = self.cross_blocks(model)[-1].cross_attn.attention_values.save()
            ablated = model.logits.save()
        assert states.abs().max() == 0
        torch.testing.assert_close(last, self.cross_blocks(model)[-1].cross_attn.project(states)[1])
        assert not torch.equal(plain, ablated)

    def test_assigned_features_reach_block_0(self, model):
        """Here they do not: block 0's input is the token embeddings whatever the states
        hold (the assignment lands in the cross-attention blocks instead)."""
        args, kwargs = self.image_input(model)
        embedded_first = model.family.entry.order.index("token_embeddings") < model.family.entry.order.index("vision")
        with model.trace(*args, **kwargs):
            if embedded_first:  # the text model embeds the tokens before it makes the states (IDEFICS's)
                embeddings = model.token_embeddings.save()
            features = model.vision.image_features
            model.vision.image_features = torch.ones_like(features)
            if not embedded_first:
                embeddings = model.token_embeddings.save()
            first = model.layers[0].input.save()
        assert torch.equal(first, embeddings)

    def test_features_are_what_block_0_receives_at_the_image_tokens(self, model):
        """Here no feature enters the stream: block 0 receives the token embeddings at
        every position, the image's placeholder included."""
        args, kwargs = self.image_input(model)
        with model.trace(*args, **kwargs):
            mask = model.vision.image_token_mask.save()
            embeddings = model.token_embeddings.save()
            first = model.layers[0].input.save()
        assert mask.any() and torch.equal(first, embeddings)

    def test_cross_attention_pattern_sums_to_one_over_the_image(self, model):
        patterns, scores = [], []
        with model.trace(*self.image_input(model)[0], **self.image_input(model)[1]):
            features = model.vision.image_features.save()
            for block in self.cross_blocks(model):
                queries = block.cross_attn.attention_queries.save()
                scores.append(block.cross_attn.attention_scores.save())
                patterns.append(block.cross_attn.attention_probabilities.save())
                heads = block.cross_attn.attention_head_outputs.save()
                output = block.cross_attn.attention_output.save()
        batch, seq = output.shape[:2]
        assert tuple(queries.shape) == (batch, model.num_heads, seq, model.head_dim)
        for pattern, score in zip(patterns, scores):
            assert tuple(pattern.shape) == tuple(score.shape) == (batch, model.num_heads, seq, features.shape[1])
            torch.testing.assert_close(pattern.sum(-1), torch.ones_like(pattern.sum(-1)))
        o_proj = self.cross_blocks(model)[-1].cross_attn.o_proj._module
        torch.testing.assert_close(o_proj(heads.reshape(batch, seq, -1)), output)

    def test_cross_attention_interior_is_unavailable_without_eager(self, sdpa_model):
        rows = sdpa_model.support()
        for name in CROSS_INTERIOR:
            (row,) = text_rows(rows, f"cross_attn.{name}")
            assert "attn_implementation='eager'" in rows[row]
        with pytest.raises(Unavailable, match="attn_implementation='eager'"):
            with sdpa_model.trace(*self.image_input(sdpa_model)[0], **self.image_input(sdpa_model)[1]):
                self.cross_blocks(sdpa_model)[0].cross_attn.attention_probabilities.save()

    # -- blocks ---------------------------------------------------------------

    def test_block_identity(self, model):
        rows = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(*self.image_input(model)[0], **self.image_input(model)[1]):
            for block in model.layers:
                crossing = isinstance(block, CrossAttentionLayer)
                x = block.input.save()
                mask = block.text_row_mask.save() if crossing and "text_row_mask" in type(block).values() else None
                attention = (block.cross_attn if crossing else block.self_attn).attention_output.save()
                rows.append((block, x, mask, attention, block.mlp.mlp_output.save(), block.layer_output.save()))
        for block, x, mask, attention, mlp, out in rows:
            if isinstance(block, CrossAttentionLayer):
                mask = 1.0 if mask is None else mask[..., None]
                attention, mlp = (attention * mask, mlp) if block.row_masked == "attention" else (attention, mlp * mask)
                torch.testing.assert_close(x + block.attention_gate * attention + block.mlp_gate * mlp, out)
            else:
                torch.testing.assert_close(x + attention + mlp, out)

    def test_in_place_edit_of_layer_output_reaches_the_next_block(self, model):
        with model.trace(*self.image_input(model)[0], **self.image_input(model)[1]):
            model.layers[0].layer_output[:] = 0
            after = model.layers[1].input.save()
        assert after.abs().max() == 0

    def test_assigned_layer_output_reaches_the_next_block(self, model):
        args, kwargs = self.image_input(model)
        with model.trace(*args, **kwargs):
            out = model.layers[0].layer_output
            model.layers[0].layer_output = out * 2
            after = model.layers[1].input.save()
        with model.trace(*args, **kwargs):
            plain = model.layers[0].layer_output.save()
        torch.testing.assert_close(after, plain * 2)

    def test_text_prompt_on_an_image_load(self, model):
        """A prompt without an image runs the blocks that self-attend only: the
        cross-attention blocks' values refuse before the model runs, saying why. Where the
        text model needs an image on every call, the prompt itself is refused so."""
        if model.family.entry.needs_images:
            with pytest.raises(ValueError, match="every prompt needs an image"):
                with model.trace(self.text):
                    model.logits.save()
            return
        prompt = self.text_prompt(model)
        last_plain = [index for index in range(model.num_layers) if index not in model.cross_attention_layers][-1]
        with model.trace(prompt):
            mask = model.vision.image_token_mask.save()
            out = model.layers[last_plain].layer_output.save()
            logits = model.logits.save()
        assert not mask.any() and logits.shape[:2] == out.shape[:2]
        block = self.cross_blocks(model)[0]
        for envoy, name in ((block, "layer_output"), (block.cross_attn, "attention_keys"), (block.mlp, "mlp_output")):
            with pytest.raises(Unavailable, match="no images"):
                with model.trace(prompt):
                    getattr(envoy, name).save()

    def test_device_map_auto_keeps_the_names(self, path, model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sharded = self.load(path, device="auto")
        assert sharded._aliases == model._aliases
        with sharded.trace(*self.image_input(model)[0], **self.image_input(model)[1]):
            out = sharded.layers[-1].layer_output.save()
        assert out.shape[-1] == model.hidden_size

    def test_text_only_load_refuses_the_cross_attention_blocks(self, path):
        """Loaded for text generation, no image reaches the model, so its cross-attention
        blocks never run: their rows say so, and so does reading them."""
        if not self.text_generation_load:  # refused before loading (`test_text_only_load_has_no_images`)
            with pytest.raises(ValueError, match="task='image-text-to-text'"):
                self.load(path, task=None)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text_only = self.load(path, task=None, attn_implementation="eager")
        rows = text_only.support()
        found = text_rows(rows, "cross_attn.attention_keys")
        assert found and all("never runs" in rows[row] or "skips" in rows[row] for row in found), found
        with pytest.raises(Unavailable, match="task='image-text-to-text'"):
            with text_only.trace(self.text):
                text_only.layers[text_only.cross_attention_layers[0]].layer_output.save()
