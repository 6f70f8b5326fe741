"""What the judge's GPU near-parity pair rule makes of recorded one-pair runs: a bootstrap over H100 self-judgments.

    python3 benchmarks/experiments/gpu_pairs_bootstrap.py \
        --rows docs/data/timing-fidelity-h100-2026-11-27-session16.jsonl docs/data/timing-fidelity-h100-2026-11-27-session17-pairs2.jsonl \
        --candidates docs/data/throughput-2026-11-27-session16.jsonl

Pools each level-1 problem's recorded pairs of runners (a fidelity row's samples, or each pair of a row timed in several)
and draws resampled runs of all of them: a first pair at random, then more, without replacement, while
``stats.another_pair`` asks (as the judge does on a GPU), the result ``stats.combine_pairs``'s. Prints how many of the
problems land within +-2% for the rule and for one pair, and how many more pairs the rule took. ``--candidates``: the
share of recorded candidates (throughput lines with samples, one pair each) whose first pair the rule would time again.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_kernelbench.judge.stats import PROCESS_SD, PairTiming, another_pair, combine_pairs, speedup_interval  # noqa: E402

BAND = math.log(1.02)
SD = PROCESS_SD["cuda"]


def timed(samples: dict) -> PairTiming:
    """One pair of runners' timing from both sides' samples, as the supervisor's add_pair makes it."""
    speedup = statistics.median(samples["ref"]) / statistics.median(samples["new"])
    return PairTiming(speedup, *speedup_interval(samples["ref"], samples["new"], speedup), False)


def pooled(paths: list[Path]) -> dict[str, list[PairTiming]]:
    pool: dict[str, list[PairTiming]] = collections.defaultdict(list)
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            for pair in row.get("pairs") or []:  # a row timed in several pairs: each pair's own figures
                if pair.get("interval") and None not in pair["interval"]:
                    pool[row["problem"]].append(PairTiming(pair["speedup"], *pair["interval"], pair["noisy"], pair["capped"]))
            if not row.get("pairs") and (row.get("samples") or {}).get("ref"):
                pool[row["problem"]].append(timed(row["samples"]))
    return pool


def resample(pool: dict[str, list[PairTiming]], rng: random.Random) -> tuple[int, int, int]:
    """One resampled run: (within +-2% with the rule, within with one pair, pairs added)."""
    within = first_within = added = 0
    for draws in pool.values():
        order = rng.sample(draws, len(draws))
        pairs = order[:1]
        while len(pairs) < len(order) and another_pair(pairs, 0, "cuda", SD):
            pairs.append(order[len(pairs)])
        within += abs(math.log(combine_pairs(pairs, SD).speedup)) <= BAND
        first_within += abs(math.log(pairs[0].speedup)) <= BAND
        added += len(pairs) - 1
    return within, first_within, added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, nargs="+", required=True, help="fidelity JSON-lines files (docs/data)")
    parser.add_argument("--candidates", type=Path, nargs="*", default=[], help="throughput JSON-lines files with samples")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for path in [*args.rows, *args.candidates]:
        if not path.is_file():
            sys.exit(f"no rows file {path}: pass files from docs/data")
    pool = pooled(args.rows)
    rng = random.Random(args.seed)
    runs = [resample(pool, rng) for _ in range(args.runs)]
    n = len(pool)
    for name, k in (("the rule", 0), ("one pair", 1)):
        counts = collections.Counter(run[k] for run in runs)
        print(f"{name}: {statistics.mean(run[k] for run in runs):.2f} of {n} within +-2% on average; "
              f"all {n} in {counts[n] / len(runs):.0%} of {len(runs)} runs; fewest {min(counts)}")
    print(f"pairs added by the rule: {statistics.mean(run[2] for run in runs):.1f} per run of {n}")
    firsts = [timed(j["samples"]) for path in args.candidates for line in path.read_text().splitlines()
              if (j := json.loads(line).get("judged") or {}).get("samples") and j.get("pairs", 1) <= 1]  # fmt: skip
    if firsts:
        again = [t.speedup for t in firsts if another_pair([t], 0, "cuda", SD)]
        print(f"candidates timed again: {len(again)} of {len(firsts)} (speedups {min(again, default=0):.3f}-{max(again, default=0):.3f})")


if __name__ == "__main__":
    main()
