"""Cross-attention: the image reaches the text model beside its token stream.

A family whose wrapper declares a `CrossAttention` (Mllama) writes nothing into the
embeddings: the projected tower output goes to the text model as an argument, and only
some blocks read it, each through an attention whose queries are the text and whose keys
and values are that block's projections of the image's states. vlreg serves it so:

* ``vision.image_features`` is the argument itself, ``[batch, positions, hidden]`` (each
  batch row's images, tiles and patches in the order the keys run over them), read where
  the text model is called: an edit there reaches every cross-attention block, and no
  block before the first of them;
* a block that cross-attends is a `CrossAttentionLayer`, with its attention at
  ``cross_attn`` (a `CrossAttentionMixer`): ``attention_queries`` from the text,
  ``attention_keys`` and ``attention_values`` from the image, ``attention_probabilities``
  from each text token to the image's positions (under eager);
* ``model.cross_attention_layers`` lists those blocks; the others are plain `Layer`.

Cross-attention blocks run only when an image reaches the model (the text model skips
them on a prompt without one), so their values refuse, with the reason, where none does.
"""

from __future__ import annotations

from typing import Any

import torch

from .envoys import Attention, Layer, eager_only
from .errors import Unavailable
from .mixers import Mixer
from .parts import CrossAttention
from .values import argument, returned

#: Why a cross-attention block's values are absent from a run no image reaches.
SKIPPED = "cross-attention blocks run only when an image reaches the model (the text model skips them otherwise)"


def no_images_for_blocks(model: Any) -> str | None:
    """Why no cross-attention block of ``model`` ever runs on this load (``None``: they do
    when a trace's input carries images)."""
    vision = model.__dict__.get("vision")
    if vision is None:
        return f"a text-only load builds no tower, so no image reaches the model and {SKIPPED}; load with task='image-text-to-text'"
    reason = vision.no_images()
    return f"{reason}, and {SKIPPED}" if reason else None


def check_prompts(model: Any, invokes: list) -> None:
    """Refuse a batch whose prompts do not all carry images on a cross-attention model: the
    text model runs its cross-attention blocks for every row once any row has images, so a
    prompt without one would attend to the padding of the others' states (its run alone
    skips those blocks), and Mllama's processor gives such a batch inconsistent inputs."""
    if not isinstance(model.family.scatter, CrossAttention):
        return
    carrying = []
    for inputs, kwargs in invokes:
        prompts = inputs[0] if inputs else kwargs.get("text")
        count = len(prompts) if isinstance(prompts, (list, tuple)) else 1
        images = kwargs.get("images")
        if images is None:
            carrying += [False] * count
        elif count > 1 and isinstance(images, (list, tuple)) and all(isinstance(each, (list, tuple)) for each in images):
            carrying += [len(each) > 0 for each in images]
        else:
            carrying += [True] * count
    if any(carrying) and not all(carrying):
        raise ValueError(
            f"the {model.family.name!r} family reads images by cross-attention, and its text model runs "
            "the cross-attention blocks for every prompt of a batch once one carries images: a prompt "
            "without an image would attend to the others' padding instead of skipping them, as it does "
            "alone. Trace the prompts without images apart from those with images."
        )


def states_location(vision: Any) -> str:
    """Where the text model is called with the image's states."""
    return f"{vision.root.path}.{vision.root.family.scatter.host}.input"


def _batch(vision: Any, raw: Any) -> int:
    args, kwargs = raw
    ids = kwargs.get("input_ids", args[0] if args else None)
    return (ids if ids is not None else kwargs["inputs_embeds"]).shape[0]


def read_states(vision: Any, raw: Any) -> torch.Tensor:
    """The states as ``[batch, positions, hidden]``, a view of what the text model takes."""
    argument = vision.root.family.scatter.argument
    args, kwargs = raw
    states = kwargs.get(argument) if isinstance(argument, str) else (args[argument] if len(args) > argument else None)
    if states is None:
        raise Unavailable(
            "vision.image_features is unavailable: the text model was called without the image's states, "
            "as at a generation step after the first, where the cross-attention blocks read the keys and "
            "values they cached; read the features at the first step (before tracer.iter)"
        )
    return states.reshape(_batch(vision, raw), -1, states.shape[-1])


def write_states(vision: Any, raw: Any, new: torch.Tensor) -> Any:
    """``raw`` with the states replaced by ``new``, in the text model's layout."""
    argument = vision.root.family.scatter.argument
    args, kwargs = raw
    if isinstance(argument, str):
        return args, {**kwargs, argument: new.reshape(kwargs[argument].shape)}
    native = args[argument]
    return (*args[:argument], new.reshape(native.shape), *args[argument + 1 :]), kwargs


def _call(attention: Any) -> str:
    return f"{attention.path}.source.{attention.interface}.input"


class CrossAttentionMixer(Attention):
    """A block's attention from the text to the image.

    Read at its call to the attention function, as `Attention` is: ``attention_queries``
    ``[batch, heads, seq, head_dim]`` are the text's; ``attention_keys`` and
    ``attention_values`` ``[batch, kv_heads, positions, head_dim]`` are this block's
    projections of ``vision.image_features`` (what `project` computes); the pattern
    ``[batch, heads, seq, positions]`` weights the image's positions for each text token,
    the mask (padded tiles, text before its image) added. ``attention_output`` is what
    the module returns; the block may scale it before the stream adds it
    (`CrossAttentionLayer.attention_gate`).
    """

    attention_queries = argument(
        1, _call, unavailable=eager_only, description="the text's queries, as the attention function takes them"
    )
    attention_keys = argument(
        2, _call, unavailable=eager_only, description="the keys: this block's projection of the image's states"
    )
    attention_values = argument(
        3, _call, unavailable=eager_only, description="the values: this block's projection of the image's states"
    )
    attention_output = returned(description="what the attention returns, before any gate of its block")

    def project(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values this attention makes of ``states`` (``[batch, positions,
        hidden]``, as `vision.image_features` serves them), in ``attention_keys``' layout.
        A family whose attention norms or reshapes them otherwise overrides this."""
        module = self._module
        heads, width = self.num_kv_heads, self.head_dim
        keys = module.k_proj(states).view(states.shape[0], -1, heads, width).transpose(1, 2)
        values = module.v_proj(states).view(states.shape[0], -1, heads, width).transpose(1, 2)
        return keys, values


class CrossAttentionLayer(Layer):
    """A block that attends from the text to the image (``cross_attn``), then runs its MLP.

    ``layer_output`` is the block's own output. Where the block scales what each sublayer
    adds (Mllama's tanh gates), ``attention_gate`` and ``mlp_gate`` are the factors, so
    ``input + attention_gate * cross_attn.attention_output + mlp_gate * mlp.mlp_output ==
    layer_output`` (times a family's row mask, where it has one). Its values need an image
    in the run: the text model skips the block without one.
    """

    mixers = (Mixer("cross_attn"),)

    @property
    def attention_gate(self) -> Any:
        """What the block multiplies the attention's output by before adding it (1: none)."""
        return 1.0

    @property
    def mlp_gate(self) -> Any:
        """What the block multiplies the MLP's output by before adding it (1: none)."""
        return 1.0


def placed(model: Any, encoding: Any, declared: list, images: list) -> list:
    """Each image's `ImageGeometry` where the image is read by cross-attention: ``row`` is
    the batch row of its placeholder, ``positions`` its positions in that row of the states
    (``vision.image_features[row]``, the keys' axis), ``offset`` where they start there.

    Every image of a batch gets as many positions (the processor pads tiles and images to
    the largest), so the family's grids for each must add up to the same count."""
    from .geometry import ImageGeometry

    rows = (encoding["input_ids"] == model._module.config.image_token_id).nonzero(as_tuple=True)[0].tolist()
    if len(rows) != len(images):
        raise ValueError(f"the prompt holds {len(rows)} image placeholders, but {len(images)} images were given")
    counts = {sum(grid.tokens for grid in grids) for grids in declared}
    if len(counts) != 1:
        raise ValueError(
            f"the family's grids give the images different numbers of positions ({sorted(counts)}), "
            "but the states hold as many for every image"
        )
    (count,) = counts
    found = []
    for index, (grids, row, image) in enumerate(zip(declared, rows, images)):
        offset = rows[:index].count(row) * count
        found.append(
            ImageGeometry(index=index, row=row, positions=torch.arange(offset, offset + count),
                          grids=grids, size=tuple(image.size), offset=offset)
        )
    return found
