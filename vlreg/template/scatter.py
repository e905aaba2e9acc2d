"""Finding the scatter: the call that writes the image features into the embeddings.

Read off the source of a forward, as nnsight instruments it: an assignment whose value
is a call that takes the variable it replaces (``x = x.masked_scatter(mask, features)``,
``x = x.to(device).masked_scatter(...)``, ``x = self.inputs_merger(inputs_embeds=x,
image_hidden_states=features)``) and an argument named for image features, or whatever
``masked_scatter``'s source is named (BLIP-2's ``language_model_inputs``). A call that
names an audio's or a video's tensor is another modality's scatter, never the image's
(an omni model writes its audio first); a ``masked_scatter`` wins over an earlier
candidate (Gemma 3n's ``torch.where`` of the vision range's embeddings of ids). The
features' argument is its position, or its keyword's name where the call passes it by
keyword; the call's name is nnsight's (its attribute chain joined by ``_``, and the
occurrence on that line).
"""

from __future__ import annotations

import ast
import re

import torch

#: An argument that carries image features, by its variable's name; and names that do not.
FEATURES = re.compile(r"image|vision|visual|feature|embeds|hidden_states")
NOT_FEATURES = re.compile(r"mask|ids|token|position|inputs_embeds")
#: A tensor of another modality, by its variable's name: the call is that modality's scatter.
OTHER_MODALITY = re.compile(r"audio|video|speech")


def note(notes: list[str], text: str) -> None:
    """Add a TODO sentence to a part's notes, once."""
    if text not in notes:
        notes.append(text)


def find_scatter(model: torch.nn.Module, host: str, notes: list[str]) -> tuple[str, str, int | str] | None:
    """The call that writes the image features into the embeddings, in the forward of
    the text model's parent or of a module above it."""
    path = host
    while True:
        found = _scatter_in(model.get_submodule(path))
        if found is not None:
            operation, argument = found
            if isinstance(argument, str):
                note(notes, f"the features reach the embeddings through a helper ({operation}, keyword "
                             f"{argument!r}): check that it writes them at the image tokens unchanged")
            return path, operation, argument
        if not path:
            break
        path = path.rpartition(".")[0]
    note(notes, f"no call in the forward of {host or 'the root'} or above takes image features and replaces the "
                 f"embeddings: find where they are written (print {'.'.join(['model', host] if host else ['model'])}"
                 f".source) and set SCATTER")
    return None


#: A text model's parameter that takes the image's states for its cross-attention blocks.
CROSS_STATES = re.compile(r"cross_attention_states|encoder_hidden_states")


def find_cross_attention(model: torch.nn.Module, text: str, notes: list[str]) -> tuple[str, str] | None:
    """Where no scatter writes features in: the text model's parameter that takes the
    image's states for blocks that cross-attend to them (Mllama's ``cross_attention_states``)."""
    import inspect

    parameters = inspect.signature(model.get_submodule(text).forward).parameters
    found = next((name for name in parameters if CROSS_STATES.fullmatch(name)), None)
    if found is None:
        return None
    notes[:] = [line for line in notes if not line.startswith("no call in the forward")]
    note(notes, f"no scatter: the text model takes the image's states as {found!r}, read by the blocks that cross-attend "
                f"(CrossAttention; docs/where-images-meet-text.md): check that the wrapper passes the projector's output "
                f"there. A random model whose gates start at zero (Mllama's) shuts the image out: set them in the builder")
    return text, found


def _scatter_in(module: torch.nn.Module) -> tuple[str, int | str] | None:
    import warnings

    from nnsight.intervention.envoy import Envoy

    try:
        with warnings.catch_warnings():  # nnsight's notes on the module's child names are not the survey's
            warnings.simplefilter("ignore")
            compiled = Envoy(module).source.compiled
    except Exception:  # a forward with no Python source: nothing to find here
        return None
    at = {}
    for operation in compiled.names:
        at.setdefault(compiled.lines[operation], []).append(operation)
    assigns = [node for node in ast.walk(ast.parse(compiled.source)) if isinstance(node, ast.Assign)]
    found = []
    for node in sorted(assigns, key=lambda node: (node.lineno, node.col_offset)):
        target = node.targets[0]
        if not (isinstance(target, ast.Name) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        argument = _features(call, target.id)
        if argument is None or not _updates(call, target.id) or _other_modality(call):
            continue
        name = "_".join(_dotted(call.func))
        operations = [op for op in at.get(call.lineno, ()) if re.fullmatch(rf"{re.escape(name)}_\d+", op)]
        if operations:
            found.append((_dotted(call.func)[-1:] == ["masked_scatter"], operations[0], argument))
    # a masked_scatter of features is the scatter over another call that merely takes a tensor
    # named like them (Gemma 3n first writes its vision tokens' own embeddings with torch.where)
    scatters = [each for each in found if each[0]] or found
    return scatters[0][1:] if scatters else None


def _dotted(expr: ast.expr) -> list[str]:
    """A call's attribute chain as nnsight names it (``self.merge`` -> self, merge)."""
    parts = []
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        if isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
    return parts[::-1]


def _receiver(call: ast.Call) -> ast.expr | None:
    """What a method call is made on, through a chain (``x.to(device).masked_scatter``: ``x``)."""
    expr = call.func.value if isinstance(call.func, ast.Attribute) else None
    while isinstance(expr, (ast.Call, ast.Attribute, ast.Subscript)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr


def _updates(call: ast.Call, target: str) -> bool:
    """Whether the call takes the variable it is assigned to (``x = x.masked_scatter(...)``,
    ``x = self.merge(inputs_embeds=x, ...)``): it writes into the embeddings."""
    values = [*call.args, *(keyword.value for keyword in call.keywords)]
    return any(isinstance(v, ast.Name) and v.id == target for v in [_receiver(call), *values])


def _other_modality(call: ast.Call) -> bool:
    names = [node.id for node in ast.walk(call) if isinstance(node, ast.Name)]
    return any(OTHER_MODALITY.search(name) for name in names)


def _features(call: ast.Call, target: str) -> int | str | None:
    """Which argument carries the image features: a position, or a keyword's name;
    ``masked_scatter``'s source whatever its name."""

    def carries(value: ast.expr) -> bool:
        return isinstance(value, ast.Name) and value.id != target and bool(FEATURES.search(value.id)) \
            and not NOT_FEATURES.search(value.id)

    for index, value in enumerate(call.args):
        if carries(value):
            return index
    source = call.args[1] if len(call.args) == 2 else None
    if _dotted(call.func)[-1:] == ["masked_scatter"] and isinstance(source, ast.Name) and source.id != target:
        return 1
    return next((keyword.arg for keyword in call.keywords if keyword.arg and carries(keyword.value)), None)
