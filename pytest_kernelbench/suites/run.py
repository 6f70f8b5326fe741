"""One op's item: a correctness evaluation of all its correctness samples, then one timed evaluation per
performance sample, combined into one :class:`EvalResult` whose ``extra.op_suite`` the scores read.

As BackendBench does: the op is correct when every correctness sample passes; its performance is the
geometric mean over its performance samples of the speedup over ATen, a sample that fails counting 1.0.
Its claimable performance, which perf@p counts as fast_p counts speedups, is the same mean with a noisy
sample's speedup taken at its interval's low end (:func:`~pytest_kernelbench.result.claimable_speedup`).
An op whose correctness samples fail is not timed (its performance is 1.0). The item itself fails when
any evaluation fails, a performance sample's included.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

from ..candidates import Candidate
from ..extra import Extra
from ..problems import Problem
from ..result import EvalResult, claimable_speedup, is_noisy
from .backend_dir import Implementation
from .base import OpSample, OpTask
from .codegen import candidate_source, problem_source

# (problem, candidate, timed): the judge's result; ``timed`` False for the correctness evaluation, whose
# timing phase is of no use (the caller may shorten it).
Judge = Callable[[Problem, Candidate, bool], EvalResult]
_SHOWN = 12  # samples listed in a failure message


def evaluation_pairs(task: OpTask, suite: str, index: int, impl: Implementation) -> list[tuple[Problem, Candidate]]:
    """The (problem, candidate) of the correctness samples, then one per performance sample."""
    groups = [("correctness", list(task.correctness))] + [(f"performance sample {i}", [s]) for i, s in enumerate(task.performance)]
    candidate = Candidate(candidate_source(impl, [samples for _, samples in groups]), impl.path, impl.label)
    pairs = []
    for k, (title, samples) in enumerate(groups):
        name = f"{task.name}-{'correctness' if k == 0 else f'perf{k - 1}'}"
        pairs.append((Problem(suite, index, name, problem_source(task.op, samples, title, k), f"{suite} suite"), candidate))
    return pairs


def evaluate_op(task: OpTask, suite: str, index: int, impl: Implementation, judge: Judge) -> EvalResult:
    pairs = evaluation_pairs(task, suite, index, impl)
    first = judge(*pairs[0], False)
    timed = [judge(problem, candidate, True) for problem, candidate in pairs[1:]] if first.correct else []
    return combine(task, suite, index, impl, first, timed)


def sample_speedup(result: EvalResult) -> float:
    """A performance sample's speedup; 1.0 for a failed one (BackendBench's rule), or one without a finite speedup."""
    speedup = result.speedup
    if not result.correct or speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return 1.0
    return speedup


_SPEEDUP_FACTS = frozenset(f.name for f in dataclasses.fields(Extra) if "speedup" in f.name)  # one timing's facts


def sample_claim(result: EvalResult) -> float:
    """What a performance sample's speedup may claim: 1.0 for a failed one, as :func:`sample_speedup`; a noisy one's
    interval's low end."""
    claim = claimable_speedup(result) if result.correct else 1.0
    return claim if math.isfinite(claim) and claim > 0 else 1.0


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 1.0


def combine(task: OpTask, suite: str, index: int, impl: Implementation, first: EvalResult, timed: list[EvalResult]) -> EvalResult:
    performance = _geomean([sample_speedup(r) for r in timed])
    failed = next((r for r in timed if not r.correct), None)
    single = len(timed) == 1 and failed is None
    # the timed sample's extra (its speedup's facts) when it is the op's only one; else none of the judge's speedup facts
    extra = timed[0].extra.copy() if single else first.extra.copy(drop=_SPEEDUP_FACTS)
    result = dataclasses.replace(first, problem=task.name, level=suite, problem_id=index, candidate_path=impl.path or impl.label,
                                 speedup=None, ref=None, new=None, extra=extra)  # fmt: skip
    result.wall_seconds = first.wall_seconds + sum(r.wall_seconds for r in timed)
    diffs = [r.max_abs_diff for r in (first, *timed) if r.max_abs_diff is not None]
    result.max_abs_diff = max(diffs) if diffs else None
    if not first.correct:
        result.message = f"{task.op}, correctness samples: {first.message}\n{_listing(first.message, task.correctness)}"
    elif failed is not None:
        i = timed.index(failed)
        result.outcome, result.stage = failed.outcome, failed.stage
        result.message = f"{task.op}, performance sample {i} ({task.performance[i].describe()}): {failed.message}"
    else:
        result.speedup = performance
        if single:
            result.ref, result.new = timed[0].ref, timed[0].new
    result.extra.op_suite = {
        "suite": suite,
        "op": task.op,
        "implementation": impl.path or impl.label,
        "correct": first.correct,
        "correctness_samples": len(task.correctness),
        "performance": performance,
        "claimable_performance": _geomean([sample_claim(r) for r in timed]),
        "samples": [_sample_entry(s, r) for s, r in zip(task.performance, timed, strict=False)],
    }
    return result


def _sample_entry(sample: OpSample, result: EvalResult) -> dict[str, object]:
    return {"sample": sample.describe(), "outcome": result.outcome.value, "speedup": sample_speedup(result),
            "noisy": is_noisy(result), "ref_ms": result.ref_ms, "new_ms": result.new_ms}  # fmt: skip


def _listing(message: str, samples: tuple[OpSample, ...]) -> str:
    """The samples, the one the judge's message names (``output 3``) first."""
    found = re.search(r"\boutput (\d+)", message)
    order = list(range(len(samples)))
    if found and int(found.group(1)) < len(samples):
        named = int(found.group(1))
        order.remove(named)
        order.insert(0, named)
    lines = [f"  sample {i}: ({samples[i].describe()})" for i in order[:_SHOWN]]
    more = f"\n  ... and {len(samples) - _SHOWN} more" if len(samples) > _SHOWN else ""
    return "samples (output i is sample i when each returns one tensor):\n" + "\n".join(lines) + more
