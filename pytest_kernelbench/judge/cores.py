"""Where a GPU timing phase's runners run on the host: both sides on the same CPU core.

A GPU call's event window opens on an idle GPU, so it holds the host's dispatch of the call as well as its kernels: for
a 0.1 ms call, half of it. How fast a process dispatches depends on the core it landed on (why, on the H100 machines,
which are virtual, is not known), and a process stays on its core, so two plain processes asked the same call took turns at
offsets of 3-20% on `L1-12` and 2.2-3.0% on `L1-95` (the sd of the log ratio of their medians over four pairs, H100,
``benchmarks/experiments/process_offset.py``). Both bound to one core: 1.0-2.6% and 0.4-0.5% (twenty-first session,
docs/timing-fidelity.md). The judge's two runners never run at once in a timed phase (the other side is stopped or
waits on its socket), so one core serves both without either waiting.

Build steps on a GPU machine keep off the timing cores (:func:`build_cores`): their compilers would share the core a
timed call is dispatched from. A build may move its own threads back (any process may); honest compilers do not.

Only the exclusive GPU ``time`` phase binds: first calls (Triton's JIT, inductor's compile workers) keep every core, and
a CPU timing phase's threads already use them all. The supervisor binds every thread of both runners' process trees at
the phase's start and binds the candidate's again each time it stops it: a thread the candidate starts inherits the
binding, and one it moves elsewhere (any process may set its own threads' affinity) is moved back before its next
call. At the phase's end they go back to the supervisor's own cores.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
from collections.abc import Iterable, Iterator

from .cgroups import cpu_group_is_root
from .gpus import visible_entries

MIN_CORES = 4  # fewer: no core is set aside (a 2-core machine's builds and judges need both)
# A timed phase's runner threads and the supervisor's own thread run at this nice value where the judge may set it (root,
# or CAP_SYS_NICE): a CPU hog that the kernel placed on the timing core otherwise preempted a runner between its call's
# kernels finishing and its sync returning, which read as work off the call's stream and was charged to the call (the
# same matmul judged against itself beside 15 hogs on a 16-core H200 machine: 0.79x, 18 of 33 calls "off-stream").
# Where the kernel groups processes by session for the scheduler (autogroups: /proc/sys/kernel/sched_autogroup_enabled,
# on by default in many distributions' kernels), a nice value counts only inside its session, and each runner and
# supervisor has a session of its own: two busy processes on one core, one at -20, shared it half and half here (2-core
# machine, 2026-12-01) until the session's own nice value (/proc/PID/autogroup) was set too (98.4%).
TIMING_NICE = -20
AUTOGROUP_SWITCH = "/proc/sys/kernel/sched_autogroup_enabled"
CPU_DIR = "/sys/devices/system/cpu"  # the kernel's CPU topology (SMT siblings)


def allowed() -> set[int]:
    """The cores this process may run on (what runners go back to after a timed phase)."""
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()


def physical_cores(cores: set[int], cpu_dir: str = CPU_DIR) -> list[set[int]]:
    """``cores`` grouped by the physical core they share (SMT siblings, from the kernel's topology files), the group of
    the highest core first; each core alone where the topology is not known."""
    groups: dict[frozenset[int], set[int]] = {}
    for core in sorted(cores, reverse=True):
        groups.setdefault(siblings(core, cpu_dir), set()).add(core)
    return list(groups.values())


def siblings(core: int, cpu_dir: str = CPU_DIR) -> frozenset[int]:
    """The logical cores of ``core``'s physical core, itself included (``{core}`` where the kernel does not say)."""
    for name in ("core_cpus_list", "thread_siblings_list"):
        with contextlib.suppress(OSError, ValueError):
            found = _cpu_list(open(os.path.join(cpu_dir, f"cpu{core}", "topology", name)).read())
            if core in found:
                return frozenset(found)
    return frozenset({core})


def _cpu_list(text: str) -> set[int]:
    """The kernel's CPU list format: ``0-3,8,10-11``."""
    found: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def timing_core(device_index: int, cores: set[int] | None = None, cpu_dir: str = CPU_DIR) -> int | None:
    """The core a GPU's timed phases run on: one per device, each on a physical core of its own, counted from the last
    allowed core (the first ones are where most other work starts). None where fewer than MIN_CORES are allowed, or off
    Linux. Two GPUs' timing cores on SMT siblings would dispatch their timed calls from one physical core."""
    cores = allowed() if cores is None else cores
    if len(cores) < MIN_CORES:
        return None
    groups = physical_cores(cores, cpu_dir)
    return max(groups[device_index % len(groups)])


def visible_gpus(environ: dict[str, str] | None = None, dev: str = "/dev") -> int:
    """How many GPUs this process may use, without initialising CUDA (a build step's supervisor needs no driver):
    ``CUDA_VISIBLE_DEVICES``'s entries up to the first hidden one, else the ``nvidiaN`` device files."""
    entries = visible_entries(os.environ if environ is None else environ)
    return len(glob.glob(os.path.join(dev, "nvidia[0-9]*"))) if entries is None else len(entries)


def build_cores(devices: int, cores: set[int] | None = None, cpu_dir: str = CPU_DIR) -> set[int] | None:
    """The cores a GPU machine's build steps run on: every allowed core but the ``devices`` GPUs' timing cores and their
    SMT siblings. On one H200 of 16 cores, 14 compilers at a time shared the timing core with the timed calls, whose
    dispatch then varied enough that most level-3 timings ran to ``max_time`` (docs/performance.md). None where no core
    is set aside."""
    cores = allowed() if cores is None else cores
    timing = {core for core in (timing_core(i, cores, cpu_dir) for i in range(devices)) if core is not None}
    rest = cores - {sibling for core in timing for sibling in siblings(core, cpu_dir)}
    return rest if timing and rest else None


def threads(pids: Iterable[int]) -> Iterator[int]:
    """Every thread of the processes ``pids`` (a process that has ended is skipped)."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except (FileNotFoundError, ProcessLookupError):
            continue
        yield from map(int, tids)


def renice(pids: Iterable[int], nice: int, sessions: bool = True) -> int:
    """Set every thread of the processes ``pids`` to ``nice``, and where the kernel has autogroups (and ``sessions``)
    their sessions too: how many threads were set (0 where this process may not raise a priority). Threads that end
    meanwhile are skipped."""
    pids, done = list(pids), 0
    for tid in threads(pids):
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except PermissionError:
            return done  # not ours to raise: none will be
        except OSError:  # the thread ended
            continue
        done += 1
    if sessions and autogroups():
        for pid in pids:
            with contextlib.suppress(OSError):  # the process ended, or its session is not ours to raise
                with open(f"/proc/{pid}/autogroup", "w") as session:
                    session.write(str(nice))
    return done


@functools.cache
def autogroups() -> bool:
    """Whether the kernel schedules this process's sessions as groups (then a nice value counts only inside its
    session): its autogroups switched on, and this process in the root CPU group (in any other, its cgroup groups it;
    the H200 machines: switched on, and each judge under a cgroup of the host's with the ``cpu`` controller)."""
    try:
        with open(AUTOGROUP_SWITCH) as switch:
            on = switch.read().strip() == "1"
    except OSError:
        return False
    return on and cpu_group_is_root()


def bind(pids: Iterable[int], cores: set[int]) -> tuple[int, int]:
    """Bind every thread of the processes ``pids`` to ``cores``: (threads bound, of them how many were elsewhere: bound
    to other cores, by the candidate or since the last binding). Threads that end meanwhile are skipped."""
    bound = moved = 0
    for tid in threads(pids):
        with contextlib.suppress(OSError):  # the thread ended (ProcessLookupError), or is not ours to bind
            if os.sched_getaffinity(tid) != cores:
                os.sched_setaffinity(tid, cores)
                moved += 1
            bound += 1
    return bound, moved
