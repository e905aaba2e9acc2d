"""What vlreg costs over raw nnsight and plain transformers (``make bench``).

Per geometry, three copies of one checkpoint are loaded: plain transformers, raw nnsight
(``TransformersModel``) and vlreg (``StandardizedTransformer``). Each workload runs on
all three interleaved (A B C, A B C, ...) after a warm-up, and the ratios are the medians
of each round's pairwise ratios, so drift in the machine's speed cancels. Then: the time
to build each wrapper on the meta device for the full 28-layer geometry, the time to
import each stack, the peak memory of the all-blocks workload, and ``make demo``'s time
(``vlreg demo --out`` with an empty cache), each in fresh processes. Prints a table and
writes JSON.

    python benchmarks/run.py                 # the full run (minutes)
    python benchmarks/run.py --smoke         # a tiny geometry, a few rounds: checks the script

A smoke run's figures mean nothing, so it runs what a full run runs in fresh processes
(imports, builds, peak memory, `make demo`'s command) in its own process instead: the same
code, seconds not a minute.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fresh  # noqa: E402
import sweeps  # noqa: E402
from workloads import WORKLOADS, Native, geometry, plain_forward, write  # noqa: E402

HERE = Path(__file__).resolve().parent
TARGETS = {"vlreg / nnsight": 1.03, "vlreg / transformers": 1.10, "build (s over nnsight)": 0.3,
           "import (s over nnsight + transformers)": 0.2, "occlusion / floor": 1.2, "everything / hooks": 1.10,
           "everything peak memory / hooks'": 1.05, "make demo (s)": 60}


DEVICE, DTYPE = "cpu", torch.float32


def load(path: Path, runners=("transformers", "nnsight", "vlreg")) -> dict:
    """The checkpoint as each runner loads it, on `DEVICE` in `DTYPE`, eager attention."""
    from nnsight import TransformersModel
    from transformers import AutoModelForImageTextToText

    from vlreg import StandardizedTransformer

    options = {"attn_implementation": "eager", "dtype": DTYPE}
    loaders = {
        "transformers": lambda: AutoModelForImageTextToText.from_pretrained(path, device_map=DEVICE, **options).eval(),
        "nnsight": lambda: Native(TransformersModel(str(path), task="image-text-to-text", dispatch=True, device_map=DEVICE, **options)),
        "vlreg": lambda: StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True, device=DEVICE, **options),
    }
    return {runner: loaders[runner]() for runner in runners}


def encoding(path: Path, size: int) -> dict:
    """The processor's encoding of one prompt and one ``size`` x ``size`` image, which every
    runner is given as it is, so none pays for preprocessing."""
    from transformers import AutoProcessor

    prompt, image = prompt_and_image(path, size)
    found = AutoProcessor.from_pretrained(path)(text=prompt, images=[image], return_tensors="pt")
    return {key: value.to(DEVICE) for key, value in found.items()}


def prompt_and_image(path: Path, size: int) -> tuple:
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    image = Image.fromarray((torch.rand(size, size, 3, generator=torch.Generator().manual_seed(0)) * 255).byte().numpy())
    return prompt, image


def timed(fn, *args) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        fn(*args)
    return time.perf_counter() - start


def compare(models: dict, inputs, rounds: int, warmup: int) -> list[dict]:
    plain, native, standard = models["transformers"], models["nnsight"], models["vlreg"]
    rows = []
    for workload, (native_run, standard_run) in WORKLOADS.items():
        print(f"  {workload} ...", flush=True)
        runs = (lambda: plain_forward(plain, inputs), lambda: native_run(native, inputs), lambda: standard_run(standard, inputs))
        for _ in range(warmup):
            for run in runs:
                timed(run)
        times = [[timed(run) for run in runs] for _ in range(rounds)]
        rows.append({
            "workload": workload,
            "transformers_s": statistics.median(t[0] for t in times),
            "nnsight_s": statistics.median(t[1] for t in times),
            "vlreg_s": statistics.median(t[2] for t in times),
            "vlreg / nnsight": statistics.median(t[2] / t[1] for t in times),
            "vlreg / transformers": statistics.median(t[2] / t[0] for t in times),
            "nnsight / transformers": statistics.median(t[1] / t[0] for t in times),
        })
    return rows


def study(models: dict, path: Path, size: int, rounds: int, batch: int) -> dict:
    """The occlusion sweep three ways, one round (a sweep is hundreds of forwards), and
    "cache everything" against hooks, ``rounds`` rounds interleaved (one forward each, so
    one round is at the mercy of the machine's drift)."""
    plain, standard = models["transformers"], models["vlreg"]
    prompt, image = prompt_and_image(path, size)
    inputs = encoding(path, size)
    sweeps_run = {
        "occlusion, vlreg (tower once)": lambda: sweeps.occlusion_vlreg(standard, prompt, [image], batch),
        "occlusion, tower every batch": lambda: sweeps.occlusion_tower_every_batch(standard, prompt, [image], batch),
        "occlusion, floor (transformers)": lambda: sweeps.occlusion_floor(plain, inputs, batch),
    }
    found = {name: timed(run) for name, run in sweeps_run.items()}
    found["occlusion / floor"] = found["occlusion, vlreg (tower once)"] / found["occlusion, floor (transformers)"]
    found["occlusion before / floor"] = found["occlusion, tower every batch"] / found["occlusion, floor (transformers)"]
    everything = [(timed(sweeps.everything_vlreg, standard, inputs), timed(sweeps.everything_hooks, plain, inputs))
                  for _ in range(rounds)]
    found["everything, vlreg"] = statistics.median(a for a, _ in everything)
    found["everything, hooks"] = statistics.median(b for _, b in everything)
    found["everything / hooks"] = statistics.median(a / b for a, b in everything)
    return found


def table(results: dict) -> str:
    lines = ["| geometry | workload | transformers | raw nnsight | vlreg | vlreg / nnsight | vlreg / transformers |",
             "|---|---|---|---|---|---|---|"]
    for name, run in results["geometries"].items():
        for row in run["workloads"]:
            lines.append(
                f"| {name} | {row['workload']} | {row['transformers_s'] * 1000:.0f} ms | {row['nnsight_s'] * 1000:.0f} ms | "
                f"{row['vlreg_s'] * 1000:.0f} ms | {row['vlreg / nnsight']:.3f} | {row['vlreg / transformers']:.3f} |"
            )
    start = results["startup"]
    lines += [
        "",
        f"import: nnsight + transformers {start['import nnsight + transformers (s)']:.2f} s, "
        f"vlreg + plugins {start['import vlreg + plugins (s)']:.2f} s "
        f"(+{start['import vlreg + plugins (s)'] - start['import nnsight + transformers (s)']:.2f} s)",
        f"build on meta ({results['build geometry']}): nnsight {start['build nnsight, meta (s)']:.2f} s, "
        f"vlreg {start['build vlreg, meta (s)']:.2f} s "
        f"(+{start['build vlreg, meta (s)'] - start['build nnsight, meta (s)']:.2f} s)",
    ]
    for name, found in results.get("large builds", {}).items():
        lines.append(
            f"build on meta ({name}): nnsight {found['nnsight build (s)']:.2f} s +{found['nnsight memory (MiB)']:.0f} MiB, "
            f"vlreg {found['vlreg build (s)']:.2f} s +{found['vlreg memory (MiB)']:.0f} MiB "
            f"(+{found['vlreg build (s)'] - found['nnsight build (s)']:.2f} s)"
        )
    for name, found in results.get("studies", {}).items():
        lines += [
            "",
            f"occlusion sweep over every image token ({name}): vlreg {found['occlusion, vlreg (tower once)']:.1f} s "
            f"(the tower once), {found['occlusion / floor']:.3f} x the floor; with the tower every batch "
            f"{found['occlusion, tower every batch']:.1f} s ({found['occlusion before / floor']:.3f} x); floor "
            f"(transformers: the tower once, then the text forwards) {found['occlusion, floor (transformers)']:.1f} s",
            f"cache everything ({name}): vlreg {found['everything, vlreg'] * 1000:.0f} ms, forward hooks "
            f"{found['everything, hooks'] * 1000:.0f} ms ({found['everything / hooks']:.3f} x)",
        ]
        memory = results.get("everything memory", {}).get(name)
        if memory:
            vlreg_mib, hooks_mib = (memory[r]["peak_added_bytes"] / 2**20 for r in ("vlreg", "transformers"))
            lines.append(f"  peak memory: vlreg +{vlreg_mib:.0f} MiB, hooks +{hooks_mib:.0f} MiB "
                         f"({vlreg_mib / hooks_mib:.3f} x)")
    if "demo" in results:
        found = results["demo"]
        where = "this process, a smoke run" if fresh.SMOKE else "a fresh process"
        lines += ["", f"make demo (vlreg demo --out, {where}, an empty cache): {found['wall (s)']:.1f} s "
                      f"({found['cpu (s)']:.1f} s of CPU), median of {found['runs']}"]
    for name, memory in results.get("memory", {}).items():
        mib = {runner: memory[runner]["peak_added_bytes"] / 2**20 for runner in memory}
        saved = memory["vlreg"]["saved_bytes"] / 2**20
        lines.append(
            f"peak memory, all blocks ({name}): transformers forward +{mib['transformers']:.0f} MiB; "
            f"raw nnsight +{mib['nnsight']:.0f} MiB; vlreg +{mib['vlreg']:.0f} MiB, against "
            f"transformers + saved values {mib['transformers'] + saved:.0f} MiB"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny geometry and a few rounds: checks the script works")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--out", default=None, help="where to write the JSON (default: benchmarks/results.json)")
    parser.add_argument("--device", default="cpu", help="where the models run (cuda when one is present)")
    parser.add_argument("--dtype", default="float32", help="the weights' dtype (bfloat16 on a GPU)")
    parser.add_argument("--sweep-batch", type=int, default=16, help="copies per occlusion batch")
    arguments = parser.parse_args(argv)
    global DEVICE, DTYPE
    DEVICE, DTYPE, fresh.SMOKE = arguments.device, getattr(torch, arguments.dtype), arguments.smoke
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        print(f"--device {DEVICE}: no CUDA device on this machine (torch {torch.__version__} sees none); "
              f"nothing was measured. Run on the CPU (the default), or on a machine with a GPU.")
        return 0
    warnings.simplefilter("ignore")
    from transformers.utils import logging

    logging.disable_progress_bar()
    smoke = arguments.smoke
    rounds = arguments.rounds or (2 if smoke else 9)
    names = ["tiny"] if smoke else ["qwen2-vl-2b", "llava-interleave"]
    results = {"machine": {"python": platform.python_version(), "torch": torch.__version__,
                           "threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(),
                           "device": DEVICE, "dtype": arguments.dtype},
               "rounds": rounds, "geometries": {}, "memory": {}, "studies": {}, "everything memory": {}}
    for name in names:
        try:
            path, origin = geometry(name, text_layers=4, tower_layers=4)
        except LookupError as missing:
            print(f"skipping {name}: {missing}")
            continue
        print(f"{name}: {origin}", flush=True)
        size = 56 if smoke else 448
        models = load(path)
        rows = compare(models, encoding(path, size), rounds, warmup=1 if smoke else 2)
        results["geometries"][name] = {"source": origin, "image": f"{size} x {size}", "workloads": rows}
        if name in ("tiny", "qwen2-vl-2b"):  # the floor is written for the Qwen2-VL wrapper
            print("  occlusion sweep and cache everything ...", flush=True)
            # the models are warm from the workloads
            results["studies"][name] = study(models, path, size, rounds, arguments.sweep_batch)
            results["everything memory"][name] = fresh.peak_memory(path, size, {
                "transformers": "sweeps.everything_hooks(model, inputs)",
                "vlreg": "sweeps.everything_vlreg(model, inputs)",
            })
        del models
        print("  peak memory ...", flush=True)
        results["memory"][name] = fresh.peak_memory(path, size)
    full, origin = geometry("tiny", 0, 0) if smoke else _full_geometry()
    results["build geometry"] = "tiny" if smoke else origin
    print("import and build times ...", flush=True)
    results["startup"] = fresh.startup(full, 1 if smoke else 5)
    print("make demo ...", flush=True)
    results["demo"] = fresh.demo(1 if smoke else 3)
    if not smoke:
        print("the largest geometries on meta ...", flush=True)
        results["large builds"] = fresh.large_builds(3)
    results["targets"] = TARGETS
    write(results, table(results), Path(arguments.out) if arguments.out else HERE / "results.json")
    return 0


def _full_geometry() -> tuple[Path, str]:
    """Qwen2-VL-2B-Instruct's full 28-layer config and processor (built on meta, never loaded)."""
    from vlreg.testing import shared_checkpoint

    source = shared_checkpoint("Qwen2-VL-2B-Instruct")
    if source is not None:
        return source, "Qwen2-VL-2B-Instruct, 28 + 32 layers"
    path, _ = geometry("qwen2-vl-2b", text_layers=28, tower_layers=32)
    return path, "Qwen2-VL-2B widths, 28 + 32 layers"


if __name__ == "__main__":
    sys.exit(main())
