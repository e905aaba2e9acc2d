"""`StandardizedTransformer`: an nnsight `TransformersModel` built with its family's names."""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Any, Iterator

import torch
from nnsight import TransformersModel
from nnsight.intervention.envoy import Envoy
from nnsight.intervention.source import install_source

from . import plugins
from .envoys import Standard
from .family import Family, resolve
from .values import returned
from .vision import Vision, scatter_host

IMAGE_TEXT = "image-text-to-text"
TEXT = "text-generation"
MEDIA = frozenset({"images", "videos"})


class StandardizedTransformer(Standard, TransformersModel):
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

    standard_children = {"layers": "", "vision": "vision."}

    token_embeddings = returned(
        lambda model: f"{model.embed_tokens.path}.output",
        description="the token embeddings, before anything is scattered into them",
    )
    logits = returned(lambda model: f"{model.lm_head.path}.output", description="lm_head's output")

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
        config = _config(checkpoint, kwargs)
        self.family: Family = resolve(config)
        quiet = _text_task_fallback(config, task, dispatch)
        if device is not None:
            if "device_map" in kwargs:
                raise ValueError("pass either device= or device_map=, not both")
            kwargs["device_map"] = device
        if dtype is not None:
            kwargs["dtype"] = dtype
        if attn_implementation is not None:
            kwargs["attn_implementation"] = attn_implementation
        if not dispatch and isinstance(checkpoint, str):
            # nnsight's lazy build cannot infer the processor (or, for text
            # generation, the tokenizer) from a meta model.
            kwargs.setdefault("processor" if task == IMAGE_TEXT else "tokenizer", checkpoint)
        with quiet:
            super().__init__(
                checkpoint,
                task=task,
                dispatch=dispatch,
                rename=self.family.rename,
                envoys=self.family.envoys,
                **kwargs,
            )
        self._standardize()

    # -- sizes ----------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        """The number of text blocks."""
        return len(self.layers)

    @property
    def hidden_size(self) -> int:
        """The width of the text model's residual stream."""
        return self._text_config.hidden_size

    @property
    def num_heads(self) -> int:
        """Query heads per text attention."""
        return self._text_config.num_attention_heads

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads per text attention (fewer than `num_heads` under GQA)."""
        return getattr(self._text_config, "num_key_value_heads", None) or self.num_heads

    @property
    def head_dim(self) -> int:
        """The width of one text attention head."""
        return getattr(self._text_config, "head_dim", None) or self.hidden_size // self.num_heads

    @property
    def vocab_size(self) -> int:
        """The number of rows of the readout."""
        return self._text_config.vocab_size

    @property
    def _text_config(self) -> Any:
        return self._module.config.get_text_config()

    # -- running --------------------------------------------------------------

    def _batch(self, invokes: list, fn: Any) -> tuple:
        """Pad several prompts that carry images in one invoke.

        nnsight hands the processor only the prompts and the media, so prompts of
        different lengths fail to stack; the processor pads them here instead (on the
        tokenizer's side, the left for these decoders).
        """
        if len(invokes) == 1 and self.processor is not None:
            inputs, kwargs = invokes[0]
            prompts = inputs[0] if inputs else kwargs.get("text")
            if isinstance(prompts, (list, tuple)) and len(prompts) > 1 and kwargs.keys() & MEDIA:
                call = {key: value for key, value in kwargs.items() if key in MEDIA}
                rest = {key: value for key, value in kwargs.items() if key not in MEDIA | {"text"}}
                encoding = self.processor(text=list(prompts), **call, padding=True, return_tensors="pt")
                invokes = [((), {**encoding, **rest})]
        return super()._batch(invokes, fn)

    # -- building -------------------------------------------------------------

    def dispatch(self) -> None:
        """Load the weights into the meta-built tree, keeping every standard name."""
        if self.dispatched:
            return
        super().dispatch()
        self._instrument()

    def _standardize(self) -> None:
        """Check the family bound the standard names, label every standard envoy for
        `support` and `Unavailable`, and instrument what is read at an operation."""
        for name in ("layers", "embed_tokens", "norm", "lm_head"):
            if not isinstance(self.__dict__.get(name), Envoy):
                raise TypeError(
                    f"{plugins.describe(self.family.plugin)} binds no {name!r} on the "
                    f"{type(self._module).__name__}: its vlreg_rename for the wrapper part "
                    f"must name the module that is the model's {name}."
                )
        for envoy, row, name in _standard_tree(self, "", ""):
            envoy._row, envoy._label = row, name
            if isinstance(envoy, Vision):
                tower = envoy
            if row.startswith("vision."):
                envoy._tower = tower
        self._instrument()

    def _instrument(self) -> None:
        """Source-instrument every forward a value is read inside of.

        Done at build (and again when the weights arrive), not on first read: a value
        inside a forward that is already running when it is first asked for (the
        scatter, in the forward the tower runs in) would otherwise never be served.
        """
        for envoy, _, _ in _standard_tree(self, "", ""):
            if envoy.sourced:
                install_source(envoy)
        vision = self.__dict__.get("vision")
        if isinstance(vision, Vision) and vision.no_images() is None:
            install_source(scatter_host(self)[1])


def _standard_tree(envoy: Standard, row: str, name: str) -> Iterator[tuple[Standard, str, str]]:
    """Every standard envoy under ``envoy`` (itself first), with its row prefix and name."""
    yield envoy, row, name
    for attribute, prefix in envoy.standard_children.items():
        child = envoy.__dict__.get(attribute)
        if child is None:
            continue
        where = f"{name}.{attribute}" if name else attribute
        if isinstance(child, Standard):
            yield from _standard_tree(child, row + prefix, where)
            continue
        if not isinstance(child._module, torch.nn.ModuleList):
            raise TypeError(_unmapped(envoy, where, child))
        for index, block in enumerate(child):
            if not isinstance(block, Standard):
                raise TypeError(_unmapped(envoy, f"{where}[{index}]", block))
            yield from _standard_tree(block, row + prefix, f"{where}[{index}]")


def _unmapped(envoy: Standard, where: str, child: Envoy) -> str:
    family = envoy.root.family
    return (
        f"{where} is a {type(child._module).__name__} that no plugin of the "
        f"{family.name!r} family maps to a standard envoy class: add it to the "
        f"plugin's vlreg_envoys."
    )


def _config(checkpoint: Any, kwargs: dict) -> Any:
    if isinstance(checkpoint, torch.nn.Module):
        return checkpoint.config
    if kwargs.get("config") is not None:
        return kwargs["config"]
    from transformers import AutoConfig

    options = {k: kwargs[k] for k in ("revision", "trust_remote_code", "token") if k in kwargs}
    return AutoConfig.from_pretrained(checkpoint, **options)


def _text_task_fallback(config: Any, task: str, dispatch: bool) -> contextlib.AbstractContextManager:
    """Refuse or warn about a text-generation load that no image can reach.

    Where transformers has no causal-LM class for the config, its text-generation
    pipeline loads the wrapper itself, with a tokenizer and no processor; that cannot
    be built lazily. Where the causal-LM class of a vision-language config is the
    wrapper (Gemma 3's), the load is the same but can be lazy. Either way it is
    warned about. Returns a context that silences the pipeline's own complaint about
    a missing class, which lists every causal-LM class and says nothing useful here.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    if task != TEXT:
        return contextlib.nullcontext()
    quiet: contextlib.AbstractContextManager = contextlib.nullcontext()
    if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING:
        if getattr(config, "vision_config", None) is None:
            return quiet
        loaded = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)].__name__
        what = f"{TEXT!r} loads {config.model_type!r} as {loaded}"
    elif not dispatch:
        raise ValueError(
            f"transformers has no text-only class for {config.model_type!r}, so it cannot "
            f"be built lazily for {TEXT!r}: load with task={IMAGE_TEXT!r} (the wrapper "
            f"with its processor), or with dispatch=True (the wrapper, text prompts only)."
        )
    else:
        what = f"transformers has no text-only class for {config.model_type!r}: loading the wrapper"
        quiet = _silenced(logging.getLogger("transformers.pipelines.base"))
    warnings.warn(
        f"{what} with a tokenizer and no processor, so no image reaches the model. "
        f"Load with task={IMAGE_TEXT!r} to trace images.",
        stacklevel=3,
    )
    return quiet


@contextlib.contextmanager
def _silenced(logger: logging.Logger) -> Iterator[None]:
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
