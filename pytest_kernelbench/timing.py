"""Device timers, bound before any candidate code is imported.

Every function the timers call is looked up once, here, when :class:`Clocks` is
built; a candidate that later patches ``time.perf_counter``, ``torch.cuda.Event``
or ``torch.cuda.synchronize`` changes nothing we measure (and the tamper check
reports it).

GPU: each repetition flushes L2 (writes a buffer twice the L2 size), synchronizes
the whole device, and times one call with CUDA events; work the call leaves running
on other streams or threads is detected and counted in (see ``Clocks.time_once``). CPU: ``perf_counter`` around one call.

Optional CUDA-graph timing (``timer="cuda-graph"``): each function is captured once in a
CUDA graph and every repetition times one replay the same way (L2 flush, events, device
sync): the kernels' time without host launch overhead.

Reference and candidate are timed interleaved (alternating which goes first)
after a warm-up. Stopping rule: at least ``min_reps`` repetitions; then stop as soon
as, for every timed function, the standard error of the median
(1.2533 * std / sqrt(n), the large-sample value) is below ``rel_err`` of the median,
or when ``max_time`` seconds have passed, or after ``max_reps`` repetitions.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


class Clocks:
    def __init__(self, device: torch.device):
        self.device = device
        self.perf_counter = time.perf_counter
        self.is_cuda = device.type == "cuda"
        if self.is_cuda:
            self._event_base = torch._C._CudaEventBase
            self._record = torch._C._CudaEventBase.record
            self._elapsed = torch._C._CudaEventBase.elapsed_time
            self._synchronize = torch._C._cuda_synchronize
            self._current_stream = torch.cuda.current_stream
            self._zero = torch.Tensor.zero_
            self._stream = torch.cuda.Stream
            self._use_stream = torch.cuda.stream
            self._graph = torch.cuda.CUDAGraph
            self._capture = torch.cuda.graph
            l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 50 * 2**20)
            self.l2_bytes = l2_bytes
            self._flush_buffer = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device=device)
        self.gap_ms: float | None = None
        self.gap_threshold_ms = 0.0
        self.offstream: dict[str, int] = {}

    def synchronize(self) -> None:
        if self.is_cuda:
            self._synchronize()

    def flush_l2(self) -> None:
        if self.is_cuda:
            self._zero(self._flush_buffer)

    def graphed(self, fn: Callable[[], Any], warmup: int = 2) -> Callable[[], Any]:
        """``fn`` captured once in a CUDA graph: a callable that replays it and returns the captured output.

        Warm-up calls run on a side stream first (lazy initialisation must not be captured). A
        function that cannot be captured (host syncs, CPU work, allocations the graph cannot hold)
        raises here. Work the function sends to a stream the capture does not follow is missing
        from the replays; the caller checks the replays' outputs.
        """
        current = self._current_stream()
        side = self._stream(device=self.device)
        side.wait_stream(current)
        with self._use_stream(side):
            for _ in range(warmup):
                fn()
        current.wait_stream(side)
        self._synchronize()
        graph = self._graph()
        with self._capture(graph):
            out = fn()
        self._synchronize()

        def replay() -> Any:
            graph.replay()
            return out

        replay.graph = graph  # type: ignore[attr-defined]  # kept alive with the callable
        return replay

    def _events_once(self, fn: Callable[[], Any]) -> tuple[float, float, Any]:
        """(ms to the event right after the call, ms to the event after a whole-device sync, output)."""
        self.flush_l2()
        self._synchronize()
        start = self._event_base(enable_timing=True)
        end_stream = self._event_base(enable_timing=True)
        end_device = self._event_base(enable_timing=True)
        stream = self._current_stream()
        self._record(start, stream)
        out = fn()
        self._record(end_stream, stream)
        self._synchronize()  # waits for every stream and thread's work
        self._record(end_device, stream)
        self._synchronize()
        return float(self._elapsed(start, end_stream)), float(self._elapsed(start, end_device)), out

    def _calibrate(self) -> None:
        """The gap between the two end events when nothing runs elsewhere: host sync + launch latency."""
        gaps = sorted(total - fast for fast, total, _ in (self._events_once(lambda: None) for _ in range(31)))
        self.gap_ms = gaps[len(gaps) // 2]
        self.gap_threshold_ms = max(3 * self.gap_ms, gaps[-2] + 0.05)

    def time_once(self, fn: Callable[[], Any], label: str = "") -> tuple[float, Any]:
        """Milliseconds one call of ``fn`` takes on the device, and what it returned.

        GPU: the interval from a start event to an end event recorded right after the call on the
        current stream. Work that outlives that event (on another stream or thread) shows up as a
        larger gap before a second end event recorded after a whole-device sync; then the sample
        is the whole-device interval less the calibrated host latency, and it is counted in
        ``offstream[label]``.
        """
        if not self.is_cuda:
            start = self.perf_counter()
            out = fn()
            return (self.perf_counter() - start) * 1e3, out
        if self.gap_ms is None:
            self._calibrate()
        fast, total, out = self._events_once(fn)
        if total - fast > self.gap_threshold_ms:
            self.offstream[label] = self.offstream.get(label, 0) + 1
            return total - self.gap_ms, out
        return fast, out


def time_interleaved(
    clocks: Clocks,
    fns: dict[str, Callable[[], Any]],
    *,
    warmup: int,
    min_reps: int,
    max_reps: int,
    max_time: float,
    rel_err: float = 0.01,
    before: Callable[[str], None] | None = None,
    discard: Callable[[Any], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Samples (ms) per named function, and the output of each one's last timed call.

    ``before(name)``, if given, runs ahead of every call (warm-up and timed, outside the timed
    interval) and every output is freed before the next call, whoever made it: all calls then get
    the same output block, and only the last call's output is returned. ``discard(output)`` then
    runs on each output before it is freed (e.g. to overwrite it: the next call's output block must
    not hold the other side's answer).
    """
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            if before is not None:
                before(name)
            out = fns[name]()
            if before is not None and discard is not None:
                discard(out)
            del out
    clocks.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, Any] = {}
    started = clocks.perf_counter()
    for rep in range(max_reps):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            if before is not None:
                if discard is not None:
                    discard_all(last, discard)
                last.clear()  # every call gets the one output block
                before(name)
            else:
                last.pop(name, None)  # free the previous output first: each call then gets the same memory
            ms, last[name] = clocks.time_once(fns[name], name)
            samples[name].append(ms)
        if rep + 1 >= min_reps and (
            clocks.perf_counter() - started > max_time or all(median_rel_err(v) < rel_err for v in samples.values())
        ):
            break
    return samples, last


def discard_all(outputs: dict[str, Any], discard: Callable[[Any], None]) -> None:
    # a function of its own: a loop variable in the caller's frame would keep an output alive
    for out in outputs.values():
        discard(out)


def median_rel_err(samples: list[float]) -> float:
    """Standard error of the median relative to the median (large-sample approximation)."""
    if len(samples) < 3:
        return math.inf
    median = statistics.median(samples)
    if median <= 0:
        return math.inf
    return 1.2533 * statistics.stdev(samples) / math.sqrt(len(samples)) / median
