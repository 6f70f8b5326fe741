"""How finely can a wall clock vouch for small calls? (issue 48, small kernels) In one process on a GPU, no judge:

    python benchmarks/experiments/batched_calls.py --out OUT/batched-calls.json

Two models of ``y = 2x + 1`` at several sizes: PyTorch's two kernels (the reference) and one kernel
(``torch.add(x, x, alpha=...)``'s cost, the "fused" side). Each is timed in rounds of N calls, each call on its own
inputs, two ways:

* ``per-call``: as the judge's runner times a call today (L2 flush, device sync, events around the call, sync, a
  second end event, sync, the output copied into its slot, sync), the wall clock around the whole round;
* ``batched``: one flush and sync, events around all N calls back to back (each output copied into its slot in the
  span), one sync, the wall clock around the round.

Per side, mode and N it prints the event time per call, the wall time per call, their difference (the overhead the
wall-clock check must see through) and that overhead's spread (interquartile range per call, and the standard error
of its median over the rounds). A wall clock resolves a gain of G us a call when the two sides' overheads differ by
less than G/2 and their standard errors are well below it.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0 + 1.0


def fused(x: torch.Tensor) -> torch.Tensor:
    return torch.add(x, x, alpha=1.0)  # one kernel of the same traffic


def per_call_round(fn, inputs, slots, flush) -> tuple[float, float]:
    """(event ms summed over the round's calls, wall ms of the round)."""
    start_wall = time.perf_counter()
    total = 0.0
    for x, slot in zip(inputs, slots, strict=True):
        flush.zero_()
        torch.cuda.synchronize()
        start, end, end_device = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        out = fn(x)
        end.record()
        torch.cuda.synchronize()
        end_device.record()
        torch.cuda.synchronize()
        slot.copy_(out)
        torch.cuda.synchronize()
        total += start.elapsed_time(end)
    return total, (time.perf_counter() - start_wall) * 1e3


def batched_round(fn, inputs, slots, flush) -> tuple[float, float]:
    start_wall = time.perf_counter()
    flush.zero_()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for x, slot in zip(inputs, slots, strict=True):
        slot.copy_(fn(x))
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end), (time.perf_counter() - start_wall) * 1e3


def summary(events: list[float], walls: list[float], calls: int) -> dict:
    over = [(w - e) / calls * 1e3 for e, w in zip(events, walls, strict=True)]  # us a call
    q1, _, q3 = statistics.quantiles(over, n=4)
    se = 1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(over))
    return {"event_us": round(statistics.median(events) / calls * 1e3, 3), "wall_us": round(statistics.median(walls) / calls * 1e3, 3),
            "overhead_us": round(statistics.median(over), 3), "overhead_iqr_us": round(q3 - q1, 3), "overhead_se_us": round(se, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sizes", default="4096,262144,1048576")
    parser.add_argument("--calls", default="16,64")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 50 * 2**20)
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for calls in (int(c) for c in args.calls.split(",")):
            for mode, round_fn in (("per-call", per_call_round), ("batched", batched_round)):
                data = {name: ([], []) for name in ("reference", "fused")}
                inputs = [torch.randn(size, device="cuda") for _ in range(calls)]
                slots = [torch.empty(size, device="cuda") for _ in range(calls)]
                for k in range(args.rounds + 3):  # three warm-up rounds, then sides in turns (ABBA)
                    order = ("reference", "fused") if k % 2 == 0 else ("fused", "reference")
                    for name in order:
                        for x in inputs:
                            x.normal_()
                        torch.cuda.synchronize()
                        event, wall = round_fn(reference if name == "reference" else fused, inputs, slots, flush)
                        if k >= 3:
                            data[name][0].append(event)
                            data[name][1].append(wall)
                row = {"size": size, "calls": calls, "mode": mode}
                for name, (events, walls) in data.items():
                    row[name] = summary(events, walls, calls)
                row["event_speedup"] = round(row["reference"]["event_us"] / row["fused"]["event_us"], 4)
                row["wall_speedup"] = round(row["reference"]["wall_us"] / row["fused"]["wall_us"], 4)
                print(json.dumps(row), flush=True)
                rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
