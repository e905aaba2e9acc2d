"""vlreg-text: base language models under the standard names.

A vision-language model's text model is usually a base language model's architecture
(llava-interleave's is Qwen2's, Gemma 3's is Gemma 3 text's), so comparing the two block
by block needs the base model under the same names. A text-only checkpoint's config is
one part serving as both the wrapper and the text model; this plugin claims the
*wrapper* part of those model types (where the text model sits: ``model.layers``,
``model.embed_tokens``, ``model.norm``), and the *text* part is served by whichever
plugin adapts that text model for the vision-language families (vlreg-llava for
``qwen2``, ``llama``, ``mistral``; vlreg-gemma for ``gemma3_text``) — reuse through the
registry, nothing imported. Qwen3's text blocks, which no vision-language family here
uses, are claimed here too. Evolla, a protein-to-text model transformers files under
image-text-to-text, is refused by name here (its text model is a Llama).
"""

from vlreg.plugin import Plugin, Text, Wrapper

#: Base language models served: Qwen2.5 checkpoints are model_type qwen2.
WRAPPERS = ("qwen2", "qwen3", "llama", "mistral", "gemma3_text")


def qwen3_envoys(part):
    from transformers.models.qwen3 import modeling_qwen3 as qwen3

    from vlreg.plugin import Attention, Layer, Mlp

    return {qwen3.Qwen3DecoderLayer: Layer, qwen3.Qwen3Attention: Attention, qwen3.Qwen3MLP: Mlp}


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(WRAPPERS, text="model", vision=None, projector=None),
    Text("qwen3", envoys=qwen3_envoys),
    # refused by name: transformers maps it to image-text-to-text, but its input is a protein
    Wrapper("evolla", declines="Evolla reads protein sequences (a SaProt protein encoder), not images: it has no "
                               "vision part and takes no image"),
    checkpoints=builders,
)
