"""What `make test-remote`'s NDIF server runs in place of two of ndif 0.1.2's classes.

Imported inside the Ray workers (``server.py`` puts this folder on their
``PYTHONPATH`` and names the classes through ``NDIF_CONTROLLER_IMPORT_PATH`` and
``NDIF_MODEL_IMPORT_PATH``), never by vlreg or its tests.

* `CPUModelActor`: ndif's sandboxing model actor (`SandboxModelDeployment`: a
  trusted request runs in the actor, any other in a fresh runner process against
  a weightless copy of the model) loading on the CPU. ndif's loads onto the GPUs
  the controller assigned and calls ``torch.cuda`` after every request; this
  machine has none, so the actor loads on the CPU and skips the CUDA calls.
  Everything else (the request's deserialization, the sandbox, the run, the
  result's way back) is ndif's own.
* `Controller`: ndif's controller with a **shim of someone else's server**: ndif
  0.1.2 asks nnsight to describe a checkpoint with ``trust_remote_code=``, which
  nnsight 0.8.1's ``describe_checkpoint`` and ``max_tp_size`` do not take (no
  released ndif matches nnsight 0.8.1). The shim drops the keyword; nnsight reads
  ``trust_remote_code`` from the model key instead.
"""

from __future__ import annotations

import gc
import inspect

import ray
from ndif.services.ray.deployments.controller.controller import _ControllerActor
from ndif.services.ray.sandbox.model import SandboxModelDeployment
from nnsight.modeling.huggingface import HuggingFaceModel
from nnsight.modeling.mixins.remotable import Remotable


def shim_trust_remote_code() -> None:
    """Let ndif 0.1.2 call nnsight 0.8.1's checkpoint questions with ``trust_remote_code=``.

    A no-op once nnsight takes the keyword itself, so a newer nnsight is not shimmed.
    """
    for name in ("describe_checkpoint", "max_tp_size"):
        method = getattr(Remotable, name)
        if "trust_remote_code" in inspect.signature(method).parameters:
            continue

        def without(model_key, *args, _method=method, trust_remote_code=False, **kwargs):
            return _method(model_key, *args, **kwargs)

        setattr(Remotable, name, staticmethod(without))


@ray.remote(num_cpus=1, num_gpus=0, max_restarts=-1, resources={"head": 1})
class Controller(_ControllerActor):
    """ndif's controller, with `shim_trust_remote_code` applied in its process."""

    def __init__(self, *args, **kwargs):
        shim_trust_remote_code()
        super().__init__(*args, **kwargs)


@ray.remote(num_cpus=1, max_restarts=0)
class CPUModelActor(SandboxModelDeployment):
    """ndif's sandboxing model actor, loading on the CPU: the model the key names, in
    the deployment's dtype, built by the class the key names (vlreg's, for vlreg's
    key); its runners (``NDIF_SANDBOX_POOL_SIZE`` kept warm) build the same key on the
    meta device. Never restarted (ndif's is, forever): a load that fails fails the
    run, not loops."""

    #: Parking a replica moves its weights off a GPU; on the CPU there is nothing to free.
    CACHEABLE = False

    def load_from_disk(self) -> HuggingFaceModel:
        model = HuggingFaceModel.from_model_key(
            self.model_key, dispatch=True, dtype=self.dtype_name, device_map="cpu", **self.kwargs
        )
        model._module.requires_grad_(False)
        return model

    def cleanup(self) -> None:
        # ndif's cleanup (the request's runner discarded, then the base's reset),
        # less torch.cuda.synchronize (which needs a GPU).
        self.discard_sandbox()
        self.kill_switch.clear()
        self.kill_reason = None
        self.execution_ident = None
        self.model.interleaver.cancel()
        gc.collect()
