"""A fork server for supervisors: import torch once, fork a clean child per evaluation.

A fresh interpreter per evaluation costs ~2 s of ``import torch`` on a CPU box, more than the
judging itself on small problems. The server is a process that imports torch and the
supervisor's modules (nothing runs on a device there: CUDA is not initialised, no thread pool
is started, so a fork is as clean as a fresh start) and then forks one child per request.
The child is a supervisor exactly like ``python -m pytest_kernelbench.judge.supervisor SPEC``:
its own session and process group, stdout and stderr to its log file, and SIGKILL when the
server dies. Supervisors run no candidate code (that runs in the runners they start, each a
fresh process), so nothing a candidate does reaches the server or the next evaluation.

Protocol (one server per environment, driven from any thread of the parent):

    parent -> server   ``{"id": N, "spec": ..., "log": ..., "cwd": ..., "limit": BYTES}\\n``
    server -> parent   ``started N PID`` | ``failed N MESSAGE`` | ``exited PID CODE``

``CODE`` is as ``Popen.returncode``: negative for a signal. The server exits when its stdin
closes (the parent is gone, however it died) and kills the children it still has.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .procs import child_setup, exit_after, reap

# What a forked child may run besides a supervisor: the footprint measurement before a judge (judge/footprint.py).
ENTRIES = ("pytest_kernelbench.judge.supervisor.evaluation", "pytest_kernelbench.judge.footprint")
PRELOAD = ("torch", "filelock", *ENTRIES, "pytest_kernelbench.build.cache", "pytest_kernelbench.build.pch",
           "pytest_kernelbench.candidates", "torch.profiler")


class ForkedProcess:
    """The parent's handle on one forked supervisor, shaped like the parts of ``Popen`` evaluate uses."""

    def __init__(self, server: ForkServer, pid: int):
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["forked supervisor", str(self.pid)], timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode


class ForkServerError(RuntimeError):
    pass


class ForkServer:
    def __init__(self, env: dict[str, str]):
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_kernelbench.judge.forkserver"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # Ctrl-C in the terminal goes to pytest, which stops its evaluations itself
            bufsize=0,
        )
        self.pid = self._proc.pid
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._next_id = 0
        self._started: dict[int, int | str] = {}  # request id -> pid, or the error message
        self._exits: dict[int, int] = {}
        self._live: set[int] = set()
        self._dead = False
        threading.Thread(target=self._read, name="kb-forkserver-reader", daemon=True).start()

    @property
    def alive(self) -> bool:
        return not self._dead and self._proc.poll() is None

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            kind, _, rest = raw.decode("utf-8", "replace").rstrip("\n").partition(" ")
            with self._changed:
                if kind == "started":
                    rid, pid = rest.split()
                    self._started[int(rid)] = int(pid)
                    self._live.add(int(pid))
                elif kind == "failed":
                    rid, _, message = rest.partition(" ")
                    self._started[int(rid)] = message or "the fork server could not start the supervisor"
                elif kind == "exited":
                    pid, code = rest.split()
                    self._exits[int(pid)] = int(code)
                    self._live.discard(int(pid))
                self._changed.notify_all()
        with self._changed:  # the server is gone: its children got SIGKILL (PR_SET_PDEATHSIG)
            self._dead = True
            for pid in self._live:
                self._exits.setdefault(pid, -int(signal.SIGKILL))
            self._live.clear()
            self._changed.notify_all()

    def spawn(self, spec_path: str, log_path: str, cwd: str, limit_bytes: int, timeout: float = 600.0, entry: str = "") -> ForkedProcess:
        """Fork a supervisor for ``spec_path`` (or another of :data:`ENTRIES`'s ``main``); the first call waits for the
        server's imports."""
        with self._changed:
            if self._dead:
                raise ForkServerError("the fork server has exited")
            rid = self._next_id
            self._next_id += 1
            request = {"id": rid, "spec": spec_path, "log": log_path, "cwd": cwd, "limit": limit_bytes, "entry": entry}
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
            except OSError as exc:
                raise ForkServerError(f"the fork server is gone: {exc}") from None
            if not self._changed.wait_for(lambda: rid in self._started or self._dead, timeout):
                raise ForkServerError(f"the fork server did not answer in {timeout:g} s")
            answer = self._started.pop(rid, "the fork server has exited")
        if isinstance(answer, str):
            raise ForkServerError(answer)
        return ForkedProcess(self, answer)

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._live)

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            return self._exits.pop(pid, None)

    def close(self) -> None:
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            self._proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()


_servers: dict[tuple[tuple[str, str], ...], ForkServer] = {}
_servers_lock = threading.Lock()


def server_for(env: dict[str, str]) -> ForkServer:
    """The running server for this environment, started (or restarted) on first use."""
    key = tuple(sorted(env.items()))
    with _servers_lock:
        server = _servers.get(key)
        if server is None or not server.alive:
            for old_key, old in list(_servers.items()):  # one server per environment in use, not per one ever seen
                if old_key != key and not old.busy:
                    del _servers[old_key]
                    old.close()
            server = _servers[key] = ForkServer(env)
        return server


def close_all() -> None:
    with _servers_lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()


# ---------------------------------------------------------------- the server process




def _fork_supervisor(request: dict[str, Any], reply_fd: int, server_pid: int) -> int:
    setup = child_setup(request["limit"], server_pid)
    pid = os.fork()
    if pid:
        return pid
    exit_after(lambda: _become_supervisor(request, reply_fd, setup))  # the child: never back into the server's loop


def _become_supervisor(request: dict[str, Any], reply_fd: int, setup: Callable[[], None]) -> int:
    os.setsid()
    setup()
    os.close(reply_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    os.chdir(request["cwd"])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    import importlib

    entry = request.get("entry") or ENTRIES[0]
    if entry not in ENTRIES:
        raise ValueError(f"not an entry of the fork server: {entry}")
    sys.argv = [entry, request["spec"]]
    return importlib.import_module(entry).main(sys.argv)


_ZYGOTE: list = []  # the server's runner zygote: its process and our end of its request socket


def _start_zygote() -> tuple:
    """The runner zygote (judge/zygote.py) for the supervisors forked here, where a sandbox can hold its runners
    (bwrap, as root); its request socket's fd is in their environment. Empty where there is none."""
    from . import zygote
    from .sandbox import SCRATCH, bwrap_path, runner_env

    if os.environ.get(ZYGOTE_ENV, "1") == "0" or os.geteuid() != 0 or bwrap_path() is None:
        return ()
    root = str(Path(__file__).resolve().parents[2])
    try:
        proc, sock = zygote.start(runner_env(dict(os.environ), SCRATCH / "home", root, {}))
    except OSError:
        return ()
    os.environ[zygote.FD_ENV] = str(sock.fileno())
    return proc, sock


ZYGOTE_ENV = "KB_RUNNER_ZYGOTE"  # "0": every candidate runner is a fresh interpreter (a benchmark's baseline)
WARM_META_ENV = "KB_WARM_META"  # "0": the judges this server forks never size inputs on the meta device (CPU judges)
FUSED_ENV = "KB_PRELOAD_FUSED"  # "1": the judges this server forks judge on a GPU (triton and judge/fused.py's kernels)


def warm_meta() -> None:
    """A supervisor sizes a problem's inputs on the meta device (``input_bytes``), and a first random tensor there
    imports torch's decompositions and sympy: 0.3 s with warm caches, 3 s on a fresh H100 machine, in every
    supervisor. Done once here instead; nothing runs on a device and no thread starts."""
    try:
        import torch

        with torch.device("meta"):
            torch.randn(2, 2), torch.randint(0, 2, (2,)), torch.arange(2), torch.empty(2).normal_()
    except Exception:  # noqa: BLE001 - only a cost later
        pass


def preload_fused() -> None:
    """A GPU supervisor seals and compares big outputs with judge/fused.py's Triton kernels: triton's import (0.2-0.3 s)
    and their definitions, done once here instead of in every supervisor. Nothing compiles and no device is touched (a
    child forked after CUDA started could not use it): that, and the cache folder, are the supervisor's first use."""
    with contextlib.suppress(Exception):  # only a cost later
        from ..config import default_cache_dir
        from .fused import defined

        defined()
        default_cache_dir()  # the folder they compile into: its module imported (its value is the supervisor's to set)


def serve() -> None:
    """The server's loop: read requests on stdin, fork, report starts and exits on stdout."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # anything an import prints must not corrupt the protocol
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing optional module only costs its import later
            pass
    _ZYGOTE.extend(_start_zygote())  # its imports run beside ours; held here, its socket open for every child
    if os.environ.get(WARM_META_ENV, "1") != "0":
        warm_meta()
    if os.environ.get(FUSED_ENV) == "1":
        preload_fused()

    def reply(line: str) -> None:
        os.write(reply_fd, (line + "\n").encode())

    server_pid = os.getpid()
    children: set[int] = set()
    pending = b""
    open_input = True
    while open_input or children:
        ready, _, _ = select.select([0] if open_input else [], [], [], 0.02)
        if ready:
            data = os.read(0, 1 << 16)
            if not data:
                open_input = False  # the parent is gone: take the children with us
                for pid in children:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = None
                try:
                    request = json.loads(line)
                    pid = _fork_supervisor(request, reply_fd, server_pid)
                except Exception as exc:  # noqa: BLE001 - the parent gets the reason
                    reply(f"failed {request.get('id', -1) if isinstance(request, dict) else -1} {exc}".replace("\n", " "))
                    continue
                children.add(pid)
                reply(f"started {request['id']} {pid}")
        for pid, code in reap(children):
            reply(f"exited {pid} {code}")


if __name__ == "__main__":
    serve()
    os._exit(0)
