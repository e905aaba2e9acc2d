"""vlreg-text: base language models under the standard names.

A vision-language model's text model is usually a base language model's architecture
(llava-interleave's is Qwen2's, Gemma 3's is Gemma 3 text's), so comparing the two block
by block needs the base model under the same names. A text-only checkpoint's config is
one part serving as both the wrapper and the text model; this plugin claims the
*wrapper* part of those model types (where the text model sits: ``model.layers``,
``model.embed_tokens``, ``model.norm``), and the *text* part is served by whichever
plugin adapts that text model for the vision-language families (vlreg-llava for
``qwen2``, ``llama``, ``mistral``; vlreg-gemma for ``gemma3_text``) — reuse through the
registry, nothing imported. Qwen3's text blocks (Qianfan-OCR's text model) are claimed
here too, and DeepSeek-V3's (``deepseek_v3``, Kimi K2.5's text model): multi-head latent
attention (`vlreg.plugin.LatentAttention`), dense first blocks, then DeepSeek's sigmoid
group router beside shared experts (`vlreg.plugin.GroupRoutedMoe`). Evolla, a
protein-to-text model transformers files under image-text-to-text, is refused by name here
(its text model is a Llama).
"""

from vlreg.plugin import Attention, GroupRoutedMoe, Layer, LatentAttention, Mlp, Plugin, Text, Wrapper, modeling_envoys

#: Base language models served: Qwen2.5 checkpoints are model_type qwen2.
WRAPPERS = ("qwen2", "qwen3", "llama", "mistral", "gemma3_text", "deepseek_v3")


qwen3_envoys = modeling_envoys("qwen3", {"Qwen3DecoderLayer": Layer, "Qwen3Attention": Attention, "Qwen3MLP": Mlp})
#: DeepSeek-V3's blocks: pre-norm, latent attention; a dense MLP (the first
#: ``first_k_dense_replace`` blocks, and the shared experts), else the routed experts.
deepseek_v3_envoys = modeling_envoys("deepseek_v3", {
    "DeepseekV3DecoderLayer": Layer, "DeepseekV3Attention": LatentAttention, "DeepseekV3MLP": Mlp,
    "DeepseekV3MoE": GroupRoutedMoe})


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(WRAPPERS, text="model", vision=None, projector=None),
    Text("qwen3", envoys=qwen3_envoys),
    Text("deepseek_v3", envoys=deepseek_v3_envoys),
    # refused by name: transformers maps it to image-text-to-text, but its input is a protein
    Wrapper("evolla", declines="Evolla reads protein sequences (a SaProt protein encoder), not images: it has no "
                               "vision part and takes no image"),
    checkpoints=builders,
)
