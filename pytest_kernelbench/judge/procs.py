"""Process helpers shared by the judge's processes (controller side, fork server, supervisor, sandbox): a process
tree's members, stopping and continuing them as one, killing them, their CPU time and memory, and what a new child runs
first (die with the parent, a memory bound). Nothing here knows about evaluations.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn


def child_setup(limit_bytes: int, parent: int):
    """What a new supervisor (or runner) runs first, before exec or (forked) its code: die with the parent,
    and bound host memory if asked.

    A process whose parent is killed (SIGKILL, an OOM kill) would otherwise live on in its own
    session, holding the device lock while its candidate hangs. Linux delivers SIGKILL to it
    when the parent dies (PR_SET_PDEATHSIG); the supervisor also watches for it (die_with_parent).
    Everything is looked up here, in the parent: between fork and exec the child must not
    import (another thread may hold the import lock at fork time).
    """
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None
    setrlimit = None
    if limit_bytes:
        import resource

        setrlimit, rlimit_as = resource.setrlimit, resource.RLIMIT_AS
    getppid, exit_now, sigkill = os.getppid, os._exit, int(signal.SIGKILL)

    def apply() -> None:
        if prctl is not None:
            prctl(1, sigkill)  # PR_SET_PDEATHSIG
            if getppid() != parent:  # the parent died before that took effect
                exit_now(1)
        if setrlimit is not None:
            setrlimit(rlimit_as, (limit_bytes, limit_bytes))

    return apply


def tree_rss(pid: int) -> int:
    """Resident memory of ``pid``'s whole process tree, less the shared buffers the supervisor made."""
    return sum(_own_rss(q) for q in [pid, *descendants(pid)])


def _ppids() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parents[int(entry)] = int(_stat_fields(entry)[1])
        except OSError:
            continue
    return parents


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: through /proc's children files (fast), else a scan of /proc."""
    try:
        return _walk_children(pid)
    except OSError:
        pass
    parents = _ppids()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _walk_children(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        found += kids
        todo += kids
    return found


def exit_after(run: Callable[[], int]) -> NoReturn:
    """The end of a forked child (a supervisor, a runner): ``run()``; an exception's traceback to its log; then
    ``os._exit`` with what ``run`` returned (1 after an exception), skipping the interpreter's teardown, which candidate
    threads or atexit hooks could hang."""
    code = 1
    try:
        code = run()
    except BaseException:  # noqa: BLE001 - into the log; the parent sees the exit code
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def reap(children: set[int]) -> list[tuple[int, int]]:
    """Without waiting: the children that have exited, each as (pid, exit code as ``Popen.returncode`` gives it), taken
    out of ``children``. A server's loop (the fork server, the runner zygote) calls it between requests."""
    done = []
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            break
        if pid == 0:
            break
        children.discard(pid)
        done.append((pid, os.waitstatus_to_exitcode(status)))
    return done


def strays(runners: set[int], trusted: set[int]) -> list[int]:
    """This process's children (it is their subreaper, :func:`become_subreaper`) that a runner left behind: each one in
    a session other than ours and than each ``trusted`` runner's (a runner starts a session of its own; a process can only
    leave its session for a new one of its own, never join ours), less the ``runners`` themselves. Where no cgroup holds
    a candidate's tree, these are the orphans of its fork/exit chains, reparented here."""
    own = os.getsid(0)
    found = []
    for pid in _children(os.getpid()):
        if pid in runners or pid in trusted:
            continue
        try:
            session = os.getsid(pid)
        except OSError:
            continue
        if session != own and session not in trusted:
            found.append(pid)
    return found


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (none when it is gone), from /proc's children files."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except _GONE:
        return kids
    for tid in tasks:
        try:
            kids += [int(k) for k in _read(f"/proc/{pid}/task/{tid}/children").split()]
        except _GONE:
            continue
    return kids


def kill_tree(pid: int, rounds: int = 20) -> None:
    """SIGKILL ``pid`` and its descendants until none is left (a fork racing the kill is caught next round)."""
    for _ in range(rounds):
        victims = [pid, *descendants(pid)]
        alive = False
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
                alive = True
            except (ProcessLookupError, PermissionError):
                pass
        if not alive or not descendants(pid):
            return
        time.sleep(0.01)


_STOPPED = (b"T", b"t", b"Z", b"X")


class ProcessTree:
    """A process and its descendants, stopped and continued as one (SIGSTOP cannot be caught).

    Members are held by pidfd where the OS has them (Linux 5.3+), so a signal never reaches a pid the
    kernel has given to another process since; the members one :meth:`freeze` found are signalled first
    by the next, and one pass over their threads then both waits for each to stop and reads the children
    it has forked (read once the thread is stopped, a children list is final: a stopped thread cannot
    fork). A stop took 2.2 ms a call on the H100 before (two walks of the tree, then polls of every thread);
    on a 2-core VM, a 31-thread process: 1.6 ms before, 0.85 ms so (docs/performance.md)."""

    def __init__(self, root: int):
        self.root = root
        self.members: dict[int, int | None] = {}  # pid -> its pidfd (None: no pidfd, signalled by pid)
        self._adoptions = 0  # how many pids it has adopted

    def freeze(self, wait: float = 1.0, strays: Sequence[int] = ()) -> list[int]:
        """Stop every member (and adopt ``strays``: processes of this tree found elsewhere, :func:`strays`) and wait
        (at most ``wait`` seconds) until every thread of theirs has stopped: a
        signal takes effect when its target next leaves the kernel, so a thread in the middle of a kernel
        launch finishes that launch first. Returns the pids stopped."""
        self._adopt(self.root)
        for pid in strays:
            self._adopt(pid)
        for pid in list(self.members):
            self._signal(pid, signal.SIGSTOP)
        deadline = time.monotonic() + wait
        settled: set[tuple[int, str]] = set()  # (pid, tid) seen stopped, its children read (and stopped)
        while True:
            known = self._adoptions
            busy = [pid for pid in list(self.members) if not self._settle(pid, settled)]
            if (not busy and self._adoptions == known) or time.monotonic() > deadline:  # a pass found nothing new
                return list(self.members)
            if busy:
                time.sleep(0.0001)

    def thaw(self) -> None:
        for pid in list(self.members):
            self._signal(pid, signal.SIGCONT)

    def close(self) -> None:
        for fd in self.members.values():
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.members.clear()

    def _settle(self, pid: int, settled: set[tuple[int, str]]) -> bool:
        """Whether every thread of ``pid`` is stopped; the children of each newly stopped one are stopped too."""
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except _GONE:
            return True
        done = True
        for tid in tasks:
            if (pid, tid) in settled:
                continue
            try:
                stat = _read(f"/proc/{pid}/task/{tid}/stat")
                if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in _STOPPED:
                    done = False
                    continue
                kids = [int(k) for k in _read(f"/proc/{pid}/task/{tid}/children").split()]
            except _GONE:
                continue
            settled.add((pid, tid))
            for kid in kids:
                if kid not in self.members and self._adopt(kid):
                    self._signal(kid, signal.SIGSTOP)
        return done

    def _adopt(self, pid: int) -> bool:
        if pid in self.members:
            return True
        try:
            self.members[pid] = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
        except ProcessLookupError:
            return False
        except OSError:  # a kernel without pidfds
            self.members[pid] = None
        self._adoptions += 1
        return True

    def _signal(self, pid: int, sig: int) -> None:
        fd = self.members.get(pid)
        try:
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            if pid != self.root:  # gone: forget it (the root stays ours until it is reaped)
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self.members.pop(pid, None)


# A /proc entry of a task that ended while it was read: gone before the open (FileNotFoundError) or between the open and
# the read (ESRCH: ProcessLookupError). A candidate's tree forks and ends tasks as it likes; either is "not there".
_GONE = (FileNotFoundError, ProcessLookupError)


def _read(path: str) -> bytes:
    """A small /proc file in three system calls (``open()`` builds a buffered file object: several times slower)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def freeze_tree(pid: int, wait: float = 1.0) -> list[int]:
    """Stop ``pid`` and every descendant (:meth:`ProcessTree.freeze`); returns what to :func:`thaw`."""
    tree = ProcessTree(pid)
    try:
        return tree.freeze(wait)
    finally:
        tree.close()


def thaw(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) spent so far by ``pid``'s live process tree, and by the children it reaped."""
    return sum(_own_cpu_seconds(q) for q in [pid, *descendants(pid)])


def _own_cpu_seconds(pid: int) -> float:
    try:
        fields = _stat_fields(str(pid))
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    except (OSError, IndexError, ValueError):
        return 0.0


def _stat_fields(pid: str) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces and brackets): state first."""
    stat = _read(f"/proc/{pid}/stat")
    return stat[stat.rfind(b")") + 2 :].split()


def _own_rss(pid: int) -> int:
    rss = shmem = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("RssShmem:"):
                shmem = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return max(rss - shmem, 0)


def become_subreaper() -> None:
    """Orphans of our children become our children (not init's), so ``kill_tree`` finds them (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def die_with_parent(parent: int) -> None:
    """Stop (and take our children along) once the process that started us is gone."""
    import threading

    sleep, getppid = time.sleep, os.getppid

    def watch() -> None:
        while getppid() == parent:
            sleep(0.5)
        kill_children()
        os._exit(1)

    threading.Thread(target=watch, name="kb-parent-watch", daemon=True).start()


def kill_children() -> None:
    """Kill every child of this process with its whole tree."""
    me = os.getpid()
    for child, parent in _ppids().items():
        if parent == me:
            kill_tree(child)


class LogPipe:
    """A child's stdout and stderr, read by a thread of ours through a pipe: the child never holds a file of the
    judge's (one it could grow to fill the disk, or rewrite), and what is kept is bounded: the last ``keep`` bytes."""

    def __init__(self, keep: int = 1 << 20):
        import threading

        self.keep = keep
        self.total = 0
        self._tail = bytearray()
        self._lock = threading.Lock()
        self.read_fd, self.write_fd = os.pipe()
        self._thread = threading.Thread(target=self._drain, name="kb-log-pipe", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """The child has its end: ours is closed, so that the pipe ends when the child's tree is gone."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def text(self, limit: int) -> str:
        """The last ``limit`` bytes, saying so when there was more."""
        with self._lock:
            data, total = bytes(self._tail[-limit:]), self.total
        text = data.decode("utf-8", errors="replace")
        return f"[log truncated: last {len(data)} of {total} bytes]\n" + text if total > len(data) else text

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            with self._lock:
                self.total += len(chunk)
                self._tail += chunk
                if len(self._tail) > 2 * self.keep:
                    del self._tail[: len(self._tail) - self.keep]
        os.close(self.read_fd)

