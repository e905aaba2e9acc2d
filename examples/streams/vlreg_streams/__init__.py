"""vlreg-streams-example: a model type whose residual streams mix, served from outside vlreg.

Qwen4-Exp (transformers' ``qwen4_exp``) keeps several residual streams packed along the
hidden axis; each sublayer reads a learned mix of them and writes every stream with a weight
of its own. vlreg-qwen3-vl serves it stream by stream. This plugin, written only against
`vlreg.plugin` and the adapters other plugins publish, declares it another way and claims
its three parts with ``overrides="qwen3_vl"``, as an outside author trying another reading
would:

* a block's ``input`` and ``layer_output`` are the streams' mean, which a write reaches
  (every stream moves by the same amount);
* the block identity is the family's own (`MeanStreams.identity`: each sublayer's output
  added to every stream with that stream's weight), stated on the block class, so the
  conformance suite checks this one rather than ``input + attention + mlp``;
* the model reads its streams out through a mixer of its own, not their mean, so the logit
  lens is refused by name (``readout=``) instead of reading a mean the model never reads.

Its tests load vlreg-qwen3-vl's tiny ``qwen4_exp`` checkpoint (`vlreg.testing.build`).
"""

from .declaration import LENS, MeanStreams, plugin

__all__ = ["LENS", "MeanStreams", "plugin"]
