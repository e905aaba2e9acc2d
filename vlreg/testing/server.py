"""Running a trace the way an NDIF model actor runs a request, in this process.

nnsight's ``remote="local"`` serializes a trace as a remote request and checks that it
deserializes with the user's own modules hidden, then runs the *original* tracer, so the
objects that arrive are never run. `ServerBackend` runs what arrives: the request is
serialized as `RemoteBackend` sends it, deserialized against the model's persistent
objects as the actor does (``model._remoteable_persistent_objects()``), executed as
ndif's ``execute_traced_block`` executes a trusted request (the arrived tracer, its
block's saved names collected), and the saved values come back through ``torch.save``
as a result blob does. The model that runs is the copy that arrived, with its own lock,
family and batch (`vlreg.core.remote`), on the same modules.

    with model.trace(prompt, images=images, backend=ServerBackend(model)):
        logits = model.logits.save()
"""

from __future__ import annotations

import io
from typing import Any

import torch
from nnsight.schema.request import RequestModel
from nnsight.tracing.backend import Backend
from nnsight.tracing.tracer import _saves, mark
from nnsight.tracing.util import push


class ServerBackend(Backend):
    """Serialize a trace (or a session), run the request that arrives, push its saves back."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, tracer: Any) -> dict:
        blob = RequestModel.serialize(tracer)
        self.model._remoteable_set_env(self.model._remoteable_get_env())
        arrived = RequestModel.deserialize(blob, self.model._remoteable_persistent_objects())
        arrived.execute(arrived.info.code)
        saved = {name: value for name, value in arrived.info.frame.f_locals.items() if id(value) in _saves()}
        buffer = io.BytesIO()
        torch.save(saved, buffer)
        result = torch.load(io.BytesIO(buffer.getvalue()), map_location="cpu", weights_only=False)
        for value in result.values():
            mark(value)
        push(tracer.info.frame, result)
        return result
