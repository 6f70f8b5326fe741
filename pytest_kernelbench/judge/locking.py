"""Who may use a device when, across processes (xdist workers, several sessions on one machine).

A reader-writer lock per device (filelock's SQLite-backed :class:`filelock.ReadWriteLock`: released
when its process dies; a waiting writer holds SQLite's PENDING lock, so new readers queue behind it
and a writer is never starved):

* **exclusive** (the writer): a timing window, or the reference's first call and the quiet-GPU probe.
  No other judge's work runs on the device meanwhile.
* A shared holder in a long call steps aside for a waiting exclusive one (it stops its candidate, lets the
  lock go, queues again: ``Runners.step_aside``), so that one long first call (inductor, autotune) does
  not hold every other judge's timing, and with it every new reader, for its whole length.
* **shared** (readers): untimed device work (the candidate's construction, correctness trials and
  their first calls, where Triton JIT, autotune, inductor and CUDA-graph capture happen; the
  reference's recheck). Several judges at once, each admitted by device memory first
  (:func:`admitted`), so that sharing never runs the GPU out of memory.

Admission: each shared holder writes what it may need in ``<key>.admitted/<pid>``; a newcomer is let
in when no one else is admitted, or when the device's free memory less everyone else's reservation
covers its own. The check and the write happen under one small file lock; reservations of dead
processes are dropped.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from filelock import FileLock, ReadWriteLock, Timeout

ADMISSION_POLL = 0.1


def _safe(device_key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in device_key)


class DeviceLock:
    """``with device_lock(dir, key):`` holds the device exclusively; ``acquire(shared=True)`` shares it."""

    def __init__(self, lock_dir: str | Path, device_key: str):
        self.folder = Path(lock_dir)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.key = _safe(device_key)
        self.lock_file = str(self.folder / f"{self.key}.lock")
        self._rw = ReadWriteLock(self.lock_file, is_singleton=False)
        self.is_locked = False

    def acquire(self, timeout: float = -1, shared: bool = False, announce: int | None = None) -> DeviceLock:
        """Raises :class:`filelock.Timeout` when not had within ``timeout`` seconds (-1: wait for ever).

        ``announce`` (exclusive only): while waiting, say so in ``<key>.wanted/<pid>``, with the device bytes
        this holder will need; shared holders in a long call then step aside (:meth:`wanted`). Every waiter is in
        ``<key>.queued/<pid>`` meanwhile (:meth:`queued`)."""
        markers = [self._marker("queued", 0)]
        if announce is not None and not shared:
            markers.append(self._marker("wanted", announce))
        try:
            (self._rw.acquire_read if shared else self._rw.acquire_write)(timeout=timeout)
        finally:
            for marker in markers:
                marker.unlink(missing_ok=True)
        self.is_locked = True
        return self

    def _marker(self, kind: str, value: int) -> Path:
        marker = self.folder / f"{self.key}.{kind}" / str(os.getpid())
        marker.parent.mkdir(exist_ok=True)
        marker.write_text(str(int(value)))
        return marker

    def queued(self) -> bool:
        """Whether another process waits for this lock now, shared or exclusive."""
        folder = self.folder / f"{self.key}.queued"
        return folder.is_dir() and bool(_reservations(folder, os.getpid()))

    def wanted(self) -> int | None:
        """The device bytes the exclusive holders waiting now (other processes) announced, or None when none waits."""
        folder = self.folder / f"{self.key}.wanted"
        if not folder.is_dir():
            return None
        found = _reservations(folder, os.getpid())
        return sum(found) if found else None

    def release(self) -> None:
        if self.is_locked:
            self.is_locked = False
            self._rw.release()

    def __enter__(self) -> DeviceLock:
        return self if self.is_locked else self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def device_lock(lock_dir: str | Path, device_key: str) -> DeviceLock:
    """The lock of one device. ``device_key`` names the physical device (e.g. its UUID, or "cpu")."""
    return DeviceLock(lock_dir, device_key)


def pid_alive(pid: int) -> bool:
    """Whether a lock-folder marker's writer still runs (a reservation, the CPU timing marker)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reservations(folder: Path, mine: int) -> list[int]:
    """Bytes reserved by the other live shared holders (a dead one's reservation is removed)."""
    found = []
    for entry in folder.iterdir():
        pid = int(entry.name) if entry.name.isdigit() else -1
        if pid == mine:
            continue
        if pid < 0 or not pid_alive(pid):
            entry.unlink(missing_ok=True)
            continue
        try:
            found.append(int(entry.read_text() or 0))
        except (OSError, ValueError):
            continue
    return found


@contextlib.contextmanager
def admitted(lock: DeviceLock, need_bytes: int, free_bytes: Callable[[], int], timeout: float = -1) -> Iterator[None]:
    """Wait until ``need_bytes`` fits beside the other shared holders' reservations, then hold a reservation."""
    folder = lock.folder / f"{lock.key}.admitted"
    folder.mkdir(exist_ok=True)
    mine = folder / str(os.getpid())
    deadline = None if timeout < 0 else time.monotonic() + timeout
    while True:
        with FileLock(str(lock.folder / f"{lock.key}.admission")):
            others = _reservations(folder, os.getpid())
            if not others or free_bytes() - sum(others) >= need_bytes:
                mine.write_text(str(int(need_bytes)))
                break
        if deadline is not None and time.monotonic() > deadline:
            raise Timeout(str(mine))
        time.sleep(ADMISSION_POLL)
    try:
        yield
    finally:
        mine.unlink(missing_ok=True)


# ---------------------------------------------------------------- CPU timing: builds stop meanwhile


def _timing_marker(lock_dir: str) -> Path:
    return Path(lock_dir) / "cpu.timing"


def mark_cpu_timing(lock_dir: str, on: bool) -> None:
    """Announce (or end) a CPU timing phase: the marker holds this supervisor's pid. The lock folder is
    hidden from candidate code, so only supervisors write it."""
    marker = _timing_marker(lock_dir)
    if on:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(os.getpid()))
    else:
        with contextlib.suppress(FileNotFoundError):
            if marker.read_text().strip() == str(os.getpid()):
                marker.unlink()


def cpu_timing_holder(lock_dir: str) -> int | None:
    """The pid of the supervisor timing on the CPU now, or None (no marker, or its writer is gone)."""
    try:
        pid = int(_timing_marker(lock_dir).read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return None
    if pid <= 0 or not pid_alive(pid):
        return None
    return pid


def wait_while_cpu_timing(lock_dir: str, poll: float = 0.05, limit: float = 120.0, mine: int | None = None) -> None:
    """Wait while another evaluation times on the CPU (a holder other than ``mine``), at most ``limit`` seconds:
    a new build is held back before it starts (its supervisor and build step import torch: seconds of CPU),
    a running build step while it is stopped (Device.pause_for_timing)."""
    deadline = time.monotonic() + limit
    while cpu_timing_holder(lock_dir) not in (None, mine) and time.monotonic() < deadline:
        time.sleep(poll)


# ---------------------------------------------------------------- build slots: one limit for the whole machine

BUILD_SLOTS_ENV = "KB_BUILD_SLOTS"  # how many candidate builds run at once on this machine (default: build_slots())


def build_slots() -> int:
    """Candidate builds at once on this machine, whatever process judges them: ``KB_BUILD_SLOTS``, else the cores this
    process may use less one in eight (at least one left for the judges; a 2-core machine builds one at a time). Each
    step of a CUDA build (cudafe++, cicc, the host compile) keeps one core busy: six builds at once on 2 cores all timed
    out in 'compile' at 60 s where each alone took 35 s, and half the cores (the former default) left a 16-core H200
    machine 30% idle while its judges waited for builds (docs/performance.md, "The PIKE corpus on one H200")."""
    value = os.environ.get(BUILD_SLOTS_ENV, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores - max(1, cores // 8))


@contextlib.contextmanager
def build_slot(lock_dir: str | Path, timeout: float, slots: int | None = None, poll: float = 0.05) -> Iterator[int]:
    """Hold one of the machine's build slots (a file lock each in the lock folder, which every judge process of this
    cache shares: pytest sessions, xdist workers, the service, a Ray worker on this host) for a build; yields its number.
    Waits up to ``timeout`` seconds (then :class:`filelock.Timeout`); the slot goes back when the holder ends, also when
    it is killed (the kernel drops its lock)."""
    count = slots or build_slots()
    folder = Path(lock_dir)
    folder.mkdir(parents=True, exist_ok=True)
    locks = [FileLock(str(folder / f"build-slot-{i}.lock")) for i in range(count)]
    deadline = time.monotonic() + timeout
    start = os.getpid() % count  # spread first tries, so that waiters do not all knock on slot 0
    while True:
        for k in range(count):
            i = (start + k) % count
            try:
                locks[i].acquire(timeout=0)
            except Timeout:
                continue
            try:
                yield i
            finally:
                locks[i].release()
            return
        if time.monotonic() > deadline:
            raise Timeout(str(folder / "build-slot-*.lock"))
        time.sleep(poll)
