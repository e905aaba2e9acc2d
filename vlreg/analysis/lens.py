"""The logit lens over image tokens."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import frozen

from ..core.envoys.readout import lens_refusal, readout, unembedding
from ..core.errors import Unavailable
from ..core.images.options import takes_processor_options
from ..core.remote import remotely
from .tokens import _images, _layers, _split, _where, in_stream, token_id, warn_if_turn_ended


@frozen
class LogitLens:
    """The readout (``norm``, then ``lm_head``, or the family's `vlreg.plugin.Readout`) applied to the stream at every image token
    after each block in ``layers``. Per image (then per video), ``top_ids`` and ``top_probabilities`` are
    ``[layers, tokens, top]``, and with a ``target`` ``target_probabilities`` is
    ``[layers, tokens]``."""

    layers: tuple[int, ...]
    top_ids: list[torch.Tensor]
    top_probabilities: list[torch.Tensor]
    target: int | None
    target_probabilities: list[torch.Tensor] | None
    geometry: list  # `ImageGeometry` an image, then `VideoGeometry` a video

    def top_tokens(self, tokenizer: Any, image: int = 0, layer: int = -1) -> list[str]:
        """The most likely token at each of an image's tokens after ``layers[layer]``."""
        return tokenizer.convert_ids_to_tokens(self.top_ids[image][layer, :, 0].tolist())


@remotely()
@takes_processor_options
def logit_lens(
    model: Any,
    prompt: Any,
    images: Any = None,
    *,
    videos: Any = None,
    layers: Sequence[int] | None = None,
    top: int = 5,
    target: "int | str | None" = None,
) -> LogitLens:
    """Read every image token out through the final norm and the readout, block by block;
    with ``videos=[...]``, every video token too, after the images' (each video's entry of
    the result is its, its geometry a `VideoGeometry`: the frames each token covers).

    The streams are read in one trace and read out after it, with the model's own
    ``norm`` and ``lm_head`` modules, so the trace edits nothing."""
    in_stream(model, "logit_lens")
    lens_refusal(model, "logit_lens")  # before anything runs
    if images is None and videos is None:
        raise ValueError("logit_lens reads an image's or a video's tokens: pass images=[...] or videos=[...]")
    media = {"images": None if images is None else _images(images)}
    if videos is not None:
        media["videos"] = list(videos)
    geometry = model.vision.geometry(prompt, **media)
    blocks = model.prompt_layers  # where the image's tokens are: the encoder's, on an encoder-decoder
    layers = _layers(model, layers, blocks)
    rows, positions = _where(geometry)
    streams: list = []
    with torch.no_grad(), model.trace(prompt, **{name: given for name, given in media.items() if given is not None}):
        for layer in layers:
            streams.append(blocks[layer].layer_output[rows, positions].save())
    with torch.no_grad():
        stream = torch.stack([saved.detach() for saved in streams])
        probabilities = readout(model, stream).float().softmax(-1)
    best = probabilities.topk(top, dim=-1)
    wanted = None if target is None else token_id(model, target)
    return LogitLens(
        layers=layers,
        top_ids=_split(best.indices, geometry, dim=1),
        top_probabilities=_split(best.values, geometry, dim=1),
        target=wanted,
        target_probabilities=None if wanted is None else _split(probabilities[..., wanted], geometry),
        geometry=geometry,
    )


def project_on_vocab(model: Any, stream: torch.Tensor) -> torch.Tensor:
    """The model's final norm and readout applied to a saved stream value (any block's
    ``input`` or ``layer_output``, at any positions, ``[..., hidden_size]``): the logit
    lens anywhere. Runs the norm and readout modules on the tensor after the trace, so
    the trace edits nothing; the result is logits as ``model.logits`` holds them (after
    the final softcap where the model applies one), ``[..., vocab_size]``. Refused where
    the readout's weights are not in this process (a load traced remotely, never
    dispatched here): apply ``model.lm_head(model.norm(stream))`` in the remote trace."""
    lens_refusal(model, "project_on_vocab")
    if unembedding(model).is_meta:
        raise Unavailable(
            "project_on_vocab is unavailable: it runs the readout here, and this load's weights are not here "
            "(dispatch=False, traced remotely); read model.lm_head(model.norm(stream)) inside the remote trace, "
            "or call project_on_vocab inside a model.session(remote=...)"
        )
    return readout(model, stream.detach())


def top_tokens(model: Any, logits: torch.Tensor, k: int = 5) -> list:
    """The ``k`` most likely tokens of ``logits`` (``[vocab]``, or ``[..., vocab]`` for a
    list per position) as ``(token, probability)`` pairs. ``logits`` are as ``model.logits``
    and `project_on_vocab` give them (what the model returns, after any final softcap),
    so the probabilities are the model's own."""
    probabilities = logits.detach().float().softmax(-1)
    if probabilities.dim() > 1:
        return [top_tokens(model, row, k) for row in logits]
    best = probabilities.topk(k)
    names = model.tokenizer.convert_ids_to_tokens(best.indices.tolist())
    return list(zip(names, best.values.tolist()))


@remotely()
@takes_processor_options
def next_token_probs(model: Any, prompt: Any, images: Any = None) -> torch.Tensor:
    """The next-token distribution after ``prompt`` (with its ``images``): ``[vocab]``, or
    ``[batch, vocab]`` for several prompts; the softmax of the logits the model returns
    and samples from (after the final softcap where the model applies one)."""
    warn_if_turn_ended(model, prompt, -1, "next_token_probs")
    options = {} if images is None else {"images": _images(images)}
    with torch.no_grad(), model.trace(prompt, **options):
        logits = model.logits[:, -1].save()
    probabilities = logits.detach().float().softmax(-1)
    return probabilities[0] if isinstance(prompt, str) else probabilities
