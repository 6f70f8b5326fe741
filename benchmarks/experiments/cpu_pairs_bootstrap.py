"""What the judge's process-pair rule makes of measured pairs: a bootstrap over CPU self-timing runs.

    python benchmarks/experiments/cpu_pairs_bootstrap.py docs/data/cpu-timing-host16-2026-11-27-session15-{thp,threads,reps}.jsonl

Reads ``cpu_timing_under_builds.py`` lines whose evaluations were timed in forced pairs (``--process-pairs 2``) at
16 threads a side (arms ``base``, ``thp``, ``16``, ``50:2``, ``150:3``), pools each problem's pairs, and draws
evaluations from them: the first pair, then more while a rule asks (each draw independent, which the measured pairs
are: docs/history/performance-log.md, "fifteenth session"). For each rule, the share of results within +-5%, outside and flagged
noisy, outside and not flagged, and the pairs a result cost; every pair's noisy flag is set as the judge sets it now.
``--scale F`` multiplies every pair by F (a candidate truly F times as fast).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_kernelbench.judge.stats import PairTiming, _apart, _outside, another_pair, combine_pairs, noisy_interval  # noqa: E402

SIXTEEN_THREAD_ARMS = {"base", "thp", "16", "50:2", "150:3"}


def fourteenth_session_rule(pairs: list[PairTiming]) -> bool:
    """The rule before 0e9055c: a second pair where the first is outside +-5% and not noisy, a third only where the
    two disagree."""
    if len(pairs) == 1:
        return not pairs[0].noisy and _outside(pairs[0].speedup)
    return len(pairs) < 3 and _apart(pairs) and not combine_pairs(pairs).noisy


RULES: dict[str, Callable[[list[PairTiming]], bool]] = {
    "one pair": lambda pairs: False,
    "always two": lambda pairs: len(pairs) < 2,
    "fourteenth session": fourteenth_session_rule,
    "the judge's (another_pair)": lambda pairs: another_pair(pairs, 0, "cpu"),
}


def load(paths: list[str], recorded_flags: bool = False) -> dict[str, list[PairTiming]]:
    pool: dict[str, list[PairTiming]] = defaultdict(list)
    for path in paths:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            if str(row.get("arm")) not in SIXTEEN_THREAD_ARMS:
                continue
            for problem, pairs in row["process_pairs"].items():
                for p in pairs:
                    lo, hi = p["interval"][0] or 0.0, math.inf if p["interval"][1] is None else p["interval"][1]
                    noisy = p["noisy"] if recorded_flags else noisy_interval(p["speedup"], lo, hi)
                    pool[problem].append(PairTiming(p["speedup"], lo, hi, noisy, p["capped"]))
    return pool


def scaled(t: PairTiming, f: float) -> PairTiming:
    """``t`` for a candidate ``f`` times as fast (its flag set again, as the judge would)."""
    if f == 1.0:
        return t
    lo, speedup, hi = t.lo * f, t.speedup * f, t.hi * f
    return PairTiming(speedup, lo, hi, noisy_interval(speedup, lo, hi), t.capped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--draws", type=int, default=3000, help="evaluations drawn per problem")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--recorded-flags", action="store_true", help="each pair's noisy flag as its run recorded it")
    args = ap.parse_args()
    pool = load(args.files, args.recorded_flags)
    print(f"{sum(map(len, pool.values()))} pairs of {len(pool)} problems; scale {args.scale}")
    for name, rule in RULES.items():
        rng = random.Random(args.seed)
        within = flagged = unflagged = pairs_used = 0
        for _ in range(args.draws):
            for problem in sorted(pool):
                pairs = [scaled(rng.choice(pool[problem]), args.scale)]
                while rule(pairs):
                    pairs.append(scaled(rng.choice(pool[problem]), args.scale))
                result = combine_pairs(pairs)
                pairs_used += len(pairs)
                if abs(result.speedup / args.scale - 1) <= 0.05:
                    within += 1
                elif result.noisy:
                    flagged += 1
                else:
                    unflagged += 1
        n = args.draws * len(pool)
        print(f"{name:28s} within +-5% {within / n:6.1%}  outside, noisy {flagged / n:5.1%}  outside, not noisy "
              f"{unflagged / n:5.1%}  pairs a result {pairs_used / n:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
