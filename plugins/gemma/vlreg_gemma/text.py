"""The Gemma text models, as text parts any wrapper can host (claimed by
``text_config.model_type``).

* ``gemma`` (PaliGemma's): a plain pre-norm block under the standard names, so
  ``input + attention_output + mlp_output == layer_output``.
* ``gemma2`` (PaliGemma 2's), ``gemma3_text``, ``gemma4_text``, ``gemma4_unified_text``:
  sandwich norms, each sublayer's output normed before it is added to the stream::

      h = x + post_attention_layernorm(self_attn(input_layernorm(x)))
      y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))

  ``attention_output`` and ``mlp_output`` are what a sublayer adds to the stream, so here
  they are read at the post-norms (the sublayers' own outputs stay ``self_attn.output``
  and ``mlp.output``); the plain sum then holds on Gemma 2 and Gemma 3 blocks.
* Gemma 4 (both lines) multiplies the block's result by a learned ``layer_scalar``, and
  the small Gemma 4 checkpoints add a per-layer input (PLE) after the MLP:
  ``layer_output == (input + attention_output + mlp_output + per_layer_output) *
  layer_scalar``, so the plain sum does not hold there. A Gemma 4 block whose MLP sits
  beside routed experts (``enable_moe_block``) norms their sum with
  ``post_feedforward_layernorm``: its ``mlp_output`` is what both add. Where later blocks
  reuse a block's keys and values (``num_kv_shared_layers``), that block refuses to be
  skipped alone (`SharedKvLayer`).

**Gemma 3n** (``gemma3n_text``) carries ``altup_num_inputs`` parallel streams (AltUp),
``[streams, batch, seq, hidden]`` (`vlreg.plugin.StreamsLayer`: ``input`` and
``layer_output`` are the active stream, ``altup_active_idx``, 0 on the published
checkpoints; ``input_streams`` and ``layer_streams`` every stream). A block

1. *predicts* every stream from all of them (``altup.predict``); ``predicted`` is the
   active stream's prediction, which the sublayers read;
2. runs its sandwich-normed sublayers on it beside a low-rank residual (``laurel``, whose
   output ``laurel_output`` is its normed input plus the low-rank update)::

       activated = (predicted + attention_output + laurel_output) / sqrt(2) + mlp_output

3. *corrects* every stream by how far ``activated`` is from the prediction
   (``altup.correct``): each moves by a learned multiple per token of ``activated -
   predicted``, so ``layer_output == predicted + c * (activated - predicted)``, ``c`` a
   scalar per token;
4. adds the per-layer input (``per_layer_output``, gated by the corrected active stream)
   to every stream but the active one.

The plain sum does not hold; the identity above is the family's, and its tests check it.
After the last block the text model maps the other streams back
(``altup_unembed_projections``), rescales each to the active stream's magnitude and
averages them before the final norm, so the logit lens of ``layer_output`` reads the active
stream alone, not what the model reads out.

The attention interior is the standard one: every Gemma attention calls transformers'
attention interface once, with its own scaling and softcapping applied inside the eager
function before the softmax, so ``attention_scores`` is the softmax's input. Where the
pattern is not causal depends on the wrapper, and ``attention_probabilities`` says so in
its description (`WHERE_NOT_CAUSAL`): PaliGemma attends bidirectionally over its prefix,
Gemma 3 among an image's tokens, Gemma 4 among an image's tokens on sliding blocks.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, StreamsLayer, argument, eager_only, returned, value

#: model_type -> (transformers module, class-name prefix, sandwich-normed)
MODELS = {
    "gemma": ("gemma", "Gemma", False),
    "gemma2": ("gemma2", "Gemma2", True),
    "gemma3_text": ("gemma3", "Gemma3", True),
    "gemma4_text": ("gemma4", "Gemma4Text", True),
    "gemma4_unified_text": ("gemma4_unified", "Gemma4UnifiedText", True),
}
MODEL_TYPES = tuple(MODELS)


def _after(norm: str):
    """The output of the block's ``norm``, located from a sublayer of that block (at its
    native path, where a family's rename gives the norm this name: T5Gemma 2's)."""
    return lambda sublayer: f"{getattr(sublayer.parent, norm).path}.output"


class SandwichAttention(Attention):
    """An attention whose block norms its output (Gemma's): what it adds to the stream is
    the post-attention norm's output."""

    attention_output = returned(_after("post_attention_layernorm"))


class SandwichMlp(Mlp):
    """An MLP whose block norms its output (Gemma's): what it adds to the stream is the
    post-feedforward norm's output."""

    mlp_output = returned(_after("post_feedforward_layernorm"))


#: The adapter ``"sandwich"``: the envoy classes of a text block that norms each sublayer's
#: output before adding it (``post_attention_layernorm``, ``post_feedforward_layernorm``),
#: for another family's blocks of that shape (EXAONE 4's, which norm nothing before).
SANDWICH = {"attention": SandwichAttention, "mlp": SandwichMlp}


#: wrapper model_type -> how its text attention departs from a causal pattern
WHERE_NOT_CAUSAL = {
    "paligemma": "bidirectional over the prefix (the images and the prompt, token_type_ids 0), causal over "
                 "the suffix (token_type_ids 1: a suffix= given to the processor, then what is generated)",
    "gemma3": "causal, except that the tokens of one image attend to each other (within the window on "
              "sliding blocks)",
    "shieldgemma2": "causal, except that the tokens of one image attend to each other (within the window on "
                    "sliding blocks), as on Gemma 3",
    "gemma4": "causal, except that on sliding-window blocks the tokens of one image attend to each other "
              "where the text config's use_bidirectional_attention is 'vision'",
    "gemma4_unified": "causal, except that the tokens of one image attend to each other where the text "
                      "config's use_bidirectional_attention is 'vision' (its default)",
}


def _described(base: type, wrapper: str) -> type:
    """``base`` with its pattern's description saying where ``wrapper``'s is not causal."""
    pattern = Attention.attention_probabilities
    described = returned(pattern.at, description=f"{pattern.description}: {WHERE_NOT_CAUSAL[wrapper]}")
    return type(base.__name__, (base,), {"attention_probabilities": described, "__module__": __name__,
                                        "refuses": {"attention_probabilities": eager_only},
                                        "__doc__": f"{base.__doc__} ({wrapper})"})


#: (attention class, wrapper) -> its subclass with the wrapper's pattern description
_DESCRIBED = {(base, wrapper): _described(base, wrapper) for base in (Attention, SandwichAttention)
              for wrapper in WHERE_NOT_CAUSAL}


def _no_per_layer_input(layer: Any) -> str | None:
    if getattr(layer._module, "hidden_size_per_layer_input", None):
        return None
    return "this checkpoint's blocks take no per-layer input (hidden_size_per_layer_input is 0)"


class SharedKvLayer(Layer):
    """A Gemma 4 block (either line) or a Gemma 3n one, whose keys and values later blocks
    may reuse."""

    def why_not_skipped(self, skipped: range) -> str | None:
        """A block whose keys and values later blocks reuse (``num_kv_shared_layers``) cannot
        be skipped unless they are too: they would run without them."""
        config = self._module.config
        modes = config.kv_sharing_modes
        if modes[self.block_index] != "store":
            return None
        kind = config.layer_types[self.block_index]
        readers = [i for i, mode in enumerate(modes)
                   if mode == "reuse" and config.layer_types[i] == kind and i not in skipped]
        if not readers:
            return None
        return (f"layers {readers} reuse its keys and values (num_kv_shared_layers) and cannot run without "
                f"them; skip them too")


class Gemma4Layer(SharedKvLayer):
    """A Gemma 4 block: sandwich norms, then (on the small checkpoints) a per-layer input,
    then ``layer_scalar``; ``layer_output`` is the block's output, scalar applied."""

    order = ("input", "self_attn", "linear_attn", "mlp", "per_layer_output", "output", "layer_output")

    refuses = {"per_layer_output": _no_per_layer_input}
    per_layer_output = returned(
        lambda layer: f"{layer.path}.post_per_layer_input_norm.output",
        description="what the per-layer input (PLE) adds to the stream after the MLP, before layer_scalar",
    )


class Gemma3nLayer(StreamsLayer, SharedKvLayer):
    """A Gemma 3n block: AltUp's predict and correct steps around sandwich-normed
    sublayers and a laurel, then a per-layer input into every stream but the active one."""

    sourced = True  # predicted and activated are read at calls in the block's forward
    order = ("input", "input_streams", "predicted", "laurel_output", "self_attn", "mlp", "activated",
             "per_layer_output", "output", "layer_streams", "layer_output")

    @property
    def active_stream(self) -> int:
        """The stream the sublayers read and update (``altup_active_idx``)."""
        return self._module.config.altup_active_idx

    @property
    def num_streams(self) -> int:
        """AltUp's streams (``altup_num_inputs``)."""
        return self._module.config.altup_num_inputs

    predicted = value(
        lambda layer: f"{layer.path}.source.self_altup_predict_0.output", layout="rows",
        description="AltUp's prediction of the active stream, which the sublayers read, [batch, seq, hidden]",
    )(lambda layer, raw: raw[layer.active_stream]).writes(lambda layer, raw, new: layer.with_active(raw, new))
    laurel_output = returned(
        lambda layer: f"{layer.path}.laurel.output",
        description="the laurel's output: the normed prediction plus its low-rank update",
    )
    activated = argument(
        1, lambda layer: f"{layer.path}.source.self_altup_correct_0.input", layout="rows",
        description="the active stream after the sublayers, (predicted + attention_output + laurel_output) / "
                    "sqrt(2) + mlp_output, which AltUp's correct step propagates to every stream",
    )
    per_layer_output = returned(
        lambda layer: f"{layer.path}.post_per_layer_input_norm.output",
        description="what the per-layer input (PLE) adds to every stream but the active one",
    )


def gemma3n_envoys(part: Any) -> dict[type, type]:
    """Gemma 3n's text blocks onto `Gemma3nLayer`, their sublayers read at the post-norms."""
    from transformers.models.gemma3n import modeling_gemma3n as gemma3n

    return {
        gemma3n.Gemma3nTextDecoderLayer: Gemma3nLayer,
        gemma3n.Gemma3nTextAttention: SandwichAttention,
        gemma3n.Gemma3nTextMLP: SandwichMlp,
    }


def envoys(part: Any) -> dict[type, type]:
    """The text model's module classes onto its envoys; the attention's pattern described
    for the wrapper that hosts it (``part.root``)."""
    module, prefix, sandwich = MODELS[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    layer = {"gemma4_text": Gemma4Layer, "gemma4_unified_text": SharedKvLayer}.get(part.model_type, Layer)
    attention = SandwichAttention if sandwich else Attention
    attention = _DESCRIBED.get((attention, part.root.model_type), attention)
    return {
        getattr(modeling, f"{prefix}DecoderLayer"): layer,
        getattr(modeling, f"{prefix}Attention"): attention,
        getattr(modeling, f"{prefix}MLP"): SandwichMlp if sandwich else Mlp,
    }
