"""Aggregate figures over many results: outcome counts, fast_p, geometric-mean speedup, the speed of light's median share.

fast_p (KernelBench): the fraction of *all* judged problems whose candidate is
correct and faster than ``p`` times the reference; fast_0 is the correct fraction.
A noisy speedup (the judge's ``speedup_noisy``: its 95% interval reaches 1.0 or is too wide to
mean anything, :func:`pytest_kernelbench.judge.stats.speedup_interval`) counts as faster than ``p``
only when its whole interval is (:func:`~pytest_kernelbench.result.claimable_speedup`; an op suite's
perf@p counts the same way).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..outcome import Outcome
from ..result import EvalResult, claimable_speedup, is_noisy
from ..suites.scores import suite_scores

FAST_P = (0.0, 1.0, 1.5, 2.0)
__all__ = ["FAST_P", "fast_p", "geomean_speedup", "is_noisy", "summarize"]


def fast_p(results: list[EvalResult], p: float) -> float:
    if not results:
        return 0.0
    return sum(1 for r in results if r.correct and claimable_speedup(r) > p) / len(results)


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
        "suspect_constant_output": sorted(r.problem for r in results if r.extra.suspect_constant_output),
        "noisy_speedup": sorted(r.problem for r in results if is_noisy(r)),
        "mean_reward": _mean([r.reward for r in results if r.reward is not None]),
        **_speed_of_light(results),
        **_op_scores(results),
    }


def _speed_of_light(results: list[EvalResult]) -> dict[str, Any]:
    """The median share of the speed of light (judge/sol.py) over the correct GPU results that carry one, under
    ``speed_of_light``; nothing where none does."""
    shares = [r.extra.speed_of_light["share"] for r in results if r.correct and "share" in (r.extra.speed_of_light or {})]
    if not shares:
        return {}
    return {"speed_of_light": {"median_share": round(statistics.median(shares), 4), "results": len(shares)}}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _op_scores(results: list[EvalResult]) -> dict[str, Any]:
    """BackendBench's scores of a ``--suite`` run (:mod:`pytest_kernelbench.suites.scores`), under ``op_suite``."""
    scores = suite_scores(results)
    return {"op_suite": scores} if scores else {}


def claimed_speedup(result: Any) -> float | None:
    """What the runners' own timings said (``reference / candidate`` of their medians), where the judge printed less:
    the supervisor's clock vouched for less than the claim (``speedup_capped``); else None."""
    extra = getattr(result, "extra", None)
    if not getattr(extra, "speedup_capped", None):
        return None
    claim = (getattr(extra, "wall_check", None) or {}).get("event_speedup")
    return float(claim) if isinstance(claim, (int, float)) else None


def capped_mark(result: Any, digits: int = 3) -> str:
    """`` capped (claimed 1.870x)`` after a printed speedup that is the clock's bound (``digits`` as the speedup is
    printed); else '' (tables, short lines)."""
    claim = claimed_speedup(result)
    return "" if claim is None or getattr(result, "speedup", None) is None else f" capped (claimed {claim:.{digits}f}x)"


def capped_note(result: Any) -> str:
    """`` (capped: the runners' timings say 1.87x, the supervisor's clock vouches for 1.00x)`` where the printed speedup
    is the clock's bound rather than the claim; else ''. Every human output of a speedup adds it."""
    claim = claimed_speedup(result)
    if claim is None or result.speedup is None:
        return ""
    return f" (capped: the runners' timings say {claim:.3f}x, the supervisor's clock vouches for {result.speedup:.3f}x)"
