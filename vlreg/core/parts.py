"""The small declarations plugins hand the host: `Claim`, `Part`, `Scatter`, `CrossAttention`,
`QueryTokens`.

The three ways an image reaches the text model each answer the host's questions about it
themselves (the root's forward order, where the features are under ``generate``, what
an image token's box means), so the host asks the declaration and never which one it is.
"""

from __future__ import annotations

from typing import Any, Literal

from attrs import field, frozen

Kind = Literal["wrapper", "text", "vision"]
KINDS: tuple[Kind, ...] = ("wrapper", "text", "vision")


def _kind(instance: Any, attribute: Any, value: str) -> None:
    if value not in KINDS:
        raise ValueError(f"{attribute.name} must be one of {KINDS}, not {value!r}")


def _refusals(value: Any) -> dict[str, str]:
    refusals = dict(value or {})
    for name, reason in refusals.items():
        if not (isinstance(name, str) and name and isinstance(reason, str) and reason.strip()):
            raise ValueError(f"a claim's refuses= maps a name to the sentence saying why, not {name!r}: {reason!r}")
    return refusals


@frozen
class Claim:
    """A plugin serves the config part of this kind whose ``model_type`` is this.

    ``overrides`` names the plugin this claim replaces where both claim the part (a
    patched build of a family, say); without it, two claims on one part are an error.

    ``refuses`` declares what of the part is *not* served, and why: ``{name: reason}``,
    the reason one sentence a user reads (what is missing and what to do instead). A claim
    that refuses something serves its type partially, and the host says so without
    running the family (`vlreg plugins --coverage`; the entry-point group
    ``vlreg.refuses`` repeats the names). A name is one of:

    * a trace input (``"videos"``, ``"audio"``): the model may still run on it, but none
      of its values are served; a trace whose input carries only that input and no image
      refuses the image values with this reason;
    * a standard row (``"vision.video_features"``), named from the part as in
      `vlreg_unavailable`: reading it raises `Unavailable` with this reason;
    * a path the model has no standard names for (``"vision.high_resolution"``): named so
      that `support` lists it.

    Every name is a row of `StandardizedTransformer.support`, its value the reason.
    Refusals do not take part in deciding who serves a part (two claims differing only in
    them are one claim).
    """

    kind: Kind = field(validator=_kind)
    model_type: str
    overrides: str | None = None
    refuses: dict[str, str] = field(factory=dict, converter=_refusals, eq=False)


@frozen
class Part:
    """One part of a checkpoint's config, as the hooks are asked about it.

    ``config`` is the part's own config (``config.text_config`` for the text part);
    ``root`` is the whole checkpoint's config.
    """

    kind: Kind = field(validator=_kind)
    model_type: str
    config: Any = field(eq=False, repr=False)
    root: Any = field(eq=False, repr=False)


class Entry:
    """Where and how the image enters the text model: a wrapper's answer to `vlreg_entry`.

    Each way an image reaches the text model is one subclass (`Scatter`, `QueryTokens`,
    `CrossAttention`), and answers the host's questions about it itself, so the host asks
    the entry and never which one it is.
    """


@frozen
class Scatter(Entry):
    """Where a wrapper writes the image features into the token embeddings.

    ``host`` is the module (path from the model root, ``""`` for the root) whose
    forward makes the call; ``operation`` is nnsight's name for the call in that
    forward (``inputs_embeds_masked_scatter_0``); ``argument`` is the position of the
    features among its arguments, or the name of the keyword that passes them
    (``"image_hidden_states"`` for Idefics3's ``self.inputs_merger``). The host's
    forward is source-instrumented when the model is built, because the tower runs
    inside it: first touching it after reading a tower value would ask for a place the
    model has already passed.
    """

    host: str
    operation: str
    argument: int | str = 1
    #: Under ``generate``, the module (path from the root) whose output is the features,
    #: where the host's forward does not write them there: an encoder-decoder's generate
    #: (Florence-2's) embeds the prompt and writes the features in before its first step,
    #: outside any forward, and hands the encoder the result. ``None``: the scatter runs
    #: under generate as in a trace.
    generation: str | None = None
    #: The root's values between the image-token mask and the blocks, in the order the
    #: forward computes them (`StandardizedTransformer.order`): here the host embeds the
    #: tokens, then runs the tower and writes the features in. An entry ``"vision.<value>"``
    #: places that tower value there, after the tower's others (`Standard.order`).
    order: tuple[str, ...] = ("token_embeddings", "vision")
    #: The module (path from the root) the scattered embeddings are handed to as
    #: ``inputs_embeds``, where the first block does not receive them as they are (OPT's
    #: decoder adds learned position embeddings first): `prompt_entry` reads them there.
    #: ``None``: the first block's input is the stream as the scatter left it.
    entry: str | None = None
    #: Under ``generate``, the module (path from the root) each step calls, where the
    #: wrapper's generate steps its text model instead of calling its own forward (BLIP-2's
    #: hands ``language_model.generate`` the embeddings): the root's inputs are then never
    #: reached under generate, and the positions a step computes are read off this module's.
    #: ``None``: every step calls the root.
    steps: str | None = None
    #: Whether the wrapper's forward needs an image on every call (BLIP-2's runs its tower
    #: unconditionally): a text-generation load, which has no processor, and a prompt
    #: without an image are refused before the model runs.
    needs_images: bool = False

    def mount(self, model: Any) -> None:
        """Put what the image passes through outside the tower under ``model.vision`` (a
        `QueryTokens`' Q-Former); a plain scatter has nothing to mount."""

    def not_patches(self) -> str | None:
        """Why an image token is not a patch or a block of patches of the tower (``None``:
        it is one, and a grid's ``fold`` says how many), for the helpers that draw the
        tower's per-patch values onto the tokens."""
        return None


@frozen
class CrossAttention(Entry):
    """The image reaches the text model by cross-attention, not through its token stream.

    Mllama's wrapper hands the projected tower output to the text model as a keyword
    argument (``cross_attention_states``); no feature is written into the embeddings, and
    only the blocks built to cross-attend read it, each projecting it to its own keys and
    values. ``host`` is the text model (path from the model root) and ``argument`` the
    keyword (or position) it takes the states by: `Vision.image_features` is read there,
    so an edit reaches every cross-attention block and no block is touched before the
    first of them. A wrapper returns this from ``vlreg_scatter`` in place of a `Scatter`.
    """

    host: str
    argument: int | str = "cross_attention_states"
    #: The root's order (`Scatter.order`): the wrapper runs the tower before it calls the
    #: text model, whose forward embeds the tokens, so the embeddings come after the image's values.
    order: tuple[str, ...] = ("vision", "token_embeddings")
    generation = None
    entry = None
    steps = None
    needs_images = False

    def mount(self, model: Any) -> None:
        """Nothing to mount (`Scatter.mount`)."""

    def not_patches(self) -> str | None:
        return None


@frozen
class QueryTokens(Scatter):
    """The image reaches the text model as learned queries (BLIP-2's, InstructBLIP's).

    The tower's patches are read by a Q-Former: a small transformer over ``num_query_tokens``
    learned query embeddings (``query_tokens``, ``[1, queries, qformer_hidden]``) that
    cross-attend to every patch; its output at the queries is projected (``projector``, the
    ``language_projection``) to the text model's width, and the wrapper scatters those rows
    into the embeddings at the image tokens, ``num_query_tokens`` of them an image, in its
    own forward (``host=""``). So:

    * ``vision.image_features`` is the projected queries, the value the scatter writes at
      the image-token mask (``[images * queries, hidden]``), and ``projector.output`` is
      the same rows before they are flattened;
    * the Q-Former is ``model.vision.qformer`` (mounted there from ``qformer``, its path from
      the root, though the module is the tower's sibling), with its blocks at
      ``model.vision.qformer.layers[i]``: every value under it is a tower value, absent
      where no image runs;
    * the forward runs the tower, the Q-Former and the projector *before* it embeds the
      tokens, then scatters (`order`);
    * an image token stands for no part of the image: each query attends to every patch, so
      every query token's box in the geometry is the whole image (`query_grids`), and a
      helper that folds the tower's per-patch values onto the tokens refuses (`not_patches`).
    """

    order: tuple[str, ...] = ("vision", "token_embeddings", "vision.image_features")
    #: The Q-Former's path from the root.
    qformer: str = "qformer"

    def mount(self, model: Any) -> None:
        """Bind ``model.vision.qformer`` to the Q-Former's envoy, the same object as
        ``model.<qformer>`` (as a rename alias is), so its values count as the tower's."""
        vision = model.__dict__.get("vision")
        if vision is not None and "qformer" not in vision.__dict__:
            object.__setattr__(vision, "qformer", model.get(self.qformer))

    def not_patches(self) -> str | None:
        return (
            "the image tokens are the Q-Former's learned queries, each of which attends to every patch "
            "of the tower, not patches or blocks of them; read the tower's own values "
            "(model.vision.layers[i]) over its patches"
        )

    @staticmethod
    def query_grids(queries: int) -> Any:
        """``vlreg_image_grids`` for query tokens: each image is one row of ``queries``
        tokens, every one's box the whole image (each query reads every patch)."""
        from .geometry import ImageGrid

        def grids(encoding: Any, images: Any, processor: Any) -> list:
            import torch

            return [ImageGrid(1, queries, torch.tensor([[0.0, 0.0, *image.size]] * queries), label="queries")
                    for image in images]

        return grids
