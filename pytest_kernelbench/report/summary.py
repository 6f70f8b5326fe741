"""Aggregate figures over many results: outcome counts, fast_p, geometric-mean speedup.

fast_p (KernelBench): the fraction of *all* judged problems whose candidate is
correct and faster than ``p`` times the reference; fast_0 is the correct fraction.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..outcome import Outcome
from ..result import EvalResult

FAST_P = (0.0, 1.0, 1.5, 2.0)


def fast_p(results: list[EvalResult], p: float) -> float:
    if not results:
        return 0.0
    return sum(1 for r in results if r.correct and (r.speedup or 0.0) > p) / len(results)


def geomean_speedup(results: Iterable[EvalResult]) -> float | None:
    speedups = [r.speedup for r in results if r.correct and r.speedup and r.speedup > 0 and math.isfinite(r.speedup)]
    if not speedups:
        return None
    return math.exp(sum(math.log(s) for s in speedups) / len(speedups))


def summarize(results: list[EvalResult]) -> dict[str, Any]:
    counts = Counter(r.outcome.value for r in results)
    return {
        "total": len(results),
        "outcomes": {o.value: counts.get(o.value, 0) for o in Outcome},
        "fast_p": {f"fast_{p:g}": fast_p(results, p) for p in FAST_P},
        "geomean_speedup": geomean_speedup(results),
        "suspect_constant_output": sorted(r.problem for r in results if r.extra.get("suspect_constant_output")),
        "mean_reward": _mean([r.reward for r in results if r.reward is not None]),
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
