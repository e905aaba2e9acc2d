"""DeepSeek-V3's latent attention (`vlreg.plugin.LatentAttention`): the latents every head is
expanded from, read where the attention forms them, and what a write to them reaches."""

import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable
from vlreg.plugin import GroupRoutedMoe, LatentAttention
from vlreg.testing import TINY_LATENT_MOE, build

TEXT = "The Eiffel Tower is in Paris."


@pytest.fixture(scope="module")
def model():
    return StandardizedTransformer(str(build("deepseek_v3_base")), dispatch=True, device="cpu",
                                   attn_implementation="eager")


def test_the_heads_are_expanded_from_the_latents(model):
    """Each head's values and its keys' part without positions are ``kv_b_proj`` of the
    key-value latent; the queries are ``q_b_proj`` of the query latent, the rotary part
    rotated after; the sizes are the module's."""
    attention = model.layers[0].self_attn
    assert isinstance(attention, LatentAttention) and isinstance(model.layers[1].mlp, GroupRoutedMoe)
    nope, rope, v = (TINY_LATENT_MOE[f] for f in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
    assert (attention.head_dim, attention.qk_head_dim, attention.qk_rope_head_dim) == (v, nope + rope, rope)
    assert (attention.kv_lora_rank, attention.q_lora_rank) == (TINY_LATENT_MOE["kv_lora_rank"], TINY_LATENT_MOE["q_lora_rank"])
    assert model.head_dim == v
    with model.trace(TEXT):
        query_latent = attention.query_latents.save()
        latent = attention.kv_latents.save()
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
        values = attention.attention_values.save()
        heads = attention.attention_head_outputs.save()
    batch, seq, _ = latent.shape
    expanded = attention.kv_b_proj._module(latent).view(batch, seq, -1, nope + v).transpose(1, 2)
    torch.testing.assert_close(values, expanded[..., nope:])
    torch.testing.assert_close(keys[..., :nope], expanded[..., :nope])
    assert torch.equal(keys[:, :1, :, nope:].expand_as(keys[..., nope:]), keys[..., nope:])  # one rotary key
    projected = attention.q_b_proj._module(query_latent).view(batch, seq, -1, nope + rope).transpose(1, 2)
    torch.testing.assert_close(queries[..., :nope], projected[..., :nope])
    assert heads.shape == (batch, seq, attention.num_heads, v)


def test_a_write_to_the_latent_reaches_every_head(model):
    attention = model.layers[1].self_attn
    with model.trace(TEXT):
        plain = model.logits.save()
    with model.trace(TEXT):
        attention.kv_latents[:, -1] = 0
        values = attention.attention_values.save()
        edited = model.logits.save()
    assert (values[:, :, -1] == 0).all() and not (values[:, :, :-1] == 0).all()
    assert torch.equal(edited[:, :-1], plain[:, :-1]) and not torch.equal(edited[:, -1], plain[:, -1])


def test_without_a_query_lora_the_query_latent_is_refused(tmp_path):
    direct = StandardizedTransformer(str(build("deepseek_v3_base", tmp_path, q_lora_rank=None)), dispatch=True,
                                     device="cpu", attn_implementation="eager")
    assert "q_lora_rank is None" in direct.support()["self_attn.query_latents"]
    with pytest.raises(Unavailable, match="q_lora_rank is None"):
        with direct.trace(TEXT):
            direct.layers[0].self_attn.query_latents.save()
    with pytest.raises(Unavailable, match="q_lora_rank"):
        direct.layers[0].self_attn.q_lora_rank
