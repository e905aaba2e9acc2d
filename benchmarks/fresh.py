"""What `run` measures in fresh processes: the time to import each stack, to build each
wrapper on the meta device (the full geometry and the largest published ones, with the
memory a build adds), the peak memory a workload adds over the loaded model, and ``make
demo``'s time. A smoke run (`SMOKE`) runs the same code (``make demo``'s command) in its own
process instead."""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: A smoke run (--smoke): `python` runs its code in this process.
SMOKE = False


def python(code: str) -> str:
    """What ``code`` prints, run in a new process (in this one on a smoke run)."""
    if SMOKE:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "<benchmark code>", "exec"), {"__name__": "__main__"})
        return printed.getvalue()
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def in_fresh_process(code: str, repeats: int) -> list[float]:
    """Seconds ``code`` reports (it prints one float), run ``repeats`` times, each in a new process."""
    return [float(python(code).strip().splitlines()[-1]) for _ in range(repeats)]


IMPORT_STACK = "import time; t = time.perf_counter(); import nnsight, transformers; print(time.perf_counter() - t)"
IMPORT_VLREG = (
    "import time; t = time.perf_counter(); import vlreg\n"
    "from vlreg.core.host.plugins import plugin_manager; plugin_manager(); print(time.perf_counter() - t)"
)
BUILD = """
import time, warnings
warnings.simplefilter("ignore")
from {module} import {cls}
{cls}({path!r}, task="image-text-to-text", dispatch=False{extra})  # the first build loads what builds need
t = time.perf_counter()
{cls}({path!r}, task="image-text-to-text", dispatch=False{extra})
print(time.perf_counter() - t)
"""


#: The largest geometries (transformers' config classes with the published widths and
#: depths), built on the meta device: the build's time and memory, no weights.
LARGE = {
    "Qwen2-VL-72B": ("Qwen2VLConfig", {"text_config": {"hidden_size": 8192, "intermediate_size": 29568,
                      "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 152064},
                      "vision_config": {"embed_dim": 1280, "depth": 32, "hidden_size": 8192}}),
    "Qwen2.5-VL-72B": ("Qwen2_5_VLConfig", {"text_config": {"hidden_size": 8192, "intermediate_size": 29568,
                        "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 152064},
                        "vision_config": {"hidden_size": 1280, "depth": 32, "out_hidden_size": 8192}}),
    "Qwen3-VL (defaults)": ("Qwen3VLConfig", {"vision_config": {"out_hidden_size": 4096}}),
    "Qwen3.5-MoE (defaults)": ("Qwen3_5MoeConfig", {"vision_config": {"out_hidden_size": 2048}}),
}

BUILD_MEMORY = """
import time, warnings
warnings.simplefilter("ignore")
from {module} import {cls}
def status(field):
    return int(next(l for l in open("/proc/self/status") if l.startswith(field)).split()[1]) * 1024
{cls}({path!r}, task="image-text-to-text", dispatch=False{extra})  # the first build loads what builds need
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
t = time.perf_counter()
model = {cls}({path!r}, task="image-text-to-text", dispatch=False{extra})
print(time.perf_counter() - t, status("VmHWM") - before)
"""


def large_builds(repeats: int) -> dict:
    """Build time and the memory a build adds, raw nnsight against vlreg, in fresh processes."""
    import tempfile

    import transformers
    from transformers import AutoProcessor

    from vlreg.testing import build

    processor = AutoProcessor.from_pretrained(build("qwen2_vl"))
    found = {}
    for name, (config_class, fields) in LARGE.items():
        folder = Path(tempfile.mkdtemp(prefix="vlreg-bench-"))
        getattr(transformers, config_class)(**fields).save_pretrained(folder)
        processor.save_pretrained(folder)
        runs = {"nnsight": [], "vlreg": []}
        for _ in range(repeats):
            for runner, (module, cls, extra) in {
                "nnsight": ("nnsight", "TransformersModel", f", processor={str(folder)!r}"),
                "vlreg": ("vlreg", "StandardizedTransformer", ""),
            }.items():
                code = BUILD_MEMORY.format(module=module, cls=cls, path=str(folder), extra=extra)
                runs[runner].append(tuple(map(float, python(code).split()[-2:])))
        found[name] = {f"{runner} build (s)": statistics.median(t for t, _ in measured) for runner, measured in runs.items()}
        found[name].update({f"{runner} memory (MiB)": statistics.median(m for _, m in measured) / 2**20
                            for runner, measured in runs.items()})
    return found


def demo(repeats: int) -> dict:
    """``make demo``'s command (``vlreg demo --out``) in a fresh process with an empty
    cache, as after ``make install``: wall and CPU seconds, medians over ``repeats``. A smoke
    run calls the same command in this process (tests/test_demo.py runs it fresh)."""
    import resource
    import tempfile

    walls, cpus = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as scratch:
            cache, out = str(Path(scratch) / "cache"), str(Path(scratch) / "out")
            who = resource.RUSAGE_SELF if SMOKE else resource.RUSAGE_CHILDREN
            before = resource.getrusage(who)
            start = time.perf_counter()
            if SMOKE:
                _demo_here(cache, out)
            else:
                subprocess.run([sys.executable, "-m", "vlreg", "demo", "--out", out], env={**os.environ, "VLREG_CACHE": cache},
                               capture_output=True, text=True, check=True)
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(who)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {"wall (s)": statistics.median(walls), "cpu (s)": statistics.median(cpus), "runs": repeats}


def _demo_here(cache: str, out: str) -> None:
    """``vlreg demo --out out`` in this process, its cache at ``cache``, what it prints kept."""
    from vlreg.cli import main

    before = os.environ.get("VLREG_CACHE")
    os.environ["VLREG_CACHE"] = cache
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if main(["demo", "--out", out]) != 0:
                raise RuntimeError("vlreg demo failed")
    finally:
        if before is None:
            del os.environ["VLREG_CACHE"]
        else:
            os.environ["VLREG_CACHE"] = before


def startup(path: Path, repeats: int) -> dict:
    stack, with_vlreg, nnsight_build, vlreg_build = [], [], [], []
    for _ in range(repeats):  # interleaved, so both see the same machine
        stack += in_fresh_process(IMPORT_STACK, 1)
        with_vlreg += in_fresh_process(IMPORT_VLREG, 1)
        nnsight_build += in_fresh_process(BUILD.format(module="nnsight", cls="TransformersModel", path=str(path), extra=f", processor={str(path)!r}"), 1)
        vlreg_build += in_fresh_process(BUILD.format(module="vlreg", cls="StandardizedTransformer", path=str(path), extra=""), 1)
    return {
        "import nnsight + transformers (s)": statistics.median(stack),
        "import vlreg + plugins (s)": statistics.median(with_vlreg),
        "build nnsight, meta (s)": statistics.median(nnsight_build),
        "build vlreg, meta (s)": statistics.median(vlreg_build),
    }


MEMORY = """
import sys, torch, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import run, sweeps, workloads

def status(field):
    line = next(line for line in open("/proc/self/status") if line.startswith(field))
    return int(line.split()[1]) * 1024

model = run.load({path!r}, [{runner!r}])[{runner!r}]
inputs = run.encoding({path!r}, {size})
open("/proc/self/clear_refs", "w").write("5")  # the peak so far was the load's: start it again
before = status("VmRSS")
with torch.no_grad():
    saved = {call}
print(status("VmHWM") - before, workloads.saved_bytes(saved if isinstance(saved, list) else [saved]))
"""


def peak_memory(path: Path, size: int, calls: dict | None = None) -> dict:
    """Peak resident memory a workload adds over the loaded model, per runner, each in a
    fresh process (Linux's /proc peak, reset after the load): by default the all-blocks
    workload."""
    calls = calls or {
        "transformers": "workloads.plain_forward(model, inputs)",
        "nnsight": "workloads.native_all_blocks(model, inputs)",
        "vlreg": "workloads.standard_all_blocks(model, inputs)",
    }
    found = {}
    for runner, call in calls.items():
        code = MEMORY.format(here=str(HERE), path=str(path), size=size, call=call, runner=runner)
        peak, saved = map(int, python(code).split()[-2:])
        found[runner] = {"peak_added_bytes": peak, "saved_bytes": saved}
    return found
