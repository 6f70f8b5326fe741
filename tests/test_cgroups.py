"""Containment by the kernel's accounting (judge/cgroups.py): a process tree in its own cgroup is frozen whole (orphans
reparented away from it too), its shared memory counted, its tasks bounded, and killed whole."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_kernelbench.judge import cgroups

SUPPORT = cgroups.support()
pytestmark = pytest.mark.skipif(not SUPPORT.ok, reason=f"cgroups cannot be made here: {SUPPORT.reason}")

# a runner-like parent whose two helpers are orphaned at once (fork, fork, exit): no process tree leads to them
_ORPHANS = r"""
import os, sys, time
for _ in range(2):
    if os.fork() == 0:
        if os.fork() == 0:
            while True:
                pass
        os._exit(0)
    os.wait()
time.sleep(60)
"""


def _start(cgroup: cgroups.Cgroup, code: str) -> subprocess.Popen:
    fds = cgroup.join_fds()
    try:
        return subprocess.Popen([sys.executable, "-c", code], preexec_fn=lambda: cgroups.join(fds), start_new_session=True)
    finally:
        for fd in fds:
            os.close(fd)


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _members_after(cgroup: cgroups.Cgroup, count: int, wait: float = 10.0) -> list[int]:
    deadline = time.monotonic() + wait
    while len(cgroup.members()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return cgroup.members()


def test_a_frozen_cgroup_holds_orphans_that_no_process_tree_reaches():
    cgroup = cgroups.Cgroup.create("test-orphans")
    assert cgroup is not None
    try:
        parent = _start(cgroup, _ORPHANS)
        _members_after(cgroup, 3)
        time.sleep(1.0)  # the middle processes have exited: what is left is the parent and the two orphans
        members = cgroup.members()
        orphans = [pid for pid in members if pid != parent.pid]
        assert len(orphans) == 2, members
        from pytest_kernelbench.judge.procs import descendants

        assert not set(orphans) & set(descendants(parent.pid))  # reparented: a walk of the tree misses them
        assert cgroup.freeze()
        before = {pid: _cpu_ticks(pid) for pid in orphans}
        time.sleep(0.5)
        assert {pid: _cpu_ticks(pid) for pid in orphans} == before  # not a tick while frozen
        cgroup.thaw()
        time.sleep(0.5)
        assert any(_cpu_ticks(pid) > before[pid] for pid in orphans)  # and they run again once thawed
        cgroup.kill()
        assert cgroup.members() == []
        parent.wait(5)
    finally:
        cgroup.close()


def test_shared_memory_is_counted_and_the_limit_is_the_candidates_outcome():
    if SUPPORT.memory is None:
        pytest.skip("no memory controller to write here")
    cgroup = cgroups.Cgroup.create("test-memory", memory_max=200 << 20)
    try:
        # 400 MiB in a memfd (like a tmpfs file, shared memory): no page cache to reclaim, so the limit kills
        proc = _start(cgroup, "import os, time\nfd = os.memfd_create('x')\nfor _ in range(400):\n    os.write(fd, b'x' * (1 << 20))\n"
                              "time.sleep(30)")  # fmt: skip
        assert proc.wait(30) == -9
        assert cgroup.oom_killed()
    finally:
        cgroup.close()


def test_memory_bytes_counts_shared_memory_but_not_the_buffers_of_others():
    if SUPPORT.memory is None:
        pytest.skip("no memory controller to write here")
    cgroup = cgroups.Cgroup.create("test-shmem")
    try:
        proc = _start(cgroup, "import os, time\nfd = os.memfd_create('x')\nos.write(fd, b'x' * (64 << 20))\nprint(flush=True)\n"
                              "time.sleep(30)")  # fmt: skip
        deadline = time.monotonic() + 20
        while cgroup.memory_bytes() < 64 << 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cgroup.memory_bytes() >= 64 << 20
        proc.kill()
    finally:
        cgroup.close()


def test_pids_max_bounds_a_fork_bomb():
    if SUPPORT.pids is None:
        pytest.skip("no pids controller to write here")
    cgroup = cgroups.Cgroup.create("test-pids", pids_max=16)
    try:
        code = ("import os, sys\nmade = 0\nfor _ in range(64):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
                "    if pid == 0:\n        os.close(1); os.close(2)\n        import time; time.sleep(30)\n"
                "    made += 1\nprint(made, flush=True)\nos._exit(0)")  # fmt: skip
        fds = cgroup.join_fds()
        try:
            proc = subprocess.run([sys.executable, "-c", code], preexec_fn=lambda: cgroups.join(fds), capture_output=True, text=True,
                                  timeout=60)  # fmt: skip
        finally:
            for fd in fds:
                os.close(fd)
        assert 0 < int(proc.stdout.split()[0]) < 16  # the children sleep on, without the pipe: no wait for them here
    finally:
        cgroup.close()
    assert not any(folder.exists() for folder in cgroup.dirs)


def test_the_judges_cgroups_stay_inside_its_own():
    """Below this process's cgroup in every hierarchy: a candidate never leaves the limits the host set for the judge."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, names, path = line.split(":", 2)
        own["0" if number == "0" else names] = path
    assert str(SUPPORT.unified).endswith(own["0"].rstrip("/") + "/kernelbench")
    if SUPPORT.memory_v1:
        assert str(SUPPORT.memory).endswith(own["memory"].rstrip("/") + "/kernelbench")


def test_a_freeze_that_does_not_finish_is_the_candidates_failure_not_a_stopped_tree():
    """A tree whose cgroup is not seen frozen (a task held inside the kernel) may still run while the reference is
    timed: the side says so (the supervisor makes it the candidate's failure) instead of counting it stopped."""
    from pytest_kernelbench.judge.supervisor.sides import Side, StillRunning

    class Unfreezable:
        frozen = False
        thawed = 0

        def freeze(self):
            self.frozen = True
            return False

        def thaw(self):
            self.thawed += 1

    class Running:
        pid, cgroup = os.getpid(), Unfreezable()

        def poll(self):
            return None

    side = Side("candidate", channel=None, process=Running(), log=Path(os.devnull))
    with pytest.raises(StillRunning, match="still running .* after their cgroup was frozen"):
        side.freeze()
    side.thaw()  # thawed as any frozen side, so a later kill finds it runnable
    assert Running.cgroup.thawed == 1 and not side.frozen


def test_a_running_process_moved_into_a_cgroup_with_its_threads():
    """Cgroup.add: a process started outside (the reference's runner under KB_REFERENCE_CGROUP=1) moved in whole."""
    code = "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\ntime.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    cgroup = cgroups.Cgroup.create("moved")
    assert cgroup is not None
    try:
        time.sleep(0.3)  # its second thread started
        cgroup.add(proc.pid)
        assert cgroup.members() == [proc.pid]
        threads = (cgroup.path / "cgroup.threads").read_text().split() if (cgroup.path / "cgroup.threads").exists() else None
        assert threads is None or len(threads) >= 2  # every thread went with it (cgroup v2 lists them)
    finally:
        cgroup.close()
        proc.wait(timeout=10)
    assert proc.returncode == -9  # killed with its cgroup


def test_a_wait_for_cgroup_events_reads_the_file_again_without_the_kernels_late_notice(tmp_path, monkeypatch):
    """The kernel announces a change of cgroup.events at most once per 10 ms, so a freeze that completes soon after the
    thaw before it is announced late (15 ms here, with only the notice waited for): the wait reads the file again after
    waits that double from EVENTS_FIRST_S to EVENTS_LONGEST_S, notice or none. Here no notice ever comes (a plain file)."""
    events = tmp_path / "cgroup.events"
    events.write_text("populated 1\nfrozen 0\n")
    group = object.__new__(cgroups.Cgroup)
    group.path = tmp_path
    waits: list[float] = []

    def no_notice(fd, seconds):
        waits.append(seconds)
        if len(waits) == 8:
            events.write_text("populated 1\nfrozen 1\n")

    monkeypatch.setattr(cgroups, "_notice_or_timeout", no_notice)
    assert group._wait_events("frozen 1", 5.0)
    first, longest = cgroups.EVENTS_FIRST_S, cgroups.EVENTS_LONGEST_S
    assert waits == [min(first * 2**i, longest) for i in range(8)] and waits[-1] == longest
    waits.clear()
    assert not group._wait_events("frozen 0", 0.02) and waits and max(waits) <= longest  # a deadline still ends it


def test_a_notice_wait_on_a_descriptor_past_selects_limit_sleeps_instead():
    """select() takes descriptors below FD_SETSIZE (1024) only; a supervisor holding more waits out the time instead."""
    import resource

    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] <= 1500:
        pytest.skip("this process may not open descriptor 1500")
    read, write = os.pipe()
    high = os.dup2(read, 1500)
    try:
        started = time.monotonic()
        cgroups._notice_or_timeout(high, 0.002)  # select() itself raises ValueError here
        assert time.monotonic() - started >= 0.002
    finally:
        for fd in (read, write, high):
            os.close(fd)
