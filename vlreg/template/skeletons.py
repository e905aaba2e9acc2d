"""The text `vlreg new-plugin` writes a skeleton from: the files' fixed parts, which
`vlreg.template.writing` fills in with what the survey found."""

PARTS = {"wrapper": "Wrapper", "text": "Text", "vision": "Tower"}

BUILDERS = '''def builders():
    from .checkpoints import build

    return {{"{name}": build}}


'''

ADAPTER_GRIDS = '''

def image_grids(part):
    """For a processor that reports each image's patch grid (image_grid_thw), as the Qwen one does."""
    return {adapter}.image_grids
'''

PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "vlreg-{name}"
version = "0.1.0"
description = "vlreg plugin for the {entry} family"
requires-python = ">=3.11"
dependencies = {dependencies}

[project.entry-points.vlreg]
{entry} = "{package}:plugin"

[tool.setuptools.packages.find]
include = ["{package}*"]
"""

READ_ONLY = '''
#: Values a write to would not reach the text model, refused with a reason. The survey
#: cannot tell whether the projector reads the tower's output; a refusal is never a
#: silently wrong answer, so it is declared read-only until checked: delete the row if
#: the conformance suite shows that writing vision.tower_output moves the logits.
READ_ONLY = {
    "vision.tower_output": read_only(
        "this plugin has not checked that the projector reads the tower's output; "
        "edit vision.image_features, what the text model receives"
    ),
}
'''

FEATURE_LAYER = '''
#: The projector reads a block's stream out of the tower's hidden states
#: (config.vision_feature_layer), so the tower's output and every block after the last
#: one read reach nothing: declared read-only, each naming the value to edit instead.
READ_ONLY = hidden_states_read_only(depth="{depth}")
'''

CLASS_TOKEN_VISION = '''
class ClassTokenVision(Vision):
    """The tower: its embeddings put a class token before the patches, one row of every
    block's sequence that is not a patch."""

    class_tokens = 1
'''

GATED_ATTENTION = '''
class GatedAttention(Attention):
    """Full attention that gates its heads before o_proj: the head outputs are read where
    o_proj receives them, after the gate, so o_proj(attention_head_outputs) ==
    attention_output holds as on any block."""

    refuses = {"attention_head_outputs": eager_only}
    attention_head_outputs = value(
        lambda attention: f"{attention.o_proj.path}.input",
        description="each head's output as o_proj receives it, after the gate",
    )(lambda attention, raw: raw[0][0].unflatten(-1, (-1, attention.head_dim))).writes(
        lambda attention, raw, new: ((new.flatten(-2), *raw[0][1:]), raw[1])
    )
'''

#: Envoy classes a skeleton defines itself: name -> (its code, what it imports).
OWN = {
    "ClassTokenVision": (CLASS_TOKEN_VISION, {"Vision"}),
    "GatedAttention": (GATED_ATTENTION, {"Attention", "eager_only", "value"}),
}

IMAGE_GRIDS_TODO = """# TODO: the Wrapper's image_grids=, a function of the part giving how each image's tokens
# lie over its pixels, worked out from the processor's settings (docs/writing-a-plugin.md);
# until then vision.geometry, and the helpers that draw on the image, are Unavailable."""

BASE_PROMPTS = """
    # The chat template takes one list of content, no turns (a base model's), so the
    # suite's prompts are written that way.
    def text_prompt(self, model):
        return model.processor.apply_chat_template([{"type": "text", "text": self.text}], tokenize=False)

    def image_prompt(self, model, images=1):
        content = [{"type": "image"}] * images + [{"type": "text", "text": self.question}]
        return model.processor.apply_chat_template(content, tokenize=False)
"""

CHECKPOINTS = '''"""A small random-weight checkpoint of this family, for the tests.

`small_copy` keeps SOURCE's config structure with every part cut to two blocks (one of
each kind a hybrid model mixes) and small widths, and the processor's tokenizer, image
processor and chat template, so token ids and the prompt format are the real ones. No
weights are read: a checkpoint's metadata is enough.
"""

{path}from vlreg.testing import small_copy

#: The folder the plugin was generated from. Point it at any checkpoint of the family.
SOURCE = {source!r}
'''

BUILD = '''

def build(path, *, source=SOURCE, **overrides):
    """Write the small checkpoint to ``path`` (``overrides``: ``text`` and ``vision`` config fields)."""
    return small_copy(source, path{arguments}, **overrides)
'''

TEST_TODO = """    # TODO: set what the survey cannot know: plain_sum = False for a block that norms its
    # sublayers' outputs, projector_output_is_features = False where the features are
    # rearranged after the projector (crops, newline rows), `unavailable` rows with a
    # fragment of their reasons.
"""
