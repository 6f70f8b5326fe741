"""How a runner times a call: an L2 flush, a device sync, CUDA events around the call (CPU: ``perf_counter``), and a
second end event after a whole-device sync for work the call left on other streams. Part of the runner's process
(:mod:`pytest_kernelbench.judge.runner`): nothing it reports is trusted (the supervisor's clock checks it).

Imports nothing but the standard library; torch comes in as an argument.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

_perf_counter = time.perf_counter  # bound before any candidate code exists


class Clocks:
    """Times one call: L2 flush, whole-device sync, CUDA events around the call (CPU: perf_counter).

    Work the call leaves running on other streams or threads shows up as a gap before a second end
    event recorded after a whole-device sync; such a call is timed to that event (less the host's
    own sync latency, calibrated with empty calls) and reported as ``offstream``.
    """

    def __init__(self, torch: Any, device: Any):
        self.torch = torch
        self.cuda = device.type == "cuda"
        self.device = device
        self._synchronize = torch.cuda.synchronize  # bound before any candidate code exists
        self.gap_ms: float | None = None
        self.gap_threshold_ms = 0.0
        if self.cuda:
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 50 * 2**20)
            self._flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def sync(self) -> None:
        if self.cuda:
            self._synchronize(self.device)

    def _events_once(self, fn: Callable[[], Any]) -> tuple[float, float, Any]:
        torch = self.torch
        self._flush.zero_()
        self.sync()
        start, end, end_device = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        stream = torch.cuda.current_stream(self.device)
        start.record(stream)
        out = fn()
        end.record(stream)
        self.sync()  # waits for every stream's work, this thread's or another's
        end_device.record(stream)
        self.sync()
        return float(start.elapsed_time(end)), float(start.elapsed_time(end_device)), out

    def _calibrate(self) -> None:
        gaps = sorted(total - fast for fast, total, _ in (self._events_once(lambda: None) for _ in range(31)))
        self.gap_ms = gaps[len(gaps) // 2]
        self.gap_threshold_ms = max(3 * self.gap_ms, gaps[-2] + 0.05)

    def time_once(self, fn: Callable[[], Any]) -> tuple[float, Any, bool]:
        """(milliseconds, the call's output, whether work outlived the call's stream)."""
        if not self.cuda:
            start = _perf_counter()
            out = fn()
            return (_perf_counter() - start) * 1e3, out, False
        if self.gap_ms is None:
            self._calibrate()
        fast, total, out = self._events_once(fn)
        if total - fast > self.gap_threshold_ms:
            return total - self.gap_ms, out, True  # type: ignore[operator]
        return fast, out, False

    def graphed(self, fn: Callable[[], Any], warmup: int = 2) -> Callable[[], Any]:
        """``fn`` captured once in a CUDA graph (warm-up calls on a side stream first); raises if it cannot be."""
        torch = self.torch
        current = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        current.wait_stream(side)
        self.sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
        self.sync()

        def replay() -> Any:
            graph.replay()
            return out

        replay.graph = graph  # type: ignore[attr-defined]
        return replay
