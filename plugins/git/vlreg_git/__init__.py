"""vlreg-git: GIT (``GitForCausalLM``), declared against `vlreg.plugin`.

GIT is one BERT-style stack over the image and the prompt. ``git`` (``GitModel``) embeds
the prompt (``embeddings``: the looked-up rows, position embeddings added, normed), runs
the CLIP tower (``image_encoder``) and ``visual_projection`` (a linear map and a norm) on
the image, then joins the two with ``torch.cat((image, prompt), dim=1)``: the image's
tokens go *before* the prompt's, and the prompt holds no placeholder for them
(`vlreg.plugin.Prefix`). Its blocks (``git.encoder.layer``) let the image's tokens attend
to each other both ways and the prompt's causally; the readout is the root's ``output``.

* ``vision.image_token_mask`` spans the blocks' positions, ``[batch, image tokens +
  seq]``: a class token and the patches of each image, then the prompt; ``logits`` and
  every block's values are over those positions too;
* ``vision.image_features`` is what the join puts first, ``layers[0].input[mask]``;
  ``token_embeddings`` the prompt's embeddings as they are joined (positions added, normed);
* the blocks are BERT's, post-norm (`text`); the tower CLIP's (`vision`).

GIT's video checkpoints (``num_image_with_embedding``: several frames, each with a learned
temporal embedding, one after another in the prefix) are read as one image's prefix of
every frame; the geometry covers single images. `geometry` lays out the image's tokens,
`checkpoints` builds a tiny GIT.
"""

from vlreg.plugin import Plugin, Prefix, Text, Tower, Wrapper

from . import text, vision
from .geometry import git_image_grids, prefix_tokens

#: The stack's mounts, and the readout, the root's ``output`` (anchored at the root: every
#: BERT sublayer has an ``output`` child too).
RENAME = {
    "git.encoder.layer": "layers",
    "git.embeddings.word_embeddings": "embed_tokens",
    "/output": "lm_head",
}

#: The projected image is the first piece ``git``'s forward joins before the prompt's embeddings.
PREFIX = Prefix(host="git", operation="torch_cat_1", tokens=prefix_tokens, embeddings="git.embeddings",
                embeddings_in_place=True)


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("git", text=None, vision="git.image_encoder", projector="git.visual_projection", rename=RENAME,
            entry=PREFIX, image_grids=lambda part: git_image_grids(part.config)),
    Text("git", rename=text.rename, envoys=text.envoys),
    Tower("git_vision_model", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
