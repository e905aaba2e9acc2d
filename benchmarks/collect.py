"""What `vlreg collect` costs (``make bench``): throughput against a hand-written loop,
memory against the number of images, and the time to open a large store.

* **Throughput**: one block's ``layer_output`` at the image tokens of a folder of images,
  written to shards, two ways at the same batch size: `vlreg.collect` (standard names,
  one trace a batch, stopped after the block, atomic shards with the index and boxes)
  and plain transformers with a forward hook on the block that keeps the image tokens'
  rows and stops the forward there (raising out of the hook), writing the rows and an
  image/token index to safetensors shards. Rounds interleaved; the ratio is the median
  of each round's hooks time over vlreg's (above 1: vlreg is faster).
* **Memory**: the tiny checkpoint's logits at every position (77 KB of rows an image) for
  200 and for 1000 images, each in a fresh process, shards of 100 images: the resident
  memory the run adds at its peak, and sampled as it goes (about nine samples); the
  target is that it does not grow over the last half of the 1000 images by more than
  one shard's rows.
* **Opening a store**: a store of 2 GiB of rows in 8 shards, opened in a fresh process:
  seconds to `open_store` and index one row, and the resident memory that adds.

    python benchmarks/collect.py            # the full run (about 10 minutes here)
    python benchmarks/collect.py --smoke    # tiny sizes: checks the script
"""

from __future__ import annotations

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
from workloads import geometry, smoke_or_full, write  # noqa: E402

TARGETS = {"collect throughput / hooks": 0.95, "memory growth over the last half (MiB)": 8.0, "open store (s)": 1.0}
#: The growth target is one shard of the memory run's rows (100 images x 60 positions x 320 logits x 4 bytes,
#: 7.7 MB): resident memory may hold one shard, and must not grow with the images after it.
QUESTION = "What is in this image?"


def images(folder: Path, count: int, size: int) -> Path:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    for index in range(count):
        pixels = (torch.rand(size, size, 3, generator=generator) * 255).byte().numpy()
        Image.fromarray(pixels).save(folder / f"image{index:05d}.png")
    return folder


def prompt_of(processor) -> str:
    content = [{"type": "image"}, {"type": "text", "text": QUESTION}]
    return processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                         tokenize=False)


class Stop(Exception):
    pass


def hooks_loop(module, processor, folder: Path, out: Path, block: int, batch: int, shard: int) -> None:
    """The hand-written loop: what a user writes without vlreg, with an early stop."""
    from PIL import Image
    from safetensors.torch import save_file

    prompt = prompt_of(processor)
    image_token = module.config.image_token_id
    kept: list = []

    def keep(_module, _args, output):
        kept.append((output[0] if isinstance(output, tuple) else output)[mask].clone())
        raise Stop

    layer = module.model.language_model.layers[block]
    handle = layer.register_forward_hook(keep)
    files = sorted(folder.glob("*.png"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        for first in range(0, len(files), shard):
            rows, image_ids, tokens = [], [], []
            for start in range(first, min(first + shard, len(files)), batch):
                chunk = files[start : start + batch]
                pictures = [Image.open(path).convert("RGB") for path in chunk]
                inputs = processor(text=[prompt] * len(chunk), images=[[p] for p in pictures], padding=True,
                                   return_tensors="pt")
                mask = inputs["input_ids"] == image_token
                kept.clear()
                try:
                    with torch.no_grad():
                        module(**inputs)
                except Stop:
                    pass
                rows.append(kept[0])
                counts = mask.sum(-1)
                image_ids.append(torch.repeat_interleave(torch.arange(start, start + len(chunk)), counts))
                tokens.append(torch.cat([torch.arange(int(c)) for c in counts]))
            save_file({"rows": torch.cat(rows), "image": torch.cat(image_ids), "token": torch.cat(tokens)},
                      str(out / f"{first:010d}.safetensors"))
    finally:
        handle.remove()


def throughput(path: Path, count: int, size: int, batch: int, rounds: int, block: int) -> dict:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vlreg import StandardizedTransformer
    from vlreg.collect import collect

    scratch = Path(tempfile.mkdtemp(prefix="vlreg-bench-collect-"))
    try:
        folder = images(scratch / "images", count, size)
        options = {"attn_implementation": "eager", "dtype": torch.float32}
        module = AutoModelForImageTextToText.from_pretrained(path, device_map="cpu", **options).eval()
        processor = AutoProcessor.from_pretrained(path)
        model = StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True, device="cpu", **options)
        value = f"layers[{block}].layer_output"
        shard = count  # one shard a run, as the default's ~256 MiB would be here

        def run_vlreg(n):
            collect(model, [value], folder, scratch / f"vlreg{n}", prompt=QUESTION, batch=batch,
                    shard_images=shard, progress=False)

        def run_hooks(n):
            hooks_loop(module, processor, folder, scratch / f"hooks{n}", block, batch, shard)

        run_vlreg("warm"), run_hooks("warm")
        times = []
        for n in range(rounds):
            found = []
            for run in (run_vlreg, run_hooks):
                start = time.perf_counter()
                run(n)
                found.append(time.perf_counter() - start)
            times.append(found)
        return {
            "images": count, "image": f"{size} x {size}", "batch": batch, "value": value, "rounds": rounds,
            "vlreg (s)": statistics.median(t[0] for t in times),
            "hooks (s)": statistics.median(t[1] for t in times),
            "vlreg images/s": count / statistics.median(t[0] for t in times),
            "hooks images/s": count / statistics.median(t[1] for t in times),
            "collect throughput / hooks": statistics.median(t[1] / t[0] for t in times),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


MEMORY = """
import sys, threading, time, warnings
warnings.simplefilter("ignore")
from vlreg import StandardizedTransformer
from vlreg.collect import collect

def status(field):
    return int(next(l for l in open("/proc/self/status") if l.startswith(field)).split()[1]) * 1024

model = StandardizedTransformer({path!r}, task="image-text-to-text", dispatch=True, device="cpu")
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
samples, done = [], []
def sample():
    while not done:
        samples.append(status("VmRSS") - before)
        time.sleep(0.05)
watcher = threading.Thread(target=sample, daemon=True)
watcher.start()
collect(model, ["logits"], {folder!r}, {out!r}, prompt={question!r}, at="all", batch=8, shard_images=100,
        progress=False)
done.append(1)
watcher.join()
print(status("VmHWM") - before, *samples[:: max(1, len(samples) // 8)], samples[-1])
"""


def memory(path: Path, counts: tuple, size: int) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="vlreg-bench-memory-"))
    try:
        folder = images(scratch / "images", max(counts), size)
        found = {}
        for count in counts:
            subset = scratch / f"images{count}"
            subset.mkdir()
            for file in sorted(folder.glob("*.png"))[:count]:
                (subset / file.name).symlink_to(file)
            code = MEMORY.format(path=str(path), folder=str(subset), out=str(scratch / f"store{count}"),
                                 question=QUESTION)
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            peak, *samples = map(int, done.stdout.split())
            found[f"{count} images"] = {"peak added (MiB)": peak / 2**20,
                                        "resident added as it runs (MiB)": [s / 2**20 for s in samples]}
        low, high = (found[f"{count} images"]["peak added (MiB)"] for count in counts)
        found["memory, most / fewest images"] = high / low
        samples = found[f"{max(counts)} images"]["resident added as it runs (MiB)"]
        found["memory growth over the last half (MiB)"] = samples[-1] - samples[len(samples) // 2]
        return found
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


OPEN = """
import time
def status(field):
    return int(next(l for l in open("/proc/self/status") if l.startswith(field)).split()[1]) * 1024
import torch
from vlreg.collect import open_store
before = status("VmRSS")
start = time.perf_counter()
store = open_store({out!r})
row = store["rows"][len(store) // 2]
record = store.index[len(store) // 2] if {index} else None
print(time.perf_counter() - start, status("VmRSS") - before, len(store))
"""


def open_large(gib: float, shards: int) -> dict:
    """A store written shard by shard as `collect` writes them (random rows), then opened."""
    from vlreg.collect import store

    scratch = Path(tempfile.mkdtemp(prefix="vlreg-bench-open-"))
    try:
        width = 2048
        rows = int(gib * 2**30 / shards / (width * 4))
        store.write_manifest(scratch, {"format": store.FORMAT, "values": ["rows"], "at": "image", "dtype": "float32"})
        for number in range(shards):
            tensors = {"rows": torch.randn(rows, width), "__image__": torch.zeros(rows, dtype=torch.int32),
                       "__token__": torch.arange(rows), "__box__": torch.zeros(rows, 4)}
            store.write_shard(scratch / store.SHARDS, f"{number * 1000:010d}-bench", tensors,
                              {"images": [f"image{number}"], "prompts": ["p"], "prompt_texts": {"p": "bench"}})
            del tensors
        found = {}
        for label, index in (("open, one row", False), ("open, one row and the index", True)):
            done = subprocess.run([sys.executable, "-c", OPEN.format(out=str(scratch), index=index)],
                                  capture_output=True, text=True, check=True)
            seconds, resident, total = done.stdout.split()
            found[label] = {"s": float(seconds), "resident added (MiB)": int(resident) / 2**20}
        found.update({"store (GiB)": gib, "shards": shards, "rows": int(total), "open store (s)": found["open, one row"]["s"]})
        return found
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(results: dict) -> str:
    t, m, o = results["throughput"], results["memory"], results["open"]
    lines = [
        f"collect throughput ({t['source']}, {t['images']} images {t['image']}, batch {t['batch']}, {t['value']} at "
        f"the image tokens, {t['rounds']} rounds): vlreg {t['vlreg images/s']:.2f} images/s, hooks "
        f"{t['hooks images/s']:.2f} images/s ({t['collect throughput / hooks']:.3f} x)",
    ]
    for key, found in m.items():
        if isinstance(found, dict):
            lines.append(f"memory, {key}: peak +{found['peak added (MiB)']:.0f} MiB; as it runs "
                         + ", ".join(f"+{s:.0f}" for s in found["resident added as it runs (MiB)"]) + " MiB")
    lines.append(f"memory, most / fewest images: {m['memory, most / fewest images']:.3f} x the peak; growth over "
                 f"the last half of the largest run +{m['memory growth over the last half (MiB)']:.1f} MiB")
    lines.append(f"open a {o['store (GiB)']} GiB store of {o['shards']} shards ({o['rows']} rows): "
                 f"{o['open, one row']['s'] * 1000:.0f} ms and +{o['open, one row']['resident added (MiB)']:.0f} MiB "
                 f"with one row read; with the index too {o['open, one row and the index']['s'] * 1000:.0f} ms, "
                 f"+{o['open, one row and the index']['resident added (MiB)']:.0f} MiB")
    return "\n".join(lines)


def main(argv=None) -> int:
    arguments = smoke_or_full(argv, __doc__, "collect")
    from transformers.utils import logging

    logging.disable_progress_bar()
    smoke = arguments.smoke
    if smoke:
        path, source = geometry("tiny", 0, 0)
    else:
        path, source = geometry("qwen2-vl-2b", text_layers=4, tower_layers=4)
    print(f"throughput: {source} ...", flush=True)
    results = {"throughput": {"source": source, **throughput(path, 4 if smoke else 32, 56 if smoke else 224,
                                                                 2 if smoke else 8, 1 if smoke else 5,
                                                                 block=1 if smoke else 2)}}
    tiny, _ = geometry("tiny", 0, 0)
    print("memory ...", flush=True)
    results["memory"] = memory(tiny, (10, 20) if smoke else (200, 1000), 56)
    print("open a large store ...", flush=True)
    results["open"] = open_large(0.01 if smoke else 2.0, 2 if smoke else 8)
    results["targets"] = TARGETS
    write(results, report(results), arguments.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
