"""vlreg-internvl: InternVL, declared against `vlreg.plugin`.

Three kinds of part:

* the wrapper, here: ``internvl`` (InternVLForConditionalGeneration) and ``qianfan_ocr``
  (QianfanOCRForConditionalGeneration: InternVL's layout and forward, a Qwen3 text model,
  no videos);
* the tower (`vision`): ``internvl_vision``, the InternViT, with its class token and
  layer-scaled blocks, and ``qianfan_ocr_vision``, the same tower under other names;
* the text model (`text`): ``qwen3_moe``, InternVL3.5-MoE's. InternVL3's ``qwen2`` is
  served by vlreg-llava's claim, with nothing imported from it.

`geometry` declares each image's tiles and thumbnail, the tower's patches folded 2 x 2
into tokens by the pixel shuffle; `checkpoints` builds tiny checkpoints for tests.

The wrapper's text model is at ``model.language_model``, the InternViT at
``model.vision_tower`` and the projector at ``model.multi_modal_projector``.
``InternVLModel.get_image_features`` takes the tower's stream (``vision_feature_layer``:
-1 is the tower's output), drops the class token, folds each 2 x 2 block of patches into
one row (the pixel shuffle, which has no module) and projects the rows; ``forward`` writes
them into the token embeddings with ``inputs_embeds.masked_scatter(mask, features)``. The
projector's output is the features, one row per token, tile after tile.

With ``vision_feature_layer`` other than -1 the projector reads a block's stream out of
the tower's hidden states instead of its output: the tower's output and the blocks after
that one reach nothing, and are declared read-only (`READ_ONLY`).
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper, hidden_states_read_only

from .geometry import internvl_image_grids
from .text import text_envoys
from .vision import QIANFAN_RENAME, TOWER_RENAME, internvl_envoys, qianfan_envoys

#: The tower's values past the block the projector reads (``vision_feature_layer``) take no write.
READ_ONLY = hidden_states_read_only(output_when_last=True)


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper(("internvl", "qianfan_ocr"), refuses=READ_ONLY, image_grids=lambda part: internvl_image_grids(part.config)),
    Text("qwen3_moe", envoys=text_envoys),
    Tower("internvl_vision", rename=TOWER_RENAME, envoys=internvl_envoys),
    Tower("qianfan_ocr_vision", rename=QIANFAN_RENAME, envoys=qianfan_envoys),
    checkpoints=builders,
)
