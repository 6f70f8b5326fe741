"""Containment by the kernel's own accounting: each candidate runner and build step in a cgroup of its own.

The supervisor makes the cgroup before the process starts, and the process joins it before it execs (so every
descendant, forked or vforked, double-forked or reparented, is in it from birth). Then:

* **freeze** writes ``cgroup.freeze`` (cgroup v2) and waits for ``frozen 1`` in ``cgroup.events``: atomic for the whole
  tree, whatever its processes do (a vforking parent in state D, a fork/exit chain that reparents its children);
* **memory**: ``memory.max`` (v2; v1: ``memory.limit_in_bytes``) counts every page the tree is charged for, its tmpfs
  and shared memory included; an OOM kill there is recorded in ``memory.events`` and is the candidate's outcome;
* **pids**: ``pids.max`` bounds its tasks (threads count);
* **kill**: ``cgroup.kill`` (v2; else every member, until none is left).

Where the unified hierarchy holds only some controllers (a hybrid host: memory and pids on cgroup v1), freeze and kill
use v2 and the limits v1. Where no cgroup can be written, :func:`support` says why, once, and the judge falls back to
walking process trees (``--kb-sandbox required`` makes that an error).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import select
import sys
import time
from pathlib import Path

PIDS_MAX = 4096  # tasks (threads included) of one candidate's tree: torch's pools and a compile's workers fit
_BASE = "kernelbench"
FROZEN_WAIT_S = 5.0  # a freeze not seen complete in this long is reported as failed (the caller: the candidate's failure)
# cgroup.events: the kernel announces a change at most once per 10 ms a file (CGROUP_FILE_NOTIFY_MIN_INTV, HZ/100);
# a wait reads the file again after EVENTS_FIRST_S, doubling to EVENTS_LONGEST_S, so that it ends soon after the change.
EVENTS_FIRST_S = 100e-6
EVENTS_LONGEST_S = 1e-3


def freezer_used() -> bool:
    """Whether a candidate in a cgroup is stopped between requests by its freezer (the default), or by signals to each
    process of its tree: ``KB_FREEZE=signal``, an experiment (benchmarks/experiments/candidate_lean.py, the candidate's
    lean), the cgroup still holding and killing the tree."""
    return os.environ.get("KB_FREEZE", "cgroup") != "signal"


@dataclasses.dataclass(frozen=True)
class Support:
    """Where this host lets the judge make cgroups: the v2 folder for freeze and kill, and where each limit lives."""

    unified: Path | None = None  # <cgroup2 mount>/kernelbench
    memory: Path | None = None  # v2: same as unified; v1: <memory mount>/kernelbench
    pids: Path | None = None
    memory_v1: bool = False
    pids_v1: bool = False
    reason: str = ""  # why there is none (unified is None)

    @property
    def ok(self) -> bool:
        return self.unified is not None

    @property
    def label(self) -> str:
        if not self.ok:
            return f"no cgroup ({self.reason})"
        limits = [name for name, where in (("memory", self.memory), ("pids", self.pids)) if where is not None]
        return "cgroup v2" + (f" ({', '.join(limits)} limits)" if limits else " (no limits: " + self.reason + ")")


def _mounts() -> dict[str, Path]:
    """fs type or v1 controller -> mount point, from /proc/self/mounts."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        where, kind, options = Path(parts[1]), parts[2], parts[3].split(",")
        if kind == "cgroup2":
            found.setdefault("cgroup2", where)
        elif kind == "cgroup":
            for controller in ("memory", "pids", "freezer"):
                if controller in options:
                    found.setdefault(controller, where)
    return found


def _own(mount: Path, hierarchy: str, proc_cgroup: str = "/proc/self/cgroup") -> Path:
    """This process's cgroup in a hierarchy (``0`` for v2's, else a v1 controller's name): the judge's cgroups go below
    it, never beside it, so that they stay inside every limit the host set for the judge (a container's memory, say)."""
    try:
        for line in Path(proc_cgroup).read_text().splitlines():
            number, names, path = line.split(":", 2)
            if (hierarchy == "0" and number == "0") or hierarchy in names.split(","):
                return mount / path.lstrip("/")
    except (OSError, ValueError):
        pass
    return mount


def cpu_group_is_root(proc_cgroup: str = "/proc/self/cgroup", mounts: dict[str, Path] | None = None) -> bool:
    """Whether this process is scheduled in the root CPU group (the kernel's autogroups apply only there): no v1 ``cpu``
    hierarchy places it below its root, and no v2 cgroup above it, its own included, has the ``cpu`` controller (a
    ``cpu.weight``, which the root never has: so also inside a cgroup namespace, whose root is another's child).
    ``proc_cgroup``, ``mounts``: its /proc/PID/cgroup and the cgroup mounts (:func:`_mounts`)."""
    mounts = _mounts() if mounts is None else mounts
    try:
        lines = [line.split(":", 2) for line in Path(proc_cgroup).read_text().splitlines()]
    except OSError:
        return True
    for number, names, path in lines:
        if number != "0" and "cpu" in names.split(","):
            return path == "/"  # a v1 cpu hierarchy (a hybrid host's v2 has no cpu controller then)
    if "cgroup2" not in mounts:
        return True
    group = _own(mounts["cgroup2"], "0", proc_cgroup)
    return not any((parent / "cpu.weight").exists() for parent in (group, *group.parents) if parent.is_relative_to(mounts["cgroup2"]))


def _make_base(root: Path, controllers: list[str]) -> Path:
    """``root/kernelbench`` with ``controllers`` enabled for its children (v2: in root's and its subtree_control)."""
    base = root / _BASE
    base.mkdir(exist_ok=True)
    for where in (root, base):
        for controller in controllers:
            try:
                (where / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                pass
    return base


@functools.cache
def support() -> Support:
    """Probe once per process: make the base folders and a child, join nothing."""
    if os.environ.get("KB_CGROUPS", "1") == "0":
        return Support(reason="turned off by KB_CGROUPS=0")
    if not sys.platform.startswith("linux"):
        return Support(reason=f"cgroups need Linux, not {sys.platform}")
    mounts = _mounts()
    if "cgroup2" not in mounts:
        return Support(reason="no cgroup2 file system mounted")
    root = _own(mounts["cgroup2"], "0")
    try:
        available = (root / "cgroup.controllers").read_text().split()
        wanted = [c for c in ("memory", "pids") if c in available]
        unified = _make_base(root, wanted)
        probe = unified / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        can_freeze = (probe / "cgroup.freeze").exists() and (probe / "cgroup.kill").exists()
        children = (probe / "cgroup.controllers").read_text().split()
        probe.rmdir()
    except OSError as exc:
        return Support(reason=f"cannot make a cgroup under {root}: {exc.strerror or exc}")
    if not can_freeze:
        return Support(reason=f"{root} has no cgroup.freeze/cgroup.kill (kernel older than 5.14)")
    memory = unified if "memory" in children else None
    pids = unified if "pids" in children else None
    memory_v1 = pids_v1 = False
    for name in ("memory", "pids"):
        if (memory if name == "memory" else pids) is None and name in mounts:
            try:
                v1 = _make_base(_own(mounts[name], name), [])
            except OSError:
                continue
            if name == "memory":
                memory, memory_v1 = v1, True
            else:
                pids, pids_v1 = v1, True
    missing = [n for n, w in (("memory", memory), ("pids", pids)) if w is None]
    reason = f"no {' or '.join(missing)} controller to write" if missing else ""
    return Support(unified, memory, pids, memory_v1, pids_v1, reason)


class Cgroup:
    """One process tree's cgroup (a runner or a build step): made by :meth:`create`, joined by the process before it
    execs (:meth:`join_fds`, written from the child), removed by :meth:`close` once empty."""

    def __init__(self, where: Support, name: str, memory_max: int = 0, pids_max: int = PIDS_MAX):
        self.support = where
        self.dirs: list[Path] = []
        self.path = where.unified / name
        self.memory = where.memory / name if where.memory else None
        self.pids = where.pids / name if where.pids else None
        for folder in dict.fromkeys(p for p in (self.path, self.memory, self.pids) if p is not None):
            folder.mkdir(exist_ok=True)
            self.dirs.append(folder)
        if self.memory is not None and memory_max:
            limit = "memory.limit_in_bytes" if where.memory_v1 else "memory.max"
            (self.memory / limit).write_text(str(int(memory_max)))
            if not where.memory_v1:
                (self.memory / "memory.swap.max").exists() and (self.memory / "memory.swap.max").write_text("0")
        if self.pids is not None and pids_max:
            (self.pids / "pids.max").write_text(str(int(pids_max)))
        self.frozen = False

    @classmethod
    def create(cls, tag: str, memory_max: int = 0, pids_max: int = PIDS_MAX) -> Cgroup | None:
        """A new cgroup named for this supervisor and ``tag``; None where cgroups cannot be made here."""
        where = support()
        if not where.ok:
            return None
        _sweep(where)
        try:
            return cls(where, f"{os.getpid()}-{tag}", memory_max, pids_max)
        except OSError:
            return None

    def join_fds(self) -> list[int]:
        """Descriptors of every ``cgroup.procs`` to write the child's pid to (``b"0"``: the writer) before it execs;
        the caller closes them after the spawn."""
        return [os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for folder in self.dirs]

    def add(self, pid: int) -> None:
        """Move a running process, every thread of it, into this cgroup (one started outside it: :meth:`join_fds` is for
        a child before it execs)."""
        for folder in self.dirs:
            (folder / "cgroup.procs").write_text(str(pid))

    def members(self) -> list[int]:
        """The processes in it now."""
        try:
            return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def freeze(self, wait: float = FROZEN_WAIT_S) -> bool:
        """Freeze the whole tree; whether it was seen frozen within ``wait`` seconds."""
        (self.path / "cgroup.freeze").write_text("1")
        self.frozen = True
        return self._wait_events("frozen 1", wait)

    def thaw(self) -> None:
        if self.frozen:
            (self.path / "cgroup.freeze").write_text("0")
            self.frozen = False

    def kill(self) -> None:
        """SIGKILL every member (frozen ones too) and wait, briefly, until it is empty."""
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:
            return
        self._wait_events("populated 0", 5.0)

    def oom_killed(self) -> bool:
        """Whether the kernel killed a member for going over the memory limit."""
        if self.memory is None:
            return False
        try:
            if self.support.memory_v1:
                text = (self.memory / "memory.oom_control").read_text()
                key = "oom_kill"
            else:
                text = (self.memory / "memory.events").read_text()
                key = "oom_kill"
            counts = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
            return int(counts.get(key, "0")) > 0
        except (OSError, ValueError):
            return False

    def memory_bytes(self) -> int:
        """The tree's own memory now: anonymous pages and shared memory (its tmpfs, memfds, SysV segments), not the page
        cache of files it read (the kernel reclaims that under the limit); 0 where not counted."""
        if self.memory is None:
            return 0
        names = ("total_rss", "total_shmem") if self.support.memory_v1 else ("anon", "shmem")
        try:
            stat = dict(line.split() for line in (self.memory / "memory.stat").read_text().splitlines() if len(line.split()) == 2)
            return sum(int(stat.get(name, "0")) for name in names)
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        """Kill what is left and remove the folders."""
        self.kill()
        for folder in self.dirs:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        self.dirs = []

    def _wait_events(self, line: str, wait: float) -> bool:
        """Wait until ``cgroup.events`` holds ``line``. The kernel signals a change with POLLPRI, but at most once per
        10 ms a file: a freeze that completes within that of the thaw before it is announced late (up to 15 ms here;
        about 5 ms a stop for a PIKE candidate's time phase on the H200), so the file is also read again after waits
        that double from :data:`EVENTS_FIRST_S` to :data:`EVENTS_LONGEST_S`."""
        deadline, step = time.monotonic() + wait, EVENTS_FIRST_S
        path = self.path / "cgroup.events"
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return False
        try:
            while True:
                os.lseek(fd, 0, os.SEEK_SET)
                if line in os.read(fd, 4096).decode():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                _notice_or_timeout(fd, min(left, step))
                step = min(step * 2, EVENTS_LONGEST_S)
        finally:
            os.close(fd)


def _notice_or_timeout(fd: int, seconds: float) -> None:
    """Wait for kernfs's change notice on ``fd`` (POLLPRI: select's exceptional condition; select's timeout, unlike
    poll's, is finer than a millisecond) or ``seconds``; a descriptor past select's limit sleeps instead."""
    try:
        select.select([], [], [fd], seconds)
    except ValueError:  # fd >= FD_SETSIZE
        time.sleep(seconds)


def join(fds: list[int]) -> None:
    """In the child, before exec: move this process into the cgroup (its descendants are born there)."""
    for fd in fds:
        os.write(fd, b"0")


def _sweep(where: Support) -> None:
    """Remove the empty cgroups of supervisors that are gone (a SIGKILLed supervisor cannot remove its own)."""
    for base in dict.fromkeys(p for p in (where.unified, where.memory, where.pids) if p is not None):
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            owner = entry.name.split("-", 1)[0]
            if entry.is_dir() and owner.isdigit() and not Path(f"/proc/{owner}").exists():
                try:
                    os.rmdir(entry.path)
                except OSError:
                    pass
