"""Every hook a vlreg plugin can implement, on one page.

A checkpoint's config has *parts*, and each is served by the plugin that claims its
``model_type``:

* ``"wrapper"``: the top-level config (``Qwen2VLForConditionalGeneration`` is
  ``qwen2_vl``, ``LlavaForConditionalGeneration`` is ``llava``). It knows where the text
  model, the vision tower and the projector sit, and where the image features are
  scattered into the embeddings. The plugin that claims it is the model's *family*.
* ``"text"``: ``config.text_config`` (``qwen2_vl_text``, ``qwen2``, ``llama``): the blocks.
* ``"vision"``: ``config.vision_config`` (``qwen2_vl_vision``, ``siglip_vision_model``): the tower;
  where a config has none, its VQ image encoder's ``config.vq_config`` (``emu3_vqgan``).
* another config the top-level one holds, by its field (``"qformer_config"``: BLIP-2's
  Q-Former, ``blip_2_qformer``; ``"audio_config"``): served where a plugin claims it, and
  otherwise named (``Family.unserved``), its modules keeping their native names.

The parts are claimed separately so that one plugin's text or tower adapter serves
another plugin's wrapper: LLaVA pairs a SigLIP tower with a Qwen2 text model, and a
third-party Gemma 3 plugin can reuse that SigLIP adapter without copying it.

The host calls every hook but `vlreg_claims` and `vlreg_checkpoints` only on the
plugin that claimed the part, passing the `Part` (its kind, model_type and config).
Each returns ``None`` for what it does not contribute. Paths and keys are relative to
the part: the wrapper's to the model root, the text part's to a text block, the
vision part's to the tower; another part's names bind wherever they resolve, and its
rows are from the root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import pluggy

if TYPE_CHECKING:
    from ..images.entries import Entry
    from .parts import Claim, Part

#: A predicate of `vlreg_unavailable` and `vlreg_read_only`: the envoy in, ``None`` or why not out.
Predicate = Callable[[Any], Optional[str]]

PROJECT = "vlreg"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def vlreg_claims() -> list[Claim]:
    """The config parts this plugin serves: a list of `Claim(kind, model_type)`.

    Called once per plugin when it is registered. What serves a part is settled from
    every claim on it, never from load order: a claim with ``overrides=`` another
    plugin's name beats that plugin's claim; two claims where neither overrides the
    other leave that part contested, served by neither (a warning, and loading such a
    checkpoint, name both plugins and the ways out); the plugins' other claims stand.
    """


@hookspec(firstresult=True)
def vlreg_refusal(part: Part) -> str | None:
    """Why this plugin will not serve this checkpoint, though it claims the part: ``None``
    to serve it, else one sentence saying what is not served and what would load.

    Asked of each part's plugin as its claim is found, the wrapper's first, before the
    other parts' claims are checked and before any weight is read: a wrapper can refuse
    a configuration it does not serve by name (BLIP-2 over an encoder-decoder T5, whose
    text part nobody claims) rather than have the load name a missing text plugin.
    """


@hookspec(firstresult=True)
def vlreg_rename(part: Part) -> dict[str, str] | None:
    """nnsight ``rename`` entries for a claimed part: ``{native path: standard name}``.

    * wrapper: from the model root, the standard mounts ``layers``, ``embed_tokens``,
      ``norm`` (and ``vision``, ``projector`` on a vision-language model), e.g.
      ``{"model.language_model.layers": "layers", "model.visual": "vision"}``.
    * text: names inside a block, e.g. ``{"attn": "self_attn"}``. A single name binds on
      every module that has it, so never use one a tower block has too.
    * vision: from the tower, e.g. ``{"blocks": "layers", "attn": "self_attn"}``. Never a
      name a text block also has (``mlp``): it would bind there as well.
    """


@hookspec(firstresult=True)
def vlreg_envoys(part: Part) -> dict[type, type] | None:
    """nnsight ``envoys`` entries for a claimed part: ``{module class: envoy class}``.

    Keys are the part's module classes; values are vlreg's standard envoy classes
    (`Layer`, `Attention`, `Mlp`, `Vision`, `VisionLayer`, ...) or subclasses of them,
    which is where a part serves a value from a different place.
    """


@hookspec(firstresult=True)
def vlreg_entry(part: Part) -> Entry | None:
    """Where and how the image enters the text model: its `Entry`. A `Scatter` (the
    wrapper writes the features into the embeddings), a `QueryTokens` (a Q-Former's
    queries, scattered), an `ImageCodes` (discrete codes, embedded by the text model's own
    embedding, then scattered; Emu3's, Chameleon's), a `CrossAttention` (the text model
    takes them as an argument its cross-attention blocks read; Mllama's), ...

    Only asked of the wrapper part. ``None`` means images never reach this model
    (every vision value is then `Unavailable`).
    """


@hookspec(firstresult=True)
def vlreg_image_grids(part: Part) -> Callable[..., list] | None:
    """How the wrapper lays each image's tokens out: a function ``grids(encoding, images,
    processor)``.

    Only asked of the wrapper part. The host calls the function with the processor's
    encoding of a prompt (``return_tensors="pt"``), the original images in order and the
    processor; it returns, per image, its `ImageGrid` (or several, in sequence order: a
    base image, then tiles), each ``rows`` x ``columns`` tokens in raster order with the
    box ``(x0, y0, x1, y1)`` each covers in the original image, NaN for a token that covers
    no pixels. The tokens of an image's grids must add up to its image tokens in the
    encoding; `vision.geometry` checks it. ``None``: the family declares no geometry, and
    `vision.geometry` is `Unavailable`.
    """


@hookspec(firstresult=True)
def vlreg_load_options(part: Part) -> dict[str, dict[str, Any]] | None:
    """Keyword arguments a load needs for its weights to land, beyond what the user
    passes: ``{task: {name: value}}``, handed to ``from_pretrained`` for a load of that
    task (``"text-generation"`` or ``"image-text-to-text"``) where the user set no such
    keyword.

    Only asked of the wrapper part. Where transformers' class for a task reads the
    checkpoint's weights under other names than the checkpoint saves them (Emu3's
    text-only class, ``Emu3ForCausalLM``, finds none of the text model's in a checkpoint of
    the whole model, and would start from random weights without a word), say how
    (``key_mapping``). ``None``: every load needs nothing more.
    """


@hookspec(firstresult=True)
def vlreg_suppressed_tokens(part: Part) -> Sequence[int] | None:
    """Ids of the vocabulary whose logits the wrapper's forward sets to the lowest value
    after ``lm_head``, so the model never emits them (Chameleon's: its image codes, in a
    forward that generates text).

    Only asked of the wrapper part. vlreg then reads ``model.logits`` after that edit, as
    the model returns them, and applies it wherever it reads out a stream itself (the
    logit lens), so every probability it reports is the model's. ``None``: the forward
    returns ``lm_head``'s output as it is (or softcapped).
    """


@hookspec(firstresult=True)
def vlreg_unavailable(part: Part) -> dict[str, Predicate] | None:
    """Why a value cannot be served on some loads: ``{row: predicate}``.

    A row is named as `StandardizedTransformer.support` names it, relative to the
    part (``"self_attn.attention_probabilities"`` on the text part means every text
    block's). A predicate takes the envoy the value is read on and returns ``None``
    when it can be served, else the reason, one sentence saying what would help.
    These add to the predicates the standard classes carry themselves.
    """


@hookspec(firstresult=True)
def vlreg_read_only(part: Part) -> dict[str, Predicate] | None:
    """Values this part serves but cannot take a write to: ``{row: predicate}``.

    Rows (or ``fnmatch`` patterns of rows, ``"vision.*"``) as in `vlreg_unavailable`;
    the wrapper part's are from the root, so it can speak of the tower it hosts
    (``"vision.tower_output"``). A predicate takes the envoy and returns ``None`` when a
    write there reaches the text model, else why not and what to edit instead
    ("the projector reads vision.layers[22].layer_output; edit that"). A read-only value
    refuses assignments and in-place edits with `vlreg.ReadOnly`. Declare every value
    whose write would land nowhere: the conformance suite writes each value and checks
    that the logits move.
    """


@hookspec
def vlreg_adapters() -> dict[str, Any]:
    """What this plugin offers other plugins, by name: ``{name: object}``.

    The way one family reuses another's code without importing its modules: the
    Qwen2-VL plugin publishes ``"qwen_vit"`` (the Qwen ViT's envoy classes and image
    grids), and a Qwen3-VL plugin asks for it with ``vlreg.plugin.adapter("qwen_vit")``.
    Whatever a plugin publishes is its public API to other plugins: keep it stable,
    document it, and test it.
    """


@hookspec
def vlreg_checkpoints() -> dict[str, Callable[..., Any]]:
    """Builders of small random-weight checkpoints, for tests: ``{name: builder}``.

    A builder is called as ``builder(path, **overrides)`` and writes a checkpoint
    folder (config, weights, tokenizer, processor, chat template) that
    ``from_pretrained`` loads, the way a real checkpoint is loaded. See `vlreg.testing`.

    Name one builder after each model type the plugin serves, its default variant, so
    ``build(model_type)`` works for every served type; other names are variants (LLaVA:
    ``"llava"`` is the same builder as ``"llava_interleave"``, beside ``"llava_1_5"``).
    """
