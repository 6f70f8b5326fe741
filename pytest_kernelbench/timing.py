"""Device timers, bound before any candidate code is imported.

Every function the timers call is looked up once, here, when :class:`Clocks` is
built; a candidate that later patches ``time.perf_counter``, ``torch.cuda.Event``
or ``torch.cuda.synchronize`` changes nothing we measure (and the tamper check
reports it).

GPU: each repetition flushes L2 (writes a buffer twice the L2 size), synchronizes
the whole device, records a CUDA event, makes one call, synchronizes the whole
device (so work queued on other streams or threads is inside the measurement),
and records the end event. CPU: ``perf_counter`` around one call.

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
            l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 50 * 2**20)
            self.l2_bytes = l2_bytes
            self._flush_buffer = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device=device)

    def synchronize(self) -> None:
        if self.is_cuda:
            self._synchronize()

    def flush_l2(self) -> None:
        if self.is_cuda:
            self._zero(self._flush_buffer)

    def time_once(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        """Milliseconds one call of ``fn`` takes on the device, and what it returned."""
        if not self.is_cuda:
            start = self.perf_counter()
            out = fn()
            return (self.perf_counter() - start) * 1e3, out
        self.flush_l2()
        self._synchronize()
        start = self._event_base(enable_timing=True)
        end = self._event_base(enable_timing=True)
        stream = self._current_stream()
        self._record(start, stream)
        out = fn()
        # Synchronize the whole device *before* the end event: work the candidate queued on other
        # streams or threads finishes inside the interval. This adds the same few microseconds of
        # host latency to every sample, reference and candidate alike (conservative for tiny kernels).
        self._synchronize()
        self._record(end, stream)
        self._synchronize()
        return float(self._elapsed(start, end)), out


def time_interleaved(
    clocks: Clocks,
    fns: dict[str, Callable[[], Any]],
    *,
    warmup: int,
    min_reps: int,
    max_reps: int,
    max_time: float,
    rel_err: float = 0.01,
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Samples (ms) per named function, and the output of each one's last timed call."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    clocks.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, Any] = {}
    started = clocks.perf_counter()
    for rep in range(max_reps):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            ms, last[name] = clocks.time_once(fns[name])
            samples[name].append(ms)
        if rep + 1 >= min_reps and (
            clocks.perf_counter() - started > max_time or all(median_rel_err(v) < rel_err for v in samples.values())
        ):
            break
    return samples, last


def median_rel_err(samples: list[float]) -> float:
    """Standard error of the median relative to the median (large-sample approximation)."""
    if len(samples) < 3:
        return math.inf
    median = statistics.median(samples)
    if median <= 0:
        return math.inf
    return 1.2533 * statistics.stdev(samples) / math.sqrt(len(samples)) / median
