"""Attribution patching against exact patching, on the shipped toy (``make bench``).

For each held-out scene (`vlreg.testing.toy.scenes`), the clean run is the scene and the
corrupt run the same scene with the asked shape's colour swapped for another shape's
(`Scene.recoloured`). Exact patching (`analysis.patch_image` with ``per_token``) patches
each image token's block output, one token and one block at a time; attribution patching
(`analysis.attribution_patching`) estimates every one of those effects from one forward on
the corrupt scene and one forward and backward on the clean one. Per scene: the rank
correlation (Spearman) of the two over tokens x blocks, whether both put the largest effect
at the same token and block, whether each puts it at the asked shape's token, the model passes (batch rows) each
takes and their wall times (each the best of ``--repeats``, timed alternately). Writes
benchmarks/attribution.json and prints a summary.

    python benchmarks/attribution.py               # 20 scenes
    python benchmarks/attribution.py --scenes 3    # a quick check of the script
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Rank correlation of two tensors' elements (ties broken by position)."""
    ranks = [x.flatten().double().argsort().argsort().double() for x in (a, b)]
    ranks = [r - r.mean() for r in ranks]
    return float((ranks[0] * ranks[1]).sum() / (ranks[0].norm() * ranks[1].norm()))


def best(fn, repeats: int) -> tuple[float, object]:
    times, found = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        found = fn()
        times.append(time.perf_counter() - start)
    return min(times), found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "attribution.json"))
    arguments = parser.parse_args(argv)

    from vlreg import StandardizedTransformer, analysis
    from vlreg.demo import covering
    from vlreg.testing import toy

    model = StandardizedTransformer(str(toy.build()), task="image-text-to-text", dispatch=True,
                                    attn_implementation="eager", device="cpu")
    rows = []
    for scene in toy.scenes(arguments.scenes):
        other = next(colour for colour, _ in scene.shapes.values() if colour != scene.answer)
        corrupt = scene.recoloured(other)
        clean, swapped = [scene.image], [corrupt.image]
        exact_time = atp_time = float("inf")
        for _ in range(arguments.repeats):  # alternately, so the machine's drift falls on both
            seconds, exact = best(lambda: analysis.patch_image(model, scene.prompt, clean, swapped, per_token=True), 1)
            exact_time = min(exact_time, seconds)
            seconds, atp = best(lambda: analysis.attribution_patching(model, scene.prompt, clean, swapped), 1)
            atp_time = min(atp_time, seconds)
        estimated, measured = atp.of_image(0), exact.effects
        layers, tokens = measured.shape
        target = covering(exact.geometry[0], scene.target_box)
        rows.append({
            "spearman": spearman(estimated, measured),
            "same largest effect": int(estimated.abs().argmax()) == int(measured.abs().argmax()),
            "largest estimate at the asked shape": int(estimated.abs().argmax()) % tokens in target,
            "largest exact effect at the asked shape": int(measured.abs().argmax()) % tokens in target,
            "exact passes": layers * tokens + 2,  # a forward per token and block, the source and the clean run
            "attribution passes": 3,  # the corrupt forward, the clean forward and its backward
            "exact (s)": exact_time,
            "attribution (s)": atp_time,
        })
        print(f"... scene {len(rows)}: spearman {rows[-1]['spearman']:.3f}", file=sys.stderr, flush=True)
    spearmans = [row["spearman"] for row in rows]
    speedups = [row["exact (s)"] / row["attribution (s)"] for row in rows]
    summary = {
        "model": "the shipped toy (vlreg.testing.toy): Qwen2-VL, 3 blocks, 36 image tokens",
        "scenes": len(rows),
        "spearman, median": statistics.median(spearmans),
        "spearman, lowest": min(spearmans),
        "same largest effect (share)": sum(row["same largest effect"] for row in rows) / len(rows),
        "largest estimate at the asked shape (share)": sum(row["largest estimate at the asked shape"]
                                                           for row in rows) / len(rows),
        "largest exact effect at the asked shape (share)": sum(row["largest exact effect at the asked shape"]
                                                               for row in rows) / len(rows),
        "exact passes": rows[0]["exact passes"],
        "attribution passes": rows[0]["attribution passes"],
        "exact (s), median": statistics.median(row["exact (s)"] for row in rows),
        "attribution (s), median": statistics.median(row["attribution (s)"] for row in rows),
        "speed-up (wall time), median": statistics.median(speedups),
        "machine": f"{platform.machine()}, 1 thread, torch {torch.__version__}",
    }
    Path(arguments.out).write_text(json.dumps({"summary": summary, "scenes": rows}, indent=2))
    for key, value in summary.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # the figures are one thread's (here, not in main: a test calls main)
    sys.exit(main())
