"""A zygote for sandboxed runners: import torch once, fork each candidate runner into a bwrap sandbox of its own.

A candidate's runner (and its build step) was a fresh interpreter started by bwrap (sandbox.py), and its ``import torch``
is about 2.4 CPU-seconds on a small machine: most of a small problem's judging. The zygote is a process that imports torch
and the runner's modules once, with the runner's environment only (``sandbox.runner_env``'s allowlist: no credential ever
enters its memory), runs nothing else, and forks one runner per request; each runner moves itself into a sandbox that
bwrap set up for it alone:

1. the supervisor starts bwrap with the runner's mounts, namespaces and cgroup, exactly as for a fresh runner, but with a
   holder for its command (``sh -c 'echo ready; exec sleep infinity'``); it reads bwrap's ``--info-fd`` (the sandbox's
   first process) and the holder's "ready" (every mount is in place), and opens that process's namespaces and root;
2. it sends the zygote one message: the environment, the scratch folder, and descriptors (a reply socket, the runner's
   socket, its log pipe, its cgroup's ``cgroup.procs``, the namespaces and the root);
3. the zygote forks a child, which joins the sandbox's PID namespace and forks the runner; the runner joins the cgroup
   and then the sandbox's other namespaces, chroots to its root, starts a session, drops its groups, every capability
   (the bounding set too) and sets no_new_privs, as ``bwrap --cap-drop ALL --new-session`` does, keeps no descriptor
   but its socket and log, and serves the supervisor as a fresh runner would;
4. the child says ``started PID`` on the reply socket and, when the runner exits, ``exited CODE``.

Killing the holder's bwrap ends the sandbox's PID namespace, so the runner and everything it started go with it; the
cgroup holds them all (freeze, memory, kill). Used only where that cgroup exists and bwrap needs no user namespace
(root); elsewhere, or when any step fails before the runner starts, the runner is a fresh interpreter. Requests reach
the zygote through a socket that only its fork server's children inherit: no path a sandbox could find.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import cgroups
from .procs import LogPipe, exit_after, kill_tree, reap, tree_rss
from .sandbox import Mounts, SandboxInfo, bwrap_command, first_to_kill, overlay_copies, preexec

FD_ENV = "KB_RUNNER_ZYGOTE_FD"  # in a supervisor's environment: its end of the zygote's request socket
NAMESPACES = ("cgroup", "ipc", "uts", "net", "mnt")  # joined by the runner; the PID namespace by its parent
HOLDER = ["sh", "-c", "echo ready && exec sleep infinity"]
# Not torch.utils.cpp_extension: on a CUDA build its import marks every later fork "bad" for CUDA (checked at start).
PRELOAD = ("torch", "pytest_kernelbench.judge.runner")
_MAX_MESSAGE = 1 << 20


class ZygoteUnavailable(RuntimeError):
    """No runner from the zygote this time: the caller starts a fresh interpreter instead."""


# ------------------------------------------------------------------ the fork server's side: start it


def start(env: dict[str, str]) -> tuple[subprocess.Popen, socket.socket]:
    """Start a zygote with ``env`` (a runner's environment); ours is the end of its request socket to hand down."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "pytest_kernelbench.judge.zygote", str(theirs.fileno()), str(os.getpid())],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                pass_fds=[theirs.fileno()], start_new_session=True, cwd="/")  # fmt: skip
    finally:
        theirs.close()
    return proc, mine


# ------------------------------------------------------------------ the supervisor's side: a runner from it


class ZygoteRunner:
    """A candidate's runner forked from the zygote into a sandbox of its own; shaped like ``sandbox.RunnerProcess``.
    Exit codes as bwrap reports them (a signal N: 128 + N)."""

    def __init__(self, info: SandboxInfo, *, env: dict[str, str], base_env: dict[str, str], mounts: Mounts, work: Path,
                 scratch: Path, pass_fd: int, cgroup: cgroups.Cgroup, wait_s: float):  # fmt: skip
        self.info, self.cgroup, self.scratch = info, cgroup, scratch
        self.pid = -1
        self._code: int | None = None
        self._pending = b""
        self._holder: subprocess.Popen | None = None
        self._reply: socket.socket | None = None
        self.log = LogPipe()
        try:
            self._start(env, base_env, mounts, work, pass_fd, wait_s)
        except BaseException:
            self._discard()
            if self._reply is not None:
                self._reply.close()
                self._reply = None
            raise
        finally:
            self.log.started()

    def _start(self, env: dict[str, str], base_env: dict[str, str], mounts: Mounts, work: Path, pass_fd: int, wait_s: float) -> None:
        requests = _request_socket()
        try:
            self._ask(requests, env, base_env, mounts, work, pass_fd, wait_s)
        except OSError as exc:  # the sandbox gone before its namespaces were opened, say: a fresh interpreter instead
            raise ZygoteUnavailable(f"the sandbox could not be handed over: {exc}") from None
        finally:
            requests.close()

    def _ask(self, requests: socket.socket, env: dict[str, str], base_env: dict[str, str], mounts: Mounts, work: Path,
             pass_fd: int, wait_s: float) -> None:  # fmt: skip
        first = self._start_holder(env, mounts, work)
        if os.stat(f"/proc/{first}/ns/user").st_ino != os.stat("/proc/self/ns/user").st_ino:
            raise ZygoteUnavailable("bwrap made a user namespace (not root)")
        held = [os.open(f"/proc/{first}/root", os.O_RDONLY | os.O_DIRECTORY)]
        held += [os.open(f"/proc/{first}/ns/{name}", os.O_RDONLY) for name in ("pid", *NAMESPACES)]
        joins = self.cgroup.join_fds()
        mine, theirs = socket.socketpair()
        self._reply = mine
        try:
            message = {"env": env, "base": base_env, "scratch": str(self.scratch), "cgroups": len(joins)}
            fds = [theirs.fileno(), pass_fd, self.log.write_fd, *held, *joins]
            socket.send_fds(requests, [json.dumps(message).encode()], fds)
        except OSError as exc:
            raise ZygoteUnavailable(f"the zygote is gone: {exc}") from None
        finally:
            theirs.close()
            for fd in (*held, *joins):
                os.close(fd)
        kind, rest = self._line(wait_s)
        if kind != "started":
            raise ZygoteUnavailable(f"the zygote did not start a runner: {kind} {rest}".strip())
        self.pid = int(rest)

    def _start_holder(self, env: dict[str, str], mounts: Mounts, work: Path) -> int:
        """bwrap with the runner's sandbox, environment (the sandbox's first process shows it in /proc) and a holder for
        its command; the pid of that first process, once every mount is in place."""
        info_r, info_w = os.pipe()
        cmd = bwrap_command(self.info, HOLDER, mounts, self.scratch, overlay_copies(self.info, mounts, work),
                            options=["--info-fd", str(info_w)])  # fmt: skip
        fds = self.cgroup.join_fds()
        try:
            self._holder = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log.write_fd,
                                            env=env, pass_fds=[info_w], start_new_session=True, preexec_fn=preexec(None, fds))  # fmt: skip
        finally:
            os.close(info_w)
            for fd in fds:
                os.close(fd)
        try:
            ready, _, _ = select.select([self._holder.stdout], [], [], 30)
            line = self._holder.stdout.readline() if ready else b""
            if line.strip() != b"ready":
                raise ZygoteUnavailable("the sandbox did not start")
            return int(json.loads(os.read(info_r, 1 << 16))["child-pid"])
        except (ValueError, KeyError, OSError) as exc:
            raise ZygoteUnavailable(f"bwrap's info: {exc}") from None
        finally:
            os.close(info_r)
            self._holder.stdout.close()

    def _line(self, wait_s: float) -> tuple[str, str]:
        """The next line from the zygote's child, waiting up to ``wait_s``; ("", "") when none came."""
        deadline = time.monotonic() + wait_s
        while b"\n" not in self._pending:
            left = max(0.0, deadline - time.monotonic())
            if self._reply is None or not select.select([self._reply], [], [], left)[0]:
                return "", ""
            chunk = self._reply.recv(4096)
            if not chunk:
                return "closed", ""
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        kind, _, rest = line.decode("utf-8", "replace").partition(" ")
        return kind, rest

    def poll(self) -> int | None:
        if self._code is None:
            kind, rest = self._line(0)
            if kind == "exited":
                code = int(rest)
                self._code = 128 - code if code < 0 else code
            elif kind == "closed":  # its parent was killed with it (the cgroup's kill)
                self._code = 128 + int(signal.SIGKILL)
        return self._code

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            if self._reply is not None:
                select.select([self._reply], [], [], max(0.0, min(0.1, deadline - time.monotonic())))
        return self._code

    def kill(self) -> None:
        """SIGKILL the runner and everything it started (its cgroup whole, the sandbox's first process with it)."""
        self.cgroup.kill()
        if self.pid > 0:
            kill_tree(self.pid)
        self._discard()
        self.wait(10)
        self.cgroup.close()

    def _discard(self) -> None:
        if self._holder is not None:
            kill_tree(self._holder.pid)
            try:
                self._holder.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def rss_bytes(self) -> int:
        return self.cgroup.memory_bytes() or tree_rss(self.pid)


def _request_socket() -> socket.socket:
    """A copy of this process's end of the zygote's request socket (``FD_ENV``), checked to be one."""
    try:
        requests = socket.socket(fileno=os.dup(int(os.environ[FD_ENV])))
    except (KeyError, ValueError, OSError):
        raise ZygoteUnavailable("no zygote") from None
    if requests.family != socket.AF_UNIX or requests.type != socket.SOCK_SEQPACKET:
        requests.close()
        raise ZygoteUnavailable(f"{FD_ENV} is not a zygote's socket")
    return requests


# ------------------------------------------------------------------ the zygote process


def serve(request_fd: int, parent: int) -> None:
    """Import what a runner needs, then fork a runner per request until the socket closes."""
    import gc
    import importlib

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG: gone with the fork server
    if os.getppid() != parent:
        return
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing optional module only costs its import in each runner
            pass
    gc.collect()
    gc.freeze()  # what the imports made is shared with every runner, never copied by a collection
    if not _forks_can_use_cuda():
        return  # every request then finds the socket closed: each runner is a fresh interpreter
    base = dict(os.environ)
    requests = socket.socket(fileno=request_fd)
    children: set[int] = set()
    while os.getppid() == parent:
        if select.select([requests], [], [], 1.0)[0]:
            try:
                message, fds, _, _ = socket.recv_fds(requests, _MAX_MESSAGE, 64)
            except OSError:
                break
            if not message and not fds:
                break  # every supervisor and the fork server are gone
            children.add(_fork(message, fds, base, libc))
            for fd in fds:
                os.close(fd)
        reap(children)


def _forks_can_use_cuda() -> bool:
    """Whether a child forked now may initialise CUDA: torch refuses in the child of a process that touched the driver
    (``_is_in_bad_fork``), which nothing here may have done."""
    pid = os.fork()
    if pid == 0:
        import torch

        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _fork(message: bytes, fds: list[int], base: dict[str, str], libc) -> int:
    """A child that joins the sandbox's PID namespace, forks the runner, says so, and waits for it (gone with the
    zygote; outside the runner's cgroup, so that only the runner's tree is frozen, counted and killed there)."""
    pid = os.fork()
    if pid:
        return pid
    reply = fds[0] if fds else -1
    try:
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        request = json.loads(message)
        runner_fd, log_fd, root_fd, pid_ns = fds[1:5]
        ns_fds = fds[5 : 5 + len(NAMESPACES)]
        joins = fds[5 + len(NAMESPACES) : 5 + len(NAMESPACES) + request["cgroups"]]
        if request["base"] != base or len(ns_fds) != len(NAMESPACES) or not joins:
            raise ZygoteUnavailable("its environment is not this zygote's, or the sandbox is incomplete")
        _setns(libc, pid_ns)
        runner = os.fork()
        if runner == 0:
            exit_after(lambda: _become_runner(libc, request, runner_fd, log_fd, root_fd, ns_fds, joins))
        for fd in fds[1:]:
            os.close(fd)
        os.write(reply, f"started {runner}\n".encode())
        _, status = os.waitpid(runner, 0)
        os.write(reply, f"exited {os.waitstatus_to_exitcode(status)}\n".encode())
    except BaseException as exc:  # noqa: BLE001 - the supervisor starts a fresh interpreter instead
        if reply >= 0:
            try:
                os.write(reply, f"failed {exc}".replace("\n", " ").encode() + b"\n")
            except OSError:
                pass
    os._exit(0)


def _become_runner(libc, request: dict, runner_fd: int, log_fd: int, root_fd: int, ns_fds: list[int], joins: list[int]) -> int:
    """In the sandbox's PID namespace: join its cgroup first, then its other namespaces and root, give up every
    privilege, serve."""
    cgroups.join(joins)
    first_to_kill()
    for fd in ns_fds:
        _setns(libc, fd)
    os.fchdir(root_fd)
    os.chroot(".")
    os.chdir(request["scratch"])
    os.setsid()
    os.setgroups([])
    _drop_capabilities(libc)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.closerange(3, runner_fd)
    os.closerange(runner_fd + 1, 1 << 16)
    os.environ.clear()
    os.environ.update(request["env"], PWD=request["scratch"])  # as bwrap's --chdir sets it
    import random

    random.seed()  # as a fresh interpreter: not the zygote's state, shared by every runner it forked
    from . import runner

    sys.argv = [runner.__file__, str(runner_fd), request["scratch"]]
    return runner.serve(runner_fd, request["scratch"])


def _setns(libc, fd: int) -> None:
    if libc.setns(fd, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _drop_capabilities(libc) -> None:
    """No capability left (effective, permitted, inheritable, ambient, bounding) and no way to gain one (no_new_privs)."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two of {effective, permitted, inheritable}, all zero
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "no_new_privs")


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
    os._exit(0)
