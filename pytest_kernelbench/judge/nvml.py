"""Whose kernels keep a GPU busy: NVML's per-process utilization samples, read through ctypes (``libnvidia-ml.so.1``,
which the driver installs; no Python binding to carry to a GPU machine).

A time phase that waits for a quiet GPU (``Device.settle``) waits for kernels other judges' candidates queued before
they were stopped: a stopped process's kernels run on. Which process they belong to is not something the judge can
see from its own context; the driver's per-process samples say it. ``BusyWatch`` gathers them over such a wait, and
names each process by the cgroup the judge put it in (``<supervisor pid>-<side>-<n>``: judge/cgroups.py), so that a
run's record can say whose candidate it was (``extra.settle_busy``; benchmarks/throughput.py maps the supervisor's pid
to its candidate). Where NVML or cgroups are not there, nothing is named and nothing else changes.

``OwnBusy`` is the other side of it, an experiment (``KB_CHARGE_STOPPED_KERNELS=1``): while a judge's own candidate is
stopped for another judge's timing (a step aside), whether NVML sees its processes busy; the seconds they were are the
candidate's, not no one's (judge/supervisor/sides.py ``Runners.step_aside``).
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
import time
from collections.abc import Callable, Iterable

_INSUFFICIENT_SIZE = 7  # NVML_ERROR_INSUFFICIENT_SIZE: the count, asked with no buffer (NOT_FOUND, 6: no sample since)
_SIDE_CGROUP = re.compile(r"^(\d+)-([a-z]+)-\d+$")  # judge/cgroups.py: Cgroup.create(f"{side}-{n}") in supervisor <pid>
TICK_S = 0.25  # how often a watch asks (a sample covers a sampling period of the driver's: 1/6 s to 1 s)


class _Sample(ctypes.Structure):  # nvmlProcessUtilizationSample_t
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]  # fmt: skip


class ProcessUtilization:
    """One GPU's per-process SM utilization (:meth:`busy`)."""

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p):
        self._lib, self._handle = lib, handle

    @classmethod
    def open(cls, uuid: str) -> ProcessUtilization | None:
        """The GPU of this UUID (torch's ``get_device_properties(i).uuid``); None without NVML or that GPU."""
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            lib.nvmlDeviceGetProcessUtilization.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint),
                                                            ctypes.c_ulonglong]  # fmt: skip
            handle = ctypes.c_void_p()
            name = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
            if lib.nvmlInit_v2() != 0 or lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) != 0:
                return None
        except (OSError, AttributeError):
            return None
        return cls(lib, handle)

    def busy(self, since_us: int) -> dict[int, int]:
        """pid -> SM utilization (percent) of its latest sample after ``since_us`` (the CPU's clock, microseconds since
        the epoch), for each process with some; {} when there is none or NVML says no."""
        count = ctypes.c_uint(0)
        rc = self._lib.nvmlDeviceGetProcessUtilization(self._handle, None, ctypes.byref(count), since_us)
        if rc not in (0, _INSUFFICIENT_SIZE) or not count.value:
            return {}
        samples = (_Sample * count.value)()
        if self._lib.nvmlDeviceGetProcessUtilization(self._handle, samples, ctypes.byref(count), since_us) != 0:
            return {}
        return {s.pid: s.smUtil for s in samples[: count.value] if s.smUtil > 0}


def owner(pid: int, proc: str = "/proc") -> str:
    """Who a process is: ``<supervisor pid>-<side>`` for one in a judge's side cgroup, else ``pid <pid>``."""
    try:
        with open(f"{proc}/{pid}/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return f"pid {pid}"
    for line in lines:
        if line.startswith("0::"):
            found = _SIDE_CGROUP.match(line.rsplit("/", 1)[-1])
            if found:
                return f"{found.group(1)}-{found.group(2)}"
    return f"pid {pid}"


class BusyWatch:
    """Over one wait: each process other than this one seen with SM utilization, named by :func:`owner`, and how many
    of the samples taken (every TICK_S at most) found it busy."""

    def __init__(self, util: ProcessUtilization | None, since_us: int | None = None, proc: str = "/proc"):
        self._util, self._proc = util, proc
        self._since = time.time_ns() // 1000 if since_us is None else since_us
        self._asked = 0.0
        self.seen: dict[str, int] = {}

    def tick(self) -> None:
        now = time.monotonic()
        if self._util is None or now - self._asked < TICK_S:
            return
        self._asked = now
        asked_at = time.time_ns() // 1000
        for pid in self._util.busy(self._since):
            if pid != os.getpid():
                name = owner(pid, self._proc)
                self.seen[name] = self.seen.get(name, 0) + 1
        self._since = asked_at


class OwnBusy:
    """While a candidate is stopped: every TICK_S, in a thread, whether NVML sees any of ``pids`` busy. :meth:`stop`
    gives the seconds that were its own: the wait's length times the share of the samples that saw it busy."""

    def __init__(self, util: ProcessUtilization, pids: Iterable[int]):
        self._util, self._pids = util, frozenset(pids)
        self._since, self._start = time.time_ns() // 1000, time.monotonic()
        self.ticks = self.busy_ticks = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kb-own-busy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(TICK_S):
            asked_at = time.time_ns() // 1000
            busy = self._util.busy(self._since)
            self._since = asked_at
            self.ticks += 1
            self.busy_ticks += bool(self._pids & busy.keys())

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        elapsed = time.monotonic() - self._start
        return elapsed * self.busy_ticks / self.ticks if self.ticks else 0.0


class GpuProcesses:
    """One judge's view of its GPU's processes: NVML opened on first use (``uuid``: the GPU's, asked then), and the
    watches over it."""

    def __init__(self, uuid: Callable[[], str]):
        self._uuid = uuid
        self._util: ProcessUtilization | None | bool = False  # False: not opened yet

    def utilization(self) -> ProcessUtilization | None:
        if self._util is False:
            self._util = None  # a diagnosis: never a phase's failure
            try:
                uuid = self._uuid()
            except (RuntimeError, AttributeError):
                uuid = ""
            self._util = ProcessUtilization.open(uuid) if uuid else None
        return self._util

    def watch_stopped(self, pids: Iterable[int]) -> OwnBusy | None:
        """KB_CHARGE_STOPPED_KERNELS=1 (an experiment), with NVML: a watch over a stopped candidate's processes, whose
        kernels may run on (Runners.step_aside charges it what :meth:`OwnBusy.stop` gives)."""
        if os.environ.get("KB_CHARGE_STOPPED_KERNELS") != "1":
            return None
        util = self.utilization()
        return OwnBusy(util, pids) if util is not None else None
