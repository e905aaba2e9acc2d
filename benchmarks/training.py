"""What `vlreg train` costs (``make bench``): training throughput in activations a second,
and memory against the store's size. Needs sae-lens (``pip install -e '.[train]'``).

* **Throughput**: the same sae-lens TopK training SAE and trainer, the same steps and batch,
  fed two ways: `vlreg.dictionaries.train` streaming a store's rows (shuffled blocks read
  from the mapped shards), and the floor, batches sliced from one shuffled tensor already
  in memory (what a user writes when the rows fit). Rounds interleaved after a warm-up;
  the ratio is the median of each round's floor time over vlreg's (above 1: vlreg faster).
* **Memory**: `train` in a fresh process on a store of one size and of four times it, the
  stream's buffer (``buffer_mib``) smaller than either, steps enough to read the larger
  store once: the peak anonymous memory the run adds (sampled; the mapped shards' pages
  are the page cache's, not the process's); and on the smaller store with a buffer of one
  batch, the trainer's own. The targets: the larger store adds no more than the smaller
  one and a buffer more (the stream holds a block, not the store), and what the stream
  adds over the trainer's own is at most 1.5 times the buffer.

    python benchmarks/training.py            # the full run (minutes)
    python benchmarks/training.py --smoke    # tiny sizes: checks the script
"""

from __future__ import annotations

import contextlib
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from workloads import smoke_or_full, write  # noqa: E402

TARGETS = {"train throughput / floor": 0.9, "memory, larger store over smaller (MiB)": 64.0, "stream / buffer": 1.5}
VALUE = "rows"
FULL = {"width": 1536, "rows": 65536, "features": 6144, "k": 32, "batch": 1024, "steps": 12, "rounds": 3,
        "memory rows": (43690, 174762), "memory features": 256, "buffer MiB": 64}   # 256 MiB and 1 GiB stores
SMOKE = {"width": 32, "rows": 2048, "features": 64, "k": 4, "batch": 64, "steps": 4, "rounds": 1,
         "memory rows": (1024, 4096), "memory features": 16, "buffer MiB": 0.1}


def random_store(folder: Path, rows: int, width: int, shards: int = 4) -> Path:
    """A store of standard-normal rows, written shard by shard as `collect` writes them."""
    from vlreg.collect import store

    store.write_manifest(folder, {"format": store.FORMAT, "values": [VALUE], "at": "image", "dtype": "float32",
                                  "model": {"path": "benchmark"}})
    generator = torch.Generator().manual_seed(0)
    for number, part in enumerate(torch.arange(rows).chunk(shards)):
        n = len(part)
        tensors = {VALUE: torch.randn(n, width, generator=generator), "__image__": torch.zeros(n, dtype=torch.int32),
                   "__token__": torch.arange(n), "__box__": torch.zeros(n, 4)}
        store.write_shard(folder / store.SHARDS, f"{number * 1000:010d}-bench", tensors,
                          {"images": [f"image{number}"], "prompts": ["p"], "prompt_texts": {"p": "bench"}})
    return folder


def floor(store, out: Path, size: dict) -> float:
    """Seconds the trainer takes on batches sliced from the store's rows held in memory."""
    import sae_lens

    from vlreg.dictionaries import training

    rows = store[VALUE][:].float()
    settings = training._settings(store, VALUE, None, "topk", size["width"], size["features"], size["k"], 1.0,
                                  size["steps"], size["batch"], 3e-4, 0, [store[VALUE]], "cpu")
    settings["lr_decay"] = 0.2
    sae = training._training_sae(sae_lens, settings, store)
    trainer = training._trainer(sae_lens, settings, sae, out, 0, False, 10**9)
    order = rows[torch.randperm(len(rows), generator=torch.Generator().manual_seed(0))]
    batches = (order[i % (len(order) // size["batch"]) * size["batch"]:][: size["batch"]] for i in range(10**9))
    trainer.data_provider = batches
    start = time.perf_counter()
    with training._quiet_bar(False):
        trainer.fit()
    return time.perf_counter() - start


def throughput(scratch: Path, size: dict) -> dict:
    from vlreg.collect import open_store
    from vlreg.dictionaries import train

    store = open_store(random_store(scratch / "store", size["rows"], size["width"]))
    options = {"architecture": "topk", "features": size["features"], "k": size["k"], "steps": size["steps"],
               "batch": size["batch"], "progress": False, "evaluate_rows": size["batch"]}

    def run_vlreg(n):   # the trainer's seconds, as the report's activations/s gives them (unrounded)
        return size["steps"] * size["batch"] / train(store, VALUE, scratch / f"vlreg{n}", **options).report["activations_per_second"]

    def run_floor(n):
        return floor(store, scratch / f"floor{n}", size)

    run_vlreg("warm"), run_floor("warm")
    times = [(run_vlreg(n), run_floor(n)) for n in range(size["rounds"])]
    activations = size["steps"] * size["batch"]
    return {"rows": size["rows"], "width": size["width"], "features": size["features"], "k": size["k"],
            "batch": size["batch"], "steps": size["steps"], "rounds": size["rounds"], "threads": torch.get_num_threads(),
            "vlreg activations/s": activations / statistics.median(t[0] for t in times),
            "floor activations/s": activations / statistics.median(t[1] for t in times),
            "train throughput / floor": statistics.median(t[1] / t[0] for t in times)}


MEMORY = """
import threading, time, warnings
warnings.simplefilter("ignore")
from vlreg.dictionaries import train

def anonymous():
    return int(next(l for l in open("/proc/self/status") if l.startswith("RssAnon")).split()[1]) * 1024

import sae_lens  # imported before the baseline: its modules are not the run's
before = anonymous()
peak, done = [0], []
def sample():
    while not done:
        peak[0] = max(peak[0], anonymous() - before)
        time.sleep(0.02)
watcher = threading.Thread(target=sample, daemon=True)
watcher.start()
train({store!r}, "rows", {out!r}, architecture="topk", features={features}, k=4, steps={steps}, batch={batch},
      buffer_mib={buffer}, progress=False, evaluate_rows={batch})
done.append(1)
watcher.join()
print(peak[0])
"""


def python(code: str, size: dict) -> str:
    """What ``code`` prints, run in a fresh process; in this one for a smoke run (its
    figures mean nothing, and a fresh process's imports take seconds)."""
    if size is SMOKE:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, {"__name__": "benchmark"})
        return printed.getvalue()
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def memory(scratch: Path, size: dict) -> dict:
    """The peak for each store size under the buffer, and for the smaller store under a
    buffer of a few rows (the trainer's own memory: what the stream adds is the rest)."""
    found = {}
    steps = -(-max(size["memory rows"]) // size["batch"])   # the larger store read once
    runs = [(size["memory rows"][0], size["batch"] * size["width"] * 4 / 2**20, "the trainer's own")]
    runs += [(rows, size["buffer MiB"], f"store of {rows} rows ({rows * size['width'] * 4 / 2**20:.1f} MiB)")
             for rows in size["memory rows"]]
    for rows, buffer, key in runs:
        folder = scratch / f"store{rows}"
        if not folder.exists():
            random_store(folder, rows, size["width"])
        code = MEMORY.format(store=str(folder), out=str(scratch / f"dictionary{len(found)}"),
                             features=size["memory features"], steps=steps, batch=size["batch"], buffer=buffer)
        found[key] = {"rows": rows, "steps": steps, "buffer (MiB)": buffer,
                      "peak anonymous memory added (MiB)": int(python(code, size).split()[-1]) / 2**20}
    own, small, large = (v["peak anonymous memory added (MiB)"] for v in found.values())
    found.update({"buffer (MiB)": size["buffer MiB"], "memory, larger store over smaller (MiB)": large - small,
                  "stream, larger store (MiB)": large - own, "stream / buffer": (large - own) / size["buffer MiB"]})
    return found


def report(results: dict) -> str:
    t, m = results["throughput"], results["memory"]
    lines = [f"train throughput (TopK, {t['features']} features of width {t['width']}, k {t['k']}, batch {t['batch']}, "
             f"{t['steps']} steps, {t['rounds']} rounds, {t['threads']} threads): vlreg "
             f"{t['vlreg activations/s']:.0f} activations/s, rows in memory {t['floor activations/s']:.0f} "
             f"activations/s ({t['train throughput / floor']:.3f} x)"]
    for key, found in m.items():
        if isinstance(found, dict):
            lines.append(f"memory, {key} ({found['steps']} steps, buffer {found['buffer (MiB)']:.2f} MiB): peak "
                         f"+{found['peak anonymous memory added (MiB)']:.0f} MiB anonymous")
    lines.append(f"memory, the larger store over the smaller: {m['memory, larger store over smaller (MiB)']:+.1f} MiB; "
                 f"the stream's on the larger, over the trainer's own: {m['stream, larger store (MiB)']:.0f} MiB "
                 f"({m['stream / buffer']:.2f} x the {m['buffer (MiB)']} MiB buffer)")
    return "\n".join(lines)


def main(argv=None) -> int:
    arguments = smoke_or_full(argv, __doc__, "training")
    size = SMOKE if arguments.smoke else FULL
    scratch = Path(tempfile.mkdtemp(prefix="vlreg-bench-train-"))
    try:
        print("throughput ...", flush=True)
        results = {"throughput": throughput(scratch, size)}
        print("memory ...", flush=True)
        results["memory"] = memory(scratch, size)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results["targets"] = TARGETS
    write(results, report(results), arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
