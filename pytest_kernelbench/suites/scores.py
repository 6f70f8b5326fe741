"""BackendBench's scores over the judged ops of a suite run (from results: the trusted side computes them).

- correctness score: the fraction of ops whose correctness samples all pass;
- performance score: the geometric mean over ops of each op's performance (the geometric mean of its
  performance samples' speedups over ATen, a failed sample or op counting 1.0);
- perf@p: the fraction of ops that are correct and whose performance is above ``p``, counted as fast_p counts:
  a noisy sample's gain only as far as its interval goes (the op's ``claimable_performance``, :mod:`.run`).

Ops without an implementation are not judged and not counted, as in BackendBench.
"""

from __future__ import annotations

import math
from typing import Any

from ..result import EvalResult

KEY = "op_suite"  # the EvalResult.extra field written by :mod:`.run` (its name in JSON reports)
PERF_P = (1.0, 1.5, 2.0)


def op_entries(results: list[EvalResult]) -> list[dict[str, Any]]:
    return [r.extra.op_suite for r in results if isinstance(r.extra.op_suite, dict)]


def _performance(entry: dict[str, Any], key: str = "performance") -> float:
    value = entry.get(key, entry.get("performance"))
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else 1.0


def scores(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The scores of op entries (``extra["op_suite"]`` of each op's result); None without any."""
    if not entries:
        return None
    correct = [bool(e.get("correct")) for e in entries]
    perf = [_performance(e) for e in entries]
    claims = [_performance(e, "claimable_performance") for e in entries]
    n = len(entries)
    return {
        "suite": sorted({str(e.get("suite", "")) for e in entries}),
        "ops": n,
        "correct_ops": sum(correct),
        "correctness_score": sum(correct) / n,
        "performance_score": math.exp(sum(math.log(p) for p in perf) / n),
        "perf_at_p": {f"perf@{p:g}": sum(1 for c, s in zip(correct, claims, strict=True) if c and s > p) / n for p in PERF_P},
    }


def suite_scores(results: list[EvalResult]) -> dict[str, Any] | None:
    return scores(op_entries(results))
