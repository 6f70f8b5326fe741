"""The build pool: compile candidates' extensions ahead of their evaluation, on the CPU cores.

A ``load_inline`` CUDA build takes about a minute, judging a level-1 candidate a few
seconds of GPU time. The pool runs upcoming candidates' sandboxed build steps in ``build_jobs``
parallel build-only evaluations (no device lock, no judging) so that their libraries land in the
keyed build cache (:mod:`pytest_kernelbench.build.cache`). When the judge of that
candidate reaches its compile stage it either loads the cached library or waits on the
key's lock for the build in flight: never a second compile, and the device lock is
only ever taken by candidates that are already built.

Only candidates that build an extension are prebuilt; a pure PyTorch candidate has
nothing to compile ahead. A failed prebuild is not a result: the judge compiles again
and reports the failure with its own log.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading

from ..candidates import Candidate, builds_extension
from ..config import EvalConfig
from ..judge.controller import evaluate
from ..judge.locking import wait_while_cpu_timing
from ..problems import Problem
from ..result import EvalResult


def judging_order(candidates: list[Candidate | None]) -> list[int]:
    """Where each candidate goes in the judging order when a pool builds ahead: those with nothing to build first,
    then those with an extension in the order the pool builds them, so that judges do not wait on cold builds while
    other candidates could be judged (H100, level-3 corpus at 846f339: all 4 judges waited 60-116 s on CUDA builds
    while 17 Triton, graph and fp16 candidates queued behind them)."""
    return sorted(range(len(candidates)), key=lambda i: candidates[i] is not None and builds_extension(candidates[i].source))


def default_build_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class Prebuilder:
    """``submit`` candidates in the order they will be judged; ``close`` at the end of the session."""

    def __init__(self, config: EvalConfig, jobs: int):
        self.config = config
        self.jobs = max(1, jobs)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="kb-build")
        self._stop = threading.Event()
        self.futures: dict[str, concurrent.futures.Future[EvalResult]] = {}

    def submit(self, problem: Problem, candidate: Candidate) -> bool:
        if not builds_extension(candidate.source) or candidate.source_hash in self.futures:
            return False
        rank = len(self.futures)  # builds queued ahead of it: the first ones of a cold pool finish first (runner.build_nice)
        self.futures[candidate.source_hash] = self._pool.submit(self._build, problem, candidate, rank)
        return True

    def _build(self, problem: Problem, candidate: Candidate, rank: int) -> EvalResult:
        # a build starting now would start its processes inside another evaluation's CPU timing window
        # (a build already running is stopped there by its own supervisor: pause_for_timing)
        wait_while_cpu_timing(self.config.lock_dir)
        return evaluate(problem, candidate, self.config, build_only=True, build_rank=rank, stop=self._stop)

    def close(self, wait: bool = True) -> None:
        """Cancel builds not yet started; with ``wait=False`` also kill those in flight."""
        if not wait:
            self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
