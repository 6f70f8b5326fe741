"""What a shorter ``max_time`` would have printed: a throughput run's own samples, cut short.

Reads a ``benchmarks/throughput.py --samples`` JSON and, for every candidate whose timing ran to ``max_time``, compares
the event speedup and its 95% interval (``stats.speedup_interval``) from all its rounds with those from the first
``--share`` of them (the rounds come at a steady pace, so a share of the rounds is about that share of the time), and
the `time.batch` seconds the cut would have saved. The wall-clock cap is not replayed (the samples are the claims).

    python benchmarks/max_time_from_samples.py docs/data/pike-h200-2026-11-30-ffa8249.json --share 0.5
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from pytest_kernelbench.judge.stats import speedup_interval


def event_speedup(ref: list[float], new: list[float]) -> tuple[float, float, float, bool]:
    speedup = statistics.median(ref) / statistics.median(new)
    return (speedup, *speedup_interval(ref, new, speedup))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a throughput.py JSON written with --samples")
    parser.add_argument("--share", type=float, default=0.5, help="the share of each timing's rounds kept")
    args = parser.parse_args()
    results = [r for phase in json.loads(args.report.read_text())["phases"] for r in phase["results"]]
    shifts, batch, noisy = [], 0.0, [0, 0]
    print("| candidate | rounds | full | interval | cut | interval | shift |\n| --- | ---: | ---: | --- | ---: | --- | ---: |")
    for r in results:
        samples = r.get("samples") or {}
        if (r.get("timing") or {}).get("stop") != "max_time" or not samples.get("ref"):
            continue
        ref, new = samples["ref"], samples["new"]
        kept = max(4, int(len(ref) * args.share))
        full, cut = event_speedup(ref, new), event_speedup(ref[:kept], new[:kept])
        shift = cut[0] / full[0] - 1
        shifts.append(abs(shift))
        batch += (r.get("split_s") or {}).get("time.batch", 0.0)
        noisy = [noisy[0] + full[3], noisy[1] + cut[3]]
        print(f"| {r['candidate']} | {len(ref)} | {full[0]:.3f} | {full[1]:.3f}-{full[2]:.3f} | {cut[0]:.3f} | "
              f"{cut[1]:.3f}-{cut[2]:.3f} | {shift:+.1%} |")
    if not shifts:
        raise SystemExit(f"{args.report}: no timing ran to max_time with samples (run throughput.py with --samples)")
    print(f"\n{len(shifts)} timings at max_time; kept {args.share:.0%} of their rounds: {sum(s <= 0.01 for s in shifts)} "
          f"within 1% of the full speedup, {sum(s <= 0.02 for s in shifts)} within 2%, the largest shift {max(shifts):.1%}; "
          f"noisy {noisy[0]} -> {noisy[1]}; their time.batch {batch:.1f} s, about {batch * (1 - args.share):.1f} s saved")


if __name__ == "__main__":
    main()
