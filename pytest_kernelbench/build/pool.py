"""The build pool: compile candidates' extensions ahead of their evaluation, on the CPU cores.

A ``load_inline`` CUDA build takes about a minute, judging a level-1 candidate a few
seconds of GPU time. The pool runs upcoming candidates' sandboxed build steps in ``build_jobs``
parallel build-only evaluations (no device lock, no judging) so that their libraries land in the
keyed build cache (:mod:`pytest_kernelbench.build.cache`). When the judge of that
candidate reaches its compile stage it either loads the cached library or waits on the
key's lock for the build in flight: never a second compile, and the device lock is
only ever taken by candidates that are already built.

While the shared PCH (:mod:`pytest_kernelbench.build.pch`) builds a header, the builds that asked
for it wait with their binding file unbuilt, and on a cold root that is the whole first wave: the
cores sit idle until the header is ready. So ``build_jobs`` counts the builds that can use the
cores: while a header is being built the pool starts up to ``spare`` more (half as many again by
default; their steps run at the lowest priority, ``runner.build_nice``), and starts none beyond
``build_jobs`` otherwise.

Only candidates that build an extension are prebuilt; a pure PyTorch candidate has
nothing to compile ahead. A failed prebuild is not a result: the judge compiles again
and reports the failure with its own log.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from pathlib import Path

from ..candidates import Candidate, builds_extension
from ..config import EvalConfig
from ..judge.controller import evaluate
from ..judge.locking import wait_while_cpu_timing
from ..problems import Problem
from ..result import EvalResult


def default_build_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class Prebuilder:
    """``submit`` candidates in the order they will be judged; ``close`` at the end of the session."""

    def __init__(self, config: EvalConfig, jobs: int, spare: int | None = None):
        self.config = config
        self.jobs = max(1, jobs)
        self.spare = 0 if config.pch_dir == "off" else max(0, self.jobs // 2 if spare is None else spare)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs + self.spare, thread_name_prefix="kb-build")
        self._stop = threading.Event()
        self._running = threading.Condition()
        self._count, self._waiting = 0, set[int]()
        self.futures: dict[str, concurrent.futures.Future[EvalResult]] = {}

    def submit(self, problem: Problem, candidate: Candidate) -> bool:
        if not builds_extension(candidate.source) or candidate.source_hash in self.futures:
            return False
        rank = len(self.futures)  # builds queued ahead of it: the first ones of a cold pool finish first (runner.build_nice)
        self.futures[candidate.source_hash] = self._pool.submit(self._build, problem, candidate, rank)
        return True

    def _build(self, problem: Problem, candidate: Candidate, rank: int) -> EvalResult:
        if not self._admit(rank):
            raise RuntimeError("the build pool closed before this build started")
        try:  # the slot is held until the build ends
            # a build starting now would start its processes inside another evaluation's CPU timing window
            # (a build already running is stopped there by its own supervisor: pause_for_timing)
            wait_while_cpu_timing(self.config.lock_dir)
            return evaluate(problem, candidate, self.config, build_only=True, build_rank=rank, stop=self._stop)
        finally:
            with self._running:
                self._count -= 1
                self._running.notify_all()

    def _admit(self, rank: int) -> bool:
        """Wait for a slot, the first-queued build first: one of ``jobs``, or of ``jobs + spare`` while a shared header
        is being built. False: the pool closed."""
        with self._running:
            self._waiting.add(rank)
            try:
                while not self._stop.is_set():
                    free = self._count < self.jobs or (self._count < self.jobs + self.spare and self.header_building())
                    if free and rank == min(self._waiting):
                        self._count += 1
                        return True
                    self._running.wait(timeout=0.5)  # a header's build starts without a notice: look again
                return False
            finally:
                self._waiting.discard(rank)
                self._running.notify_all()

    def header_building(self) -> bool:
        """Whether a shared PCH header is being built now (its ``<key>.building`` mark, :func:`build.pch.build_pch`)."""
        try:
            return any(Path(self.config.pch_dir).glob("*.building"))
        except OSError:
            return False

    def close(self, wait: bool = True) -> None:
        """Cancel builds not yet started; with ``wait=False`` also kill those in flight."""
        if not wait:
            self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
