"""The service's evaluations: a bounded queue in front of a pool of judge threads.

Each thread runs :func:`pytest_kernelbench.judge.controller.evaluate`, which starts its own supervisor and runner
processes: compiles run side by side, device work waits for the device's lock (the judge takes it), and each
evaluation is sent to the visible GPU with the fewest evaluations on it. A request that finds ``workers + queue``
evaluations admitted is refused at once (429, ``Retry-After``); one that outlives the per-request limit is stopped.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kbagent.serve.schema import BadRequest
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.judge.stages import UNCHARGED
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import Problem
from pytest_kernelbench.result import EvalResult

EvaluateFn = Callable[..., EvalResult]  # evaluate(problem, candidate, config, stop=threading.Event)


@dataclasses.dataclass
class PoolStats:
    """What ``/metrics`` and ``/healthz`` show of the pool."""

    workers: int
    capacity: int
    waiting: int
    running: int
    outcomes: dict[str, int]
    rejected: int
    seconds_sum: float
    seconds_count: int


class JudgePool:
    def __init__(self, workers: int, queue: int, request_timeout: float, gpus: int, evaluate: EvaluateFn):
        self.workers = workers
        self.capacity = workers + queue
        self.request_timeout = request_timeout
        self._evaluate = evaluate
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kb-judge")
        self._lock = threading.Lock()
        self._waiting = 0
        self._running = 0
        self._gpu_load = [0] * max(gpus, 1)
        self._durations: collections.deque[float] = collections.deque(maxlen=50)
        self._outcomes: collections.Counter[str] = collections.Counter()
        self._rejected = 0
        self._seconds = 0.0
        self._stops: set[threading.Event] = set()

    async def judge(self, problem: Problem, candidate: Candidate, config: EvalConfig) -> EvalResult:
        """The verdict; BadRequest 429 when the queue is full, 503 when the request waited past its limit."""
        self._admit()
        stop, started = threading.Event(), threading.Event()
        future = self._executor.submit(self._work, problem, candidate, config, stop, started)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.request_timeout)
        except asyncio.TimeoutError:
            if future.cancel():
                with self._lock:
                    self._waiting -= 1
                raise BadRequest(f"the judge's queue held this request past the {self.request_timeout:g} s limit; retry later",
                                 status=503, headers={"Retry-After": str(self.retry_after())}) from None  # fmt: skip
            stop.set()
            result = await asyncio.wrap_future(future)
            return _over_limit(result, self.request_timeout, config.timeout)

    def _admit(self) -> None:
        with self._lock:
            if self._waiting + self._running >= self.capacity:
                self._rejected += 1
                full = True
            else:
                self._waiting += 1
                full = False
        if full:
            raise BadRequest(f"the judge's queue is full ({self.capacity} evaluations admitted); retry after the "
                             "Retry-After seconds", status=429, headers={"Retry-After": str(self.retry_after())})  # fmt: skip

    def _work(self, problem: Problem, candidate: Candidate, config: EvalConfig, stop: threading.Event, started: threading.Event):
        with self._lock:
            self._waiting -= 1
            self._running += 1
            gpu = min(range(len(self._gpu_load)), key=self._gpu_load.__getitem__)
            self._gpu_load[gpu] += 1
            self._stops.add(stop)
        started.set()
        begun = time.monotonic()
        try:
            if config.device == "cuda":
                config = dataclasses.replace(config, device_index=gpu)
            result = self._evaluate(problem, candidate, config, stop=stop)
        finally:
            with self._lock:
                self._running -= 1
                self._gpu_load[gpu] -= 1
                self._stops.discard(stop)
                spent = time.monotonic() - begun
                self._durations.append(spent)
                self._seconds += spent
        with self._lock:
            self._outcomes[result.outcome.value] += 1
        return result

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: the recent mean evaluation time per queued round."""
        with self._lock:
            mean = sum(self._durations) / len(self._durations) if self._durations else 5.0
            rounds = (self._waiting + self._running) / self.workers
        return max(1, min(300, math.ceil(mean * max(rounds, 1.0))))

    def stats(self) -> PoolStats:
        with self._lock:
            return PoolStats(self.workers, self.capacity, self._waiting, self._running, dict(self._outcomes), self._rejected,
                             self._seconds, sum(self._outcomes.values()))  # fmt: skip

    def close(self) -> None:
        """Stop every evaluation in flight (service shutdown) and the threads."""
        with self._lock:
            for stop in self._stops:
                stop.set()
        self._executor.shutdown(wait=True, cancel_futures=True)


HAD_THE_TIME = 0.9  # the share of its time a candidate's charged stages took before a request limit is its timeout


def _over_limit(result: EvalResult, limit: float, timeout: float) -> EvalResult:
    """A result stopped by the per-request limit: a timeout when the candidate had the time (its charged stages took
    most of its own limit, or of the request's, whichever is less), else the judge's failure: the request's time went
    to the queue, builds, locks or other uncharged stages."""
    stage = result.stage or "start"
    spent = sum(seconds for name, seconds in result.stage_seconds.items() if name not in UNCHARGED)
    if stage in UNCHARGED or spent < HAD_THE_TIME * min(limit, timeout):
        result.outcome = Outcome.HARNESS_ERROR
        result.message = (f"the service's {limit:g} s request limit passed in stage '{stage}' after {spent:.1f} s of the "
                          f"candidate's own stages (its limit: {timeout:g} s): the judge's time, not the candidate's doing")
    else:
        result.outcome = Outcome.TIMEOUT
        result.message = f"the service's {limit:g} s request limit passed during stage '{stage}' ({spent:.1f} s of the candidate's stages)"
    return result
