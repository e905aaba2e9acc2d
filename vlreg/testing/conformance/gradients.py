"""Gradient conformance: ``.grad`` of every served value is autograd's, and an edit of it lands.

The reference is plain autograd on the tensors the model uses: a first trace reads, at each
value's location, the tensor nnsight hands the model there (no vlreg value is read), keeps
its gradient (``retain_grad``) and the order gradients arrive in (plain tensor hooks), and
computes by ``torch.autograd.grad`` what an edit of one value's gradient does upstream. The
expected gradient of a value is its own view (its `Site`'s read) applied to those
gradients. A second trace reads the served values and, inside ``with metric.backward():``,
their ``.grad``, edits one, and must agree.

Values are sampled per run to keep CI cheap: every value outside the blocks and the values of
one block of each stack, drawn with a seed that is printed; ``VLREG_GRADIENT_SEED`` sets it.
"""

from __future__ import annotations

import functools
import os
import random
from typing import Any

import torch
from nnsight.intervention.interleaver import Mediator
from torch.autograd import forward_ad
from torch.autograd.graph import get_gradient_edge

from ...core.errors import Unavailable
from ...core.serving.backward import GradientOutOfOrder
from ...core.serving.sites import Site
from ...core.serving.values import value
from .helpers import served_on_images

SEED_VARIABLE = "VLREG_GRADIENT_SEED"


def gradient_seed() -> int:
    """The sampling seed: ``VLREG_GRADIENT_SEED``, else a fresh one (printed by the tests)."""
    given = os.environ.get(SEED_VARIABLE)
    return int(given) if given else random.randrange(10**6)


def sampled(model: Any, seed: int) -> list[tuple[Any, str]]:
    """The values served on image prompts outside the blocks and those of one block per
    stack (drawn with ``seed``), in forward order."""
    stacks: dict[int, list] = {}
    for envoy, name in model.walk():
        if envoy.block_index is not None:
            stack = _stack_of(envoy)
            stacks.setdefault(id(stack), [len(stack), None])
    chooser = random.Random(seed)
    for entry in stacks.values():
        entry[1] = chooser.randrange(entry[0])
    chosen = []
    for envoy, name in served_on_images(model):
        descriptor = getattr(type(envoy), name)
        if descriptor.at.calls is not None:
            continue  # per-call lists: each call is its module's own input or output
        if envoy.block_index is not None and envoy.block_index != stacks[id(_stack_of(envoy))][1]:
            continue
        chosen.append((envoy, name))
    return chosen


def _stack_of(envoy: Any) -> Any:
    """The module list the block ``envoy`` is (or is part of) belongs to."""
    while envoy.parent is not None and not _is_stack(envoy.parent):
        envoy = envoy.parent
    return envoy.parent


def _is_stack(envoy: Any) -> bool:
    return isinstance(getattr(envoy, "_module", None), torch.nn.ModuleList)


def raw_at(envoy: Any, name: str, site: Site) -> Any:
    """In a trace: what nnsight hands the model at value ``name``'s `Site` (before vlreg's
    view), read at the occurrence the value is pinned to."""
    descriptor: value = getattr(type(envoy), name)
    location = site.location
    mediator = Mediator.current(location)
    pinned, kept = descriptor._pin(envoy), mediator.iteration
    if pinned is not None:
        mediator.iteration = pinned
    try:
        return Mediator.value(location)
    finally:
        mediator.iteration = kept


def tensors(structure: Any) -> list[torch.Tensor]:
    """The tensors in ``structure`` (tuples, lists, dicts, model outputs), in order."""
    if isinstance(structure, torch.Tensor):
        return [structure]
    if isinstance(structure, dict):
        return [t for item in structure.values() for t in tensors(item)]
    if isinstance(structure, (list, tuple)):
        return [t for item in structure for t in tensors(item)]
    return []


def replaced(structure: Any, new: dict[int, torch.Tensor]) -> Any:
    """``structure`` with each tensor whose id is in ``new`` replaced by it."""
    if isinstance(structure, torch.Tensor):
        return new.get(id(structure), structure)
    if isinstance(structure, dict):
        return type(structure)(**{key: replaced(item, new) for key, item in structure.items()})
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        return type(structure)(*(replaced(item, new) for item in structure))
    if isinstance(structure, (list, tuple)):
        return type(structure)(replaced(item, new) for item in structure)
    return structure


def carries(tensor: torch.Tensor) -> bool:
    return (tensor.is_floating_point() or tensor.is_complex()) and tensor.requires_grad


def flat(served: Any, label: str) -> list[tuple[str, Any]]:
    """A served value as ``(label, tensor)`` pairs: itself, or each element of a list."""
    if isinstance(served, (list, tuple)):
        return [pair for index, item in enumerate(served) for pair in flat(item, f"{label}[{index}]")]
    return [(label, served)]


def metric_of(model: Any, logits: torch.Tensor, seed: int) -> torch.Tensor:
    """A scalar of the last position's logits, weighted by fixed random weights."""
    weights = torch.randn(logits.shape[-1], generator=torch.Generator().manual_seed(seed))
    return (logits[:, -1].float() * weights.to(logits.device)).sum()


class GradientConformance:
    """Mixed into `TextConformance`, so every family, built in or a third party's, runs it.

    Uses the class's ``order_input`` (an image prompt and one image on a vision family) and
    ``load_options`` (a bfloat16 load compares at bfloat16's precision)."""

    def gradient_tolerance(self, model: Any) -> float:
        return 5e-2 if model._module.dtype in (torch.bfloat16, torch.float16) else 1e-3

    def test_gradients_of_served_values_are_autograds_and_an_edit_lands(self, model):
        seed = gradient_seed()
        print(f"gradient conformance: {SEED_VARIABLE}={seed}")
        chosen = sampled(model, seed)
        args, kwargs = self.order_input(model)
        reference = _Reference(model, chosen, args, kwargs, seed)
        read, refused, never = self._gradients_read(model, chosen, args, kwargs, seed, reference)
        tolerance, wrong, checked = self.gradient_tolerance(model), [], 0
        for key, actual in read.items():
            want = reference.expected(key)
            # an edit can leave a small gradient out of large parts: measure against the larger
            scale = torch.maximum(want.float().abs().max(), reference.expected(key, edited=False).float().abs().max())
            scale = scale.clamp_min(1e-12)
            if not torch.allclose(actual.float(), want.float(), rtol=tolerance, atol=tolerance * float(scale)):
                wrong.append(f"{reference.label(key)}: max difference {float((actual.float() - want.float()).abs().max()):.3g}"
                             f" of {float(scale):.3g}")
            checked += 1
        missed = [reference.label(key) for key in reference.discrete if key not in refused]
        edited = None if reference.target is None else reference.label(reference.target)
        print(f"gradient conformance: {checked} gradients checked, {edited} edited, "
              f"{[reference.label(key) for key in refused]} refused, {never} never reached")
        assert not wrong, f"gradients differ from autograd's ({SEED_VARIABLE}={seed}): {wrong}"
        assert never is None or " " not in never, f"{never} ({SEED_VARIABLE}={seed})"
        assert not missed, f"integer values whose .grad was not refused ({SEED_VARIABLE}={seed}): {missed}"
        assert checked > 3, f"only {checked} gradients checked ({SEED_VARIABLE}={seed})"

    def _gradients_read(self, model, chosen, args, kwargs, seed, reference) -> tuple[dict, dict, str | None]:
        """vlreg's ``.grad`` of the chosen values: the edited one first (read, then edited),
        those viewing the same tensor, then the rest in the order they arrive, the integers'
        refusals, and last one value no gradient reaches."""
        read: dict = {}
        refused: dict = {}
        served: list = []
        never: list = []
        with model.trace(*args, **kwargs):
            for envoy, name in chosen:
                served.append(dict(flat(getattr(envoy, name), name)))
            metric = metric_of(model, model.logits, seed)
            inputs = list({id(t): t for each in served for t in each.values() if _carries(t)}.values())
            with metric.backward(inputs=inputs):
                for key in reference.discrete:
                    try:
                        served[key[0]][key[1]].grad
                    except Unavailable as error:
                        refused[key] = str(error)
                twins = reference.twins()
                for key in reference.asked():
                    read[key] = served[key[0]][key[1]].grad.clone().save()
                    if key == (twins[-1] if twins else reference.target):
                        target = reference.target
                        served[target[0]][target[1]].grad = reference.new
                if reference.unreached:
                    key = reference.unreached[0]
                    try:
                        served[key[0]][key[1]].grad
                        never.append(f"{reference.label(key)}.grad was served, and autograd gives it none")
                    except GradientOutOfOrder as error:
                        never.append(reference.label(key) if "never arrived" in str(error) else str(error))
        return read, refused, (never[0] if never else None)


def _carries(tensor: Any) -> bool:
    return isinstance(tensor, torch.Tensor) and carries(tensor)


class _Reference:
    """Plain autograd on the tensors the model uses at the chosen values' locations: each
    value's elements by ``(value index, label)``, the raw tensors each one views, their
    gradients, the order they arrive in, and one element's edit and its effect upstream."""

    def __init__(self, model, chosen, args, kwargs, seed) -> None:
        self.chosen = chosen
        self.raws: list = []
        self.sites: list[Site] = []  # each value's, taken in the trace (a drilled location needs it)
        self.views: dict = {}  # element -> its view of the raw value
        self.owners: dict = {}  # element -> ids of the raw tensors it views
        arrivals: list = []
        captured: dict = {}
        edges: dict = {}
        handles: list = []

        def keep(grad, key):
            arrivals.append(key)
            captured[key] = grad

        with model.trace(*args, **kwargs):
            for index, (envoy, name) in enumerate(chosen):
                self.sites.append(getattr(type(envoy), name).site(envoy))
                raw = replaced(raw_at(envoy, name, self.sites[-1]), {})  # its containers as read: a wrapper may refill them later
                self.raws.append(raw)
                self._elements(index, envoy, name)
                for tensor in tensors(raw):
                    if carries(tensor) and id(tensor) not in edges:
                        edges[id(tensor)] = get_gradient_edge(tensor)
                        handles.append(tensor.register_hook(functools.partial(keep, key=id(tensor))))
            metric = metric_of(model, model.logits, seed)
            torch.autograd.backward(metric, inputs=list(edges.values()), retain_graph=True)
            for handle in handles:  # the edit's backward below must not overwrite them
                handle.remove()
            self.grads = captured
            self.edges = edges
            self.rank = {key: rank for rank, key in enumerate(dict.fromkeys(arrivals))}
            self.target = self._target()
            self.moved: dict = {}
            if self.target is not None:
                self.new = self._edit(seed)

    def _elements(self, index, envoy, name) -> None:
        raw = self.raws[index]
        carrying = [t for t in tensors(raw) if carries(t)]
        for label, view in flat(self.sites[index].read(raw), name):
            if not isinstance(view, torch.Tensor):
                continue
            key = (index, label)
            self.views[key] = view
            shared = [id(t) for t in carrying if t.untyped_storage().data_ptr() == view.untyped_storage().data_ptr()]
            self.owners[key] = shared or [id(t) for t in carrying]

    @property
    def discrete(self) -> list:
        return [key for key, view in self.views.items() if not (view.is_floating_point() or view.is_complex())]

    def arrival(self, key) -> int | None:
        ranks = [self.rank[owner] for owner in self.owners[key] if owner in self.rank]
        return max(ranks) if ranks and key not in self.discrete and self.views[key].requires_grad else None

    def asked(self) -> list:
        """The elements a gradient reaches: the edited one, those sharing its tensors
        (`twins`), the rest by arrival."""
        reached = sorted((key for key in self.views if self.arrival(key) is not None), key=self.arrival)
        if self.target is None:
            return reached
        twins = self.twins()
        return [self.target, *twins, *(key for key in reached if key not in twins and key != self.target)]

    def twins(self) -> list:
        """The elements viewing the edited one's tensors, read in its visit before the edit."""
        if self.target is None:
            return []
        return [key for key in self.views if key != self.target and self.arrival(key) is not None
                and self.owners[key] == self.owners[self.target]]

    @property
    def unreached(self) -> list:
        return [key for key, view in self.views.items()
                if key not in self.discrete and view.requires_grad and self.arrival(key) is None]

    def label(self, key) -> str:
        envoy, name = self.chosen[key[0]]
        return envoy.label(name) + key[1][len(name):]

    def _target(self):
        """The element whose gradient is edited: one arriving mid-backward, the whole of a
        value with a write-back, over one raw tensor."""
        reached = sorted((key for key in self.views if self.arrival(key) is not None), key=self.arrival)
        fit = [key for key in reached[1:-1] if key[1] == self.chosen[key[0]][1] and len(self.owners[key]) == 1
               and self.sites[key[0]].write is not None]
        return fit[len(fit) // 2] if fit else None

    def _edit(self, seed) -> torch.Tensor:
        """Set the target's gradient to a random tensor; what that moves upstream, by autograd."""
        index, name = self.target
        raw = self.raws[index]
        before = self.expected(self.target)
        generator = torch.Generator().manual_seed(seed + 1)
        new = (torch.randn(before.shape, generator=generator) * before.float().abs().mean().clamp_min(1e-6)).to(before)
        (owner,) = self.owners[self.target]
        (tensor,) = [t for t in tensors(raw) if id(t) == owner]
        with forward_ad.dual_level():
            duals = _duals(raw, self.grads)
            served = forward_ad.make_dual(self.views[self.target].detach(), new)
            rebuilt = self.sites[index].write(replaced(raw, duals), served)
            (edited,) = [t for t, o in zip(tensors(rebuilt), tensors(raw)) if o is tensor]
            change = forward_ad.unpack_dual(edited).tangent.reshape(tensor.shape) - self.grads[owner]
        upstream = [key for key in self.edges if key != owner]
        moved = torch.autograd.grad([self.edges[owner]], [self.edges[key] for key in upstream], grad_outputs=[change],
                                    allow_unused=True, retain_graph=True)
        self.moved = {key: m for key, m in zip(upstream, moved) if m is not None}
        return new

    def expected(self, key, edited: bool = True) -> torch.Tensor:
        """The element's view of the raw tensors' gradients (with the edit's effect where it
        arrives after the edited one, unless not ``edited``)."""
        index, label = key
        name = self.chosen[index][1]
        raw = self.raws[index]
        grads = self.grads
        after = edited and self.target is not None and self.owners[key] != self.owners[self.target] and \
            (self.arrival(key) or -1) > (self.arrival(self.target) or 0)
        if after:
            grads = {owner: grad + self.moved.get(owner, 0) for owner, grad in grads.items()}
        with forward_ad.dual_level():
            viewed = dict(flat(self.sites[index].read(replaced(raw, _duals(raw, grads))), name))[label]
            tangent = forward_ad.unpack_dual(viewed).tangent
        return torch.zeros_like(viewed) if tangent is None else tangent


def _duals(raw: Any, grads: dict) -> dict[int, torch.Tensor]:
    """Each tensor of ``raw`` as a dual number whose tangent is its gradient (zeros where
    none arrived): a value's view of them then carries, as its tangent, that view applied
    to the gradients, with every index the view computes taken from the values (a router's
    top-k slots), not from the gradients. An ``expand``ed tensor (elements sharing memory),
    which a dual cannot be made of, is copied first: its values are the same."""
    return {id(t): forward_ad.make_dual(_unshared(t.detach()), grads.get(id(t), torch.zeros_like(t)))
            for t in tensors(raw) if carries(t)}


def _unshared(tensor: torch.Tensor) -> torch.Tensor:
    shared = any(stride == 0 and size > 1 for size, stride in zip(tensor.shape, tensor.stride()))
    return tensor.clone() if shared else tensor
