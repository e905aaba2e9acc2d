"""`StandardizedTransformer`: an nnsight `TransformersModel` built with its family's names."""

from __future__ import annotations

import threading
from typing import Any

import torch
from nnsight import TransformersModel
from nnsight.intervention.envoy import Envoy
from nnsight.intervention.source import install_source

from . import remote
from .envoys import prompt as prompt_values
from .envoys import readout
from .envoys.blocks import Blocks
from .envoys.cross import CrossAttentionLayer
from .envoys.seq2seq import ends_normed, with_decoder_start
from .envoys.sizes import TextSizes
from .envoys.standard import Standard
from .envoys.tree import Place, entered, joined
from .envoys.vision import Vision
from .host import plugins
from .host.family import Family, bind_anchored, resolve
from .images.entries import Entry
from .images.geometry import image_geometry
from .images.video_geometry import video_geometry
from .images.inputs import check_encoding, check_invokes, in_weights_dtype, takes_flat
from .images.invokes import combine
from .images.options import encode_invoke, processing, refuse_unknown, route, same_options, split
from .images.processing import MEDIA, configured, for_processor
from .devices import dtype_of, execution_device, placement
from .loading import (
    IMAGE_TEXT,
    TEXT,
    built_for_real,
    check_preprocessors,
    check_task,
    check_weights,
    config_of,
    hub_checkpoint,
    lazily,
    weights_to_check,
)
from .order import in_words
from .serving.drilled import drilled
from .tasks import check_needs_images, text_task_fallback
from .reuse import cache
from .serving.batching import Run, run_of
from .serving.tracers import Scanner, Tracer


def _root_order(entry: Any) -> tuple[str, ...]:
    """The root's values and children in forward order: where the tokens are embedded
    among the image's values is the family's entry's to say (`Entry.order`)."""
    middle = entry.order if entry is not None else ("token_embeddings", "vision")
    return ("input_ids", "attention_mask", "vision.image_token_mask", "vision.video_token_mask", *middle, "encoder", "layers",
            "uncapped_logits", "logits")


class StandardizedTransformer(TextSizes, TransformersModel):
    """A transformers checkpoint under the standard names its family plugin gives it.

    The installed plugins decide, from the checkpoint's config alone and before any
    weight is read, which family serves it (`family`); the model is then built by
    nnsight with that family's ``rename`` and ``envoys``, so ``model.layers[i]``,
    ``model.embed_tokens``, ``model.norm`` and ``model.lm_head`` and the values under
    them (``layer_output``, ``self_attn.attention_output``, ...) are the same on every
    family, whatever it calls its modules.

    Args:
        checkpoint: A checkpoint folder (or a loaded transformers model).
        task: ``"text-generation"`` (the default: the causal-LM class where transformers
            has one) or ``"image-text-to-text"`` (the wrapper with its processor, which
            is how images reach the model).
        dispatch: Load the weights now. If false, the model is built on the meta device
            from the config, with the same names, and loads on first use.
        attn_implementation: transformers' attention implementation; the attention
            interior is formed only under ``"eager"``.
        device: Where to load (transformers' ``device_map``, which also takes
            ``"auto"`` for accelerate's sharding; pass ``device_map=`` for a full map).
        dtype: The weights' dtype.
        **kwargs: Passed on to nnsight and ``from_pretrained``.
    """

    #: ``encoder`` is an encoder-decoder's encoder (`vlreg.core.envoys.seq2seq.Encoder`), between
    #: the image and the decoder blocks (``layers``); absent on a decoder-only model.
    standard_children = {"layers": "", "vision": "vision.", "encoder": "encoder."}
    #: Set from the family's entry at build (`Entry.order`).
    order = _root_order(None)

    input_ids = prompt_values.input_ids
    attention_mask = prompt_values.attention_mask
    token_embeddings = prompt_values.token_embeddings
    uncapped_logits = readout.uncapped_logits
    logits = readout.logits

    def __init__(
        self,
        checkpoint: Any,
        *,
        task: str | None = None,
        dispatch: bool = False,
        attn_implementation: str | None = None,
        device: str | torch.device | None = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        task = task or TEXT
        check_task(task)
        checkpoint = hub_checkpoint(checkpoint, kwargs)
        config = config_of(checkpoint, kwargs)
        self.family: Family = resolve(config)
        check_needs_images(self.family, task)
        check_preprocessors(checkpoint, task, kwargs)
        self._weights_source = weights_to_check(checkpoint, kwargs)
        if dispatch:
            self._check_weights()
        quiet = text_task_fallback(config, task, dispatch)
        self._lock = threading.RLock()
        self._run = Run(None)
        if device is not None:
            if "device_map" in kwargs:
                raise ValueError("pass either device= or device_map=, not both")
            kwargs["device_map"] = device
        placement(kwargs, dispatch)
        if dtype is not None:
            kwargs["dtype"] = dtype_of(dtype)
        if attn_implementation is not None:
            kwargs["attn_implementation"] = attn_implementation
        for name, option in self.family.load_options.get(task, {}).items():
            kwargs.setdefault(name, option)  # what the weights need to land (`vlreg_load_options`)
        if not dispatch and isinstance(checkpoint, str):
            # nnsight's lazy build cannot infer the processor (or, for text
            # generation, the tokenizer) from a meta model.
            kwargs.setdefault("processor" if task == IMAGE_TEXT else "tokenizer", checkpoint)
        with quiet, lazily(config, dispatch), built_for_real(() if dispatch else self.family.envoys.values()):
            super().__init__(
                checkpoint,
                task=task,
                dispatch=dispatch,
                rename=self.family.rename,
                envoys={torch.nn.ModuleList: Blocks, **self.family.envoys},
                **kwargs,
            )
        self._standardize()

    @property
    def device(self) -> torch.device | None:
        """Where the model computes, which nnsight moves a trace's inputs to: the device of
        its first parameter, or where that parameter is offloaded (on the meta device),
        accelerate's execution device."""
        return execution_device(self._module) or super().device

    # -- sizes ----------------------------------------------------------------

    def forward_order(self) -> str:
        """The order the forward computes the standard values in, in words (`vlreg.core.order`)."""
        return in_words(self)

    @property
    def cross_attention_layers(self) -> list[int]:
        """The blocks that attend from the text to the image (`CrossAttentionLayer`, with
        ``cross_attn``); empty where the image enters the token stream."""
        return [index for index, block in enumerate(self.layers) if isinstance(block, CrossAttentionLayer)]

    @property
    def image_token_id(self) -> int | None:
        """The id of the placeholder token the image's features are written at, read off the
        config field the family's entry names (`Entry.token`: ``image_token_id``, or
        InstructBLIP-Video's ``video_token_id``), or the processor's where the entry says
        the id is there (`CrossAttention.token_on`); ``None`` where it has none."""
        entry = self.family.entry
        holder = self.processor if getattr(entry, "token_on", "config") == "processor" else self._module.config
        return getattr(holder, entry.token if entry is not None else "image_token_id", None)

    @property
    def num_layers(self) -> int:
        """The number of text blocks."""
        return len(self.layers)

    @property
    def prompt_layers(self) -> Any:
        """The blocks whose positions are the prompt's tokens, the image's among them: the
        ``layers`` of a decoder-only model, the encoder's on an encoder-decoder (whose
        ``layers``, the decoder's, run over the output so far). What the helpers over image
        tokens read and edit."""
        encoder = self.__dict__.get("encoder")
        return encoder.layers if encoder is not None else self.layers

    def prompt_entry(self) -> Any:
        """Inside a trace: the stream entering `prompt_layers` as the scatter left it,
        ``[batch, seq, hidden]``: the first block's ``input``, or, on an encoder-decoder,
        ``encoder.input_embeddings`` (its blocks read them after the position embeddings
        and a norm), or where a text model adds position embeddings before its first block
        (OPT's), what it is called with (`Scatter.embeddings_to`)."""
        encoder = self.__dict__.get("encoder")
        if encoder is not None:
            return encoder.input_embeddings
        handed_to = getattr(self.family.entry, "embeddings_to", None)
        if handed_to is not None:  # the text model adds to them before its first block
            return self.get(handed_to).inputs[1]["inputs_embeds"]
        return self.layers[0].input

    # -- running --------------------------------------------------------------

    def trace(self, *inputs: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("tracer_cls", Tracer)
        return super().trace(*inputs, **kwargs)

    def scan(self, *inputs: Any, fn: Any = None, backend: Any = None, **kwargs: Any) -> Any:
        return Scanner(self, fn or self._call, *inputs, backend=backend, **kwargs)

    def interleave(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        fn = drilled(self, fn)  # the nested calls a value is read inside, instrumented as the run starts
        with self._lock:
            if kwargs.get("batcher") is None:
                return super().interleave(fn, *args, **kwargs)
            # the trace's own keywords beside its invokes: the processor's options apply to
            # every invoke; what nothing takes is refused (generate checks its own)
            generating = getattr(fn, "__name__", "") == "generate"
            options, kwargs = split(self.processor, kwargs, generating)
            if not generating:
                refuse_unknown(self, {key: value for key, value in kwargs.items() if key != "batcher"})
            with processing(self, options, "the trace"):
                return super().interleave(fn, *args, **kwargs)

    def _batch(self, invokes: list, fn: Any) -> tuple:
        """Check the trace's input, then batch it, images included.

        Images no image can reach, or that would reach it wrong, are refused here,
        before the model runs. Processor options (``max_pixels=``, ``images_kwargs=``)
        go to the processor, and a keyword nothing takes is refused (`vlreg.core.images.options`).
        Prompts that carry images go through the processor at once, padded on the
        tokenizer's side (the left, for these decoders): several in one invoke, or
        several invokes (`batching.combine`; nnsight refuses those).
        What the batch holds per row is kept for the values that cut it per invoke.
        """
        check_invokes(self, invokes)
        invokes = [(inputs, {**kwargs, "images": for_processor(kwargs["images"], self.processor)} if "images" in kwargs
                    else kwargs) for inputs, kwargs in invokes]
        routed = [route(self, inputs, kwargs, generating=getattr(fn, "__name__", "") == "generate")
                  for inputs, kwargs in invokes]
        invokes = [(inputs, kwargs) for inputs, kwargs, _ in routed]
        groups, start = [], 0
        for inputs, kwargs in invokes:
            size = self._batch_size(*inputs, **kwargs)
            groups.append((start, size))
            start += size
        if len(invokes) == 1 and self.processor is not None:
            (inputs, kwargs, options), = routed
            prompts = inputs[0] if inputs else kwargs.get("text")
            if kwargs.keys() & MEDIA and isinstance(prompts, (str, list, tuple)):
                invokes = [((), encode_invoke(self, prompts, kwargs, options))]
        elif self.processor is not None:
            options = same_options(routed)
            invokes = combine(configured(self.processor, options), invokes, options, flat=takes_flat(self))
        args, kwargs = super()._batch(invokes, fn)
        check_encoding(self, kwargs)
        kwargs = in_weights_dtype(kwargs, self._module.dtype)
        if getattr(fn, "__name__", "") != "generate":  # generate starts the decoder itself
            kwargs = with_decoder_start(self._module, args, kwargs)
        self._run = run_of(kwargs, self._token_mask, groups, generating=getattr(fn, "__name__", "") == "generate",
                           videos=getattr(self._module.config, "video_token_id", None) is not None)
        return args, kwargs

    def _token_mask(self, inputs: Any, video: bool = False) -> Any:
        """The image's (``video``: the video's) tokens in ``inputs`` (`Entry.token_mask`),
        ``None`` where they cannot be found."""
        return (self.family.entry or Entry()).token_mask(self, inputs, video=video)

    def _image_geometry(self, prompt: Any, images: Any, **options: Any) -> list:
        """`Vision.geometry`, which asks the model (the processor and the entry are its)."""
        return image_geometry(self, prompt, images, **options)

    def _video_geometry(self, prompt: Any, images: Any, videos: Any, **options: Any) -> list:
        """`Vision.geometry` with ``videos=``, which asks the model as `_image_geometry` does."""
        return video_geometry(self, prompt, images, videos, **options)

    def _tower_cache(self, prompt: Any, images: Any, **options: Any) -> Any:
        """`Vision.cache`, which asks the model (a cache runs a trace of it)."""
        return cache(self, prompt, images, **options)

    # -- remote ---------------------------------------------------------------

    def __getstate__(self) -> dict:
        # What a remote request carries of the model (`vlreg.core.remote`).
        return remote.travelling(super().__getstate__())

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        remote.arrived(self)

    def _remoteable_model_key(self) -> str:
        return remote.model_key(self, super()._remoteable_model_key)

    # -- building -------------------------------------------------------------

    def dispatch(self) -> None:
        """Load the weights into the meta-built tree, keeping every standard name."""
        if self.dispatched:
            return
        self._check_weights()
        super().dispatch()
        for declared in (self.family.layers, self.family.entry):  # mounted again, over the loaded modules
            if declared is not None:
                declared.mount(self)
        self._unroll()  # the calls of a looped block are copies: of the modules just loaded
        self._place()
        self._instrument()

    def _sync(self) -> None:
        """nnsight adopts the pipeline's processor (at load, and when a lazy build
        dispatches); where the family adapts it (`vlreg_processor`: the checkpoint's own
        does not encode the prompt it is given), the adapted one takes its place."""
        super()._sync()
        adapt = self.family.processor
        if adapt is not None and self.processor is not None:
            self.processor = self.pipeline.processor = adapt(self.processor)

    def _check_weights(self) -> None:
        """Before weights are read from a local folder: it holds them (`check_weights`)."""
        if self._weights_source is not None:
            check_weights(*self._weights_source)

    def _standardize(self) -> None:
        """Check the family bound the standard names, label every standard envoy for
        `support` and `Unavailable`, and instrument what is read at an operation."""
        bind_anchored(self, self.family.rename)
        if self.family.layers is not None:
            self.family.layers.mount(self)
        for name in ("layers", "embed_tokens", "norm", "lm_head"):
            if name == "norm" and ends_normed(self.__dict__.get("layers")):
                continue  # a post-norm stack's last block ends in its norm: no final norm
            if name == "norm" and self.family.readout is not None and getattr(self.family.readout, "norm", None) is None:
                continue  # the family's readout reads no final norm (or it refuses the lens)
            if not isinstance(self.__dict__.get(name), Envoy):
                raise TypeError(
                    f"{plugins.describe(self.family.plugins['wrapper'])} binds no {name!r} on the "
                    f"{type(self._module).__name__}: its vlreg_rename for the wrapper part "
                    f"must name the module that is the model's {name}."
                )
        if self.family.entry is not None:
            self.family.entry.mount(self)
            self.order = _root_order(self.family.entry)
        self._unroll()
        self._place()
        self._instrument()

    def _unroll(self) -> None:
        """Serve ``layers`` as the blocks' calls in forward order where the family's blocks
        loop (`Blocks.unroll`)."""
        layers = self.__dict__.get("layers")
        if isinstance(layers, Blocks):
            layers.unroll()

    def _place(self) -> None:
        """Give every standard envoy its `Place`, from the one walk over the standard tree:
        its row, label and block, and the tower, the module run once a generation and the
        block run only on images it is part of."""
        entry = self.family.entry
        for visit in entered(self):
            inside = (*visit.within, visit.envoy)
            # a video tower's values are gated on the run's videos, not on the first tower's images
            tower = next((envoy for envoy in inside if isinstance(envoy, Vision) and envoy.videos_only),
                         next((envoy for envoy in inside if isinstance(envoy, Vision)), None))
            once = next((envoy for envoy in (*visit.within, visit.envoy) if envoy.runs_once), None)
            block = next((envoy for envoy in (*visit.within, visit.envoy) if isinstance(envoy, CrossAttentionLayer)),
                         None)
            visit.envoy.place = Place(visit.row, visit.label, visit.block, visit.stack, tower, once, block, entry)
            for attribute in visit.envoy.standard_children:
                if isinstance(blocks := visit.envoy.__dict__.get(attribute), Blocks):
                    blocks._label = joined(visit.label, attribute)
        for mount in ("projector", "embed_tokens"):
            envoy = self.__dict__.get(mount)
            if isinstance(envoy, Standard):  # a module called per call (`PerCall`): a projector per crop, an embedding of codes
                envoy.place = Place(f"{mount}.", mount, entry=entry)

    def _instrument(self) -> None:
        """Source-instrument every forward a value is read inside of.

        Done at build (and again when the weights arrive), not on first read: a value
        inside a forward that is already running when it is first asked for (the
        scatter, in the forward the tower runs in) would otherwise never be served.
        """
        for envoy in (visit.envoy for visit in entered(self)):
            if envoy.sourced:
                install_source(envoy)
            for name in type(envoy).values():
                inside = getattr(type(envoy), name).at.inside
                host = inside(envoy) if inside is not None and envoy.why_unavailable(name) is None else None
                if host is not None:
                    install_source(host)
