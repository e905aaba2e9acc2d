"""PaddleOCR-VL's text blocks (``PaddleOCRDecoderLayer``, ERNIE 4.5's): Llama's pre-norm block,
grouped-query attention under M-RoPE, a gated MLP; the standard classes as they are."""

from vlreg.plugin import Attention, Layer, Mlp, modeling_envoys

envoys = modeling_envoys("paddleocr_vl", {"PaddleOCRDecoderLayer": Layer, "PaddleOCRAttention": Attention,
                                          "PaddleOCRMLP": Mlp})
