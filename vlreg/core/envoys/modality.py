"""`ModalityExperts`: a block's MLP that sends each token to one of two banks of routed
experts by the token's modality, not by a router, beside shared experts every token runs
through (ERNIE 4.5-VL-MoE's ``Ernie4_5_VLMoeMoeBlock``: ``text_moe``, ``vision_moe``,
``shared_experts``).

Which bank takes a token is the model's input, not a routing decision: the processor marks
the image's and video's tokens (their start and end markers too) and the block receives the
marks as its second argument. Each bank is an `ExpertBank`, a `MoeMlp` over the tokens it
took, in the batch's row-major order. Values, in forward order:

* ``modality_mask`` ``[batch, seq]``, bool: True at the tokens sent to the vision bank, the
  rest went to the text bank. Read-only: the same marks reach every block, so edit the prompt;
* ``shared_expert_output`` ``[batch, seq, hidden]``: the shared experts' output;
* ``text_experts.*``, ``vision_experts.*``: each bank's routing and outputs (`ExpertBank`),
  ``[bank tokens, ...]``;
* ``mlp_output`` ``[batch, seq, hidden]``: what the block adds to the stream, each token's
  bank's output at its place plus the shared experts'.

Where no token is marked (a prompt without an image) the block sends every token to the text
bank, and the vision bank does not run: its values are refused for that run.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from ..errors import Unavailable
from ..serving.refusals import Gate, read_only
from ..serving.values import returned, value, with_first
from .experts import MoeMlp
from .text import Mlp


def _bank_idle(asked: Any) -> str | None:
    """The vision bank runs only on a run whose prompt marks some token for it."""
    bank = asked.envoy
    if not bank.is_vision_bank:
        return None
    marks = asked.run.inputs.get(bank.marks_input)
    if isinstance(marks, torch.Tensor) and bool(marks.bool().any()):
        return None
    return (f"no token of this run is marked for the vision bank ({bank.marks_input}: the prompt holds no "
            f"image or video), so every token went to the text bank and this bank did not run")


class ExpertBank(MoeMlp):
    """One bank of a `ModalityExperts`: a router and experts over the tokens the block sent
    it, ``[bank tokens, ...]`` in the batch's row-major order (``"whole"`` layout: served to a
    trace of one invoke)."""

    shared_expert_module = None
    token_layout = "whole"
    #: The native name of the bank that takes the marked tokens, and the input marking them.
    vision_module: ClassVar[str] = "vision_moe"
    marks_input: ClassVar[str] = "moe_mm_token_type_ids"
    order = ("router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output")
    refuses = {name: (*([MoeMlp.refuses[name]] if name in MoeMlp.refuses else []), Gate(_bank_idle)) for name in order}
    #: Not a bank's: it returns its tokens' output flattened, which the block writes in at their
    #: places (the block's ``mlp_output``), and the shared experts are the block's.
    mlp_output = None
    shared_expert_output = None

    @property
    def is_vision_bank(self) -> bool:
        """Whether this bank takes the tokens the prompt marks (the image's and video's)."""
        return self.path.rsplit(".", 1)[-1] == self.vision_module


def _mask(mlp: Any, raw: Any) -> Any:
    args, kwargs = raw
    marks = args[1] if len(args) > 1 else kwargs.get(mlp.marks_argument)
    if marks is None:
        return torch.zeros(args[0].shape[:-1], dtype=torch.bool, device=args[0].device)
    return marks.bool()


def _shared(mlp: Any) -> Any:
    return getattr(mlp._module, mlp.shared_module, None) if mlp.shared_module else None


class ModalityExperts(Mlp):
    """A block's MLP of two expert banks chosen by modality and shared experts (the module
    docstring). ``shared_module`` names its shared experts natively; a family renames the banks
    ``text_experts`` and ``vision_experts`` (each an `ExpertBank`, which knows which it is)."""

    shared_module: ClassVar[str | None] = "shared_experts"
    #: The forward's argument marking the tokens for the vision bank (its second).
    marks_argument: ClassVar[str] = "moe_mm_token_type_ids"
    standard_children = {"text_experts": "text_experts.", "vision_experts": "vision_experts."}
    order = ("modality_mask", "shared_expert_output", "text_experts", "vision_experts", "mlp_output")
    refuses = {
        "modality_mask": read_only(
            "which bank takes a token is the processor's moe_mm_token_type_ids, handed to every block alike; "
            "edit the prompt, or a bank's router_logits to reroute within a bank"),
        "shared_expert_output": lambda mlp: None if _shared(mlp) is not None else "this MLP has no shared experts",
    }

    modality_mask = value("input", description="True at the tokens sent to the vision bank, [batch, seq]")(_mask)
    shared_expert_output = value(
        lambda mlp: f"{getattr(mlp, mlp.shared_module).path}.output",
        description="the shared experts' output, every token's, [batch, seq, hidden]",
    )(lambda mlp, raw: raw).writes(with_first)
    mlp_output = returned(description="what the MLP adds to the stream: each token's bank's output plus the shared experts'")

    @property
    def intermediate_size(self) -> int:
        raise Unavailable(
            f"{self.label('intermediate_size')} is unavailable: the two banks' experts are of their own widths; "
            f"read mlp.text_experts.intermediate_size and mlp.vision_experts.intermediate_size")
