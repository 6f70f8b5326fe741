"""The runner processes of one evaluation, one :class:`Side` each: the reference's (trusted, a plain child) and the
candidate's (sandboxed), and a candidate's build step. :class:`Runners` starts them, asks them (a request, its checked
reply, any failure turned into the stage's verdict), stops and continues the candidate's tree around every request,
and ends them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .. import protocol as p
from ..assignment import describe_exit, read_tail
from ..cgroups import FROZEN_WAIT_S, Cgroup, freezer_used
from ..footprint import tree_memory_default
from ..procs import ProcessTree, descendants, strays, tree_cpu_seconds
from ..runner import EARLY_CUDA_ENV, PROFILE_ENV, serve
from ..sandbox import (
    SCRATCH,
    TIMING_ENV,
    ForkedRunner,
    Mounts,
    RunnerProcess,
    SandboxInfo,
    SandboxUnavailable,
    resolve,
    runner_env,
    secret_paths,
)
from ..stages import CANDIDATE_FAILURE
from ..transport import Channel, ChannelClosed, ChannelTimeout, ProtocolError, SharedBuffer
from ..zygote import ZygoteRunner, ZygoteUnavailable
from .device import Device
from .plan import DISK_BYTES, DISK_CHECK_S, POLL, POLL_BUILD, POLL_SHARED, STEP_ASIDE_AFTER
from .record import Context, Verdict

if TYPE_CHECKING:
    from ...build.pch import Requests
    from .buffers import CallSet

PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


SLOW_FREEZE_S = 0.25  # a stop that took longer is tallied apart (split_s 'freeze.slow')


class StillRunning(Exception):
    """A candidate's tree was not seen stopped after its cgroup was frozen."""


@dataclasses.dataclass(eq=False)
class Side:
    """One runner process: the reference's, the candidate's, or a build step; and this phase's buffers of it."""

    name: str  # "reference", "candidate" or "build"
    channel: Channel
    process: RunnerProcess | ForkedRunner
    log: Path
    trusted: bool = False  # the reference's runner: never runs candidate code
    client: bool = False  # runs a client's problem (problem_sandbox): trusted's failures, a candidate's sandbox and freezing
    tree: ProcessTree | None = None  # its process tree (the candidate's), kept from one stop to the next
    frozen: bool = False  # stopped between requests
    asked: bool = False  # sent a request since its last phase end: it may hold device memory to give back
    buffers: dict[int, SharedBuffer] = dataclasses.field(default_factory=dict)
    sets: list[CallSet] = dataclasses.field(default_factory=list)  # this phase's call sets: one per call of a round
    home: list[CallSet] = dataclasses.field(default_factory=list)  # the sets as made, where the buffer has room to move
    slack: int = 0
    places: set[int] = dataclasses.field(default_factory=set)  # the offsets the sets were moved by in this phase
    disk: list[Path] = dataclasses.field(default_factory=list)  # the host folders it can write: bounded by DISK_BYTES
    _next_id: int = 0

    @property
    def args(self) -> list[p.Node]:
        return self.sets[0].args if self.sets else []

    @property
    def inputs(self) -> list[torch.Tensor]:
        return self.sets[0].inputs if self.sets else []

    @property
    def slots(self) -> list[torch.Tensor]:
        return self.sets[0].slots if self.sets else []

    def alive(self) -> bool:
        return self.process.poll() is None

    def pids(self) -> list[int]:
        return [self.process.pid, *descendants(self.process.pid)]

    def new_ids(self, count: int) -> list[int]:
        ids = list(range(self._next_id, self._next_id + count))
        self._next_id += count
        return ids

    def drop_buffers(self) -> list[int]:
        ids = list(self.buffers)
        self.buffers.clear()
        self.sets, self.home, self.slack, self.places = [], [], 0, set()
        return ids

    def freeze(self, strays: Callable[[], list[int]] = list) -> bool:
        """Stop the candidate's process tree (the reference's is trusted and waits on its socket: stopping it would
        only cost time, 1-2 ms a call on the H100; ``KB_FREEZE_REFERENCE=1``, an experiment: it too): its cgroup frozen
        whole, or, without one, every process of the tree found by walking it and the ``strays`` it left behind
        (orphans reparented to the supervisor). Whether it was stopped now."""
        if (self.trusted and not self.client and os.environ.get("KB_FREEZE_REFERENCE") != "1") or self.frozen or not self.alive():
            return False
        if self.process.cgroup is not None and freezer_used():
            self.frozen = True  # thawed as usual, even where the freeze did not finish
            if not self.process.cgroup.freeze():
                raise StillRunning(f"its processes were still running {FROZEN_WAIT_S:g} s after their cgroup was frozen "
                                   "(cgroup.freeze; a task held inside the kernel)")
        else:
            self.tree = self.tree or ProcessTree(self.process.pid)
            self.tree.freeze(strays=strays())
        self.frozen = True
        return True

    def thaw(self) -> None:
        if self.frozen:
            if self.process.cgroup is not None and freezer_used():
                self.process.cgroup.thaw()
            elif self.tree is not None:
                self.tree.thaw()
        self.frozen = False

    def members(self) -> list[int]:
        """The processes of its tree, as its cgroup (or the last walk of it) knows them."""
        if self.process.cgroup is not None:
            return self.process.cgroup.members()
        return list(self.tree.members) if self.tree is not None else []

    def exit_text(self) -> str:
        code = self.process.poll()
        for _ in range(20 if code is None else 0):
            time.sleep(0.05)
            code = self.process.poll()
            if code is not None:
                break
        if code is None:
            return "stopped answering"
        if code > 128 and self.process.info.kind == "bwrap":
            code = 128 - code  # bwrap reports a child killed by signal N as exit status 128 + N
        return describe_exit(code)

    def log_tail(self, chars: int) -> str:
        pipe = getattr(self.process, "log", None)  # a runner's output comes through a pipe; a forked reference's, a file
        text = pipe.text(chars) if pipe is not None else read_tail(self.log, chars)
        return f"\n--- runner log tail ---\n{text}" if text.strip() else ""


class Runners:
    """Starts, asks and stops one evaluation's runners: ``reference`` (and ``spares``, reference runners forked early for
    later pairs of processes) and ``candidate``."""

    def __init__(self, ctx: Context, device: Device):
        self.ctx, self.device = ctx, device
        self.reference: Side | None = None
        self.candidate: Side | None = None
        self.spares: list[Side] = []
        self.problem: Side | None = None  # a client's problem's values (problem.SandboxedProblem)
        self.sandbox: SandboxInfo | None = None
        self.pch: Requests | None = None  # the running build step's requests for a shared PCH, served while it is waited for
        self._before_pch, self._pch_mark = "", 0.0  # the stage a header's build interrupted (_uncharge_pch), and when
        self._spawned = 0  # sandboxed processes started: each cgroup's name
        self._roots: set[int] = set()  # the pid of each runner and build step not yet stopped (procs.strays: not a stray)
        self._mirrors: list[Cgroup] = []  # the reference's runners' cgroups (cgroup_like_the_candidate: an experiment)

    # -------------------------------------------------------------- starting

    def resolve_sandbox(self) -> None:
        from ..runner import _device_name, _versions

        self.ctx.found.update(device_name=_device_name(torch, self.ctx.device), versions=_versions(torch))
        try:
            self.sandbox = resolve(self.ctx.cfg.sandbox)
        except SandboxUnavailable as exc:
            raise Verdict("harness_error", str(exc)) from None
        self.ctx.found.extra.sandbox = self.sandbox.label

    def start_reference(self, fork: bool = True, tag: str = "") -> Side:
        """The reference's runner: a plain child process (trusted code; level 4 needs the network and caches).

        Forked from here (``fork``) while this process has not touched CUDA nor run a parallel CPU op (it has torch
        imported: a new interpreter would import it again; a child forked after OpenMP's threads started hangs in its
        first parallel region), else started as a new interpreter. Either way it runs :func:`runner.serve` with this
        process's environment, in which :data:`TIMING_ENV` is set (``controller.supervisor_env``), as the candidate's
        runner has it. ``tag``: a spare's folder and log."""
        ctx = self.ctx
        if ctx.cfg.problem_sandbox:
            return self.start_client(f"reference{tag}")
        scratch = ctx.work / f"reference{tag}"
        log = ctx.work / f"reference{tag}.log"
        # under KB_PROFILE_DIR this process runs under cProfile, which a forked child inherits (3.12: a second one fails)
        if fork and not (ctx.on_gpu and torch.cuda.is_initialized()) and not os.environ.get(PROFILE_ENV):
            mine, theirs = socket.socketpair()
            try:
                held = [side.channel.sock.fileno() for side in (self.reference, *self.spares) if side is not None]
                held = [fd for fd in held if fd >= 0]  # the other runners' sockets
                process = ForkedRunner(serve, scratch=scratch, log_path=log, pass_fd=theirs.fileno(),
                                       close_fds=[mine.fileno(), *held])  # fmt: skip
            finally:
                theirs.close()
            return Side("reference", Channel(mine), process, log, trusted=True)
        path = os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, **TIMING_ENV, "PYTHONPATH": path}
        info = SandboxInfo("none", reason="the reference is trusted")
        return self.spawn("reference", info, env, Mounts(), scratch, log_name=log.name, trusted=True)

    def start_client(self, name: str) -> Side:
        """A runner for a client's problem (``EvalConfig.problem_sandbox``: its reference, or its values): started as a
        candidate's is, in the sandbox and a cgroup of its own, frozen between requests; its failures are the judge's
        (no candidate code runs there)."""
        side = self.launch({}, f"{name}.log", Mounts(), side_name=name)
        side.trusted = side.client = True
        return side

    def launch(self, extra_env: dict[str, str], log_name: str, mounts: Mounts, side_name: str = "candidate") -> Side:
        """A runner process in the sandbox, importing torch while nothing is asked of it yet (no candidate code)."""
        ctx, info = self.ctx, self.sandbox
        scratch = SCRATCH if info.kind == "bwrap" else ctx.work / f"{side_name}-scratch"
        mounts.masks = [Path(ctx.cfg.lock_dir), Path(ctx.cfg.build_dir), ctx.work, *secret_paths(), *map(Path, ctx.cfg.hide)]
        if ctx.cfg.pch_dir != "off":
            mounts.readonly.append(Path(ctx.cfg.pch_dir))
        if os.environ.get("PYTHONPYCACHEPREFIX"):  # the trusted bytecode cache (build/bytecode.py), read-only here
            mounts.readonly.append(Path(os.environ["PYTHONPYCACHEPREFIX"]))
        mounts.gpu_minor = ctx.pin.minor  # its GPU's device node alone, where known (judge/gpus.py)
        base = runner_env(dict(os.environ), scratch / "home", PACKAGE_ROOT, {})  # the zygote's too, if it has this one
        env = {**base, **extra_env}  # what runner_env(..., extra_env) gives
        if side_name == "candidate" and self.early_cuda is not None:
            env[EARLY_CUDA_ENV] = str(self.early_cuda)
        # Forked from the runner zygote: a build step, or a runner on the CPU. Not a runner on a GPU: there a forked
        # runner made threads after its timing core was set (OpenBLAS's pool, rebuilt after a fork on first use: "moved
        # back" in an honest candidate) and a profiled judge timed out (H200, 2026-11-29); a fresh interpreter there.
        forked = side_name == "build" or not ctx.on_gpu
        if not forked:
            self._started(side_name, "interpreter: a GPU runner")
        side = self.spawn(side_name, info, env, mounts, scratch, log_name=log_name, base_env=base if forked else None)
        side.disk = [*mounts.writable, *([] if info.kind == "bwrap" else [scratch])]  # bwrap's scratch is a counted tmpfs
        return side

    def spawn(self, name: str, info: SandboxInfo, env: dict[str, str], mounts: Mounts, scratch: Path, *,
              log_name: str = "", trusted: bool = False, base_env: dict[str, str] | None = None) -> Side:  # fmt: skip
        mine, theirs = socket.socketpair()
        argv = [sys.executable, "-m", "pytest_kernelbench.judge.runner", str(theirs.fileno()), str(scratch)]
        log = self.ctx.work / (log_name or f"{name}.log")
        cgroup = self._cgroup(name) if not trusted else None
        try:
            process = self._forked(name, info, env, base_env, mounts, scratch, theirs.fileno(), cgroup) if base_env is not None else None
            if process is None:
                process = RunnerProcess(info, argv, env=env, mounts=mounts, work=self.ctx.work, scratch=scratch,
                                        pass_fd=theirs.fileno(), cgroup=cgroup)  # fmt: skip
        except BaseException:
            if cgroup is not None:
                cgroup.close()
            raise
        finally:
            theirs.close()
        self._roots.add(process.pid)
        return Side(name, Channel(mine), process, log, trusted=trusted)

    def _forked(self, name: str, info: SandboxInfo, env: dict[str, str], base_env: dict[str, str], mounts: Mounts, scratch: Path,
                pass_fd: int, cgroup: Cgroup | None) -> ZygoteRunner | None:  # fmt: skip
        """A runner or build step forked from the runner zygote (judge/zygote.py) where it can be: in a bwrap sandbox
        held by a cgroup; else None (a fresh interpreter). The record says which for the candidate's runner, and why."""
        why = "no bwrap" if info.kind != "bwrap" else "no cgroup" if cgroup is None else ""
        if not why:
            try:
                process = ZygoteRunner(info, env=env, base_env=base_env, mounts=mounts, work=self.ctx.work, scratch=scratch,
                                       pass_fd=pass_fd, cgroup=cgroup, wait_s=self.ctx.cfg.setup_timeout)  # fmt: skip
                self._started(name, "zygote")
                return process
            except ZygoteUnavailable as exc:
                why = str(exc)
        self._started(name, f"interpreter: {why}")
        return None

    def _started(self, name: str, how: str) -> None:
        if name == "candidate":  # the candidate's runner, started before or after its build step
            self.ctx.found.extra.runner_start = how

    def cgroup_like_the_candidate(self, side: Side | None) -> None:
        """An experiment (``KB_REFERENCE_CGROUP=1``; benchmarks/experiments/candidate_lean.py): the reference's runner
        moved into a cgroup of its own, as the candidate's runner is (never frozen), so that both sides' calls on the
        one timing core are scheduled alike. Off by default: on the H200s the candidate's wall beyond its claims was
        longer than the reference's by 7.3 us a call at the median as judged (13 self-judgments), -0.2 us without the
        candidate's cgroup (10), 6.6 us with this (6) (docs/timing-fidelity.md, "The candidate's lean")."""
        if side is None or os.environ.get("KB_REFERENCE_CGROUP") != "1" or self.sandbox is None or not self.sandbox.cgroups:
            return
        if side.process.cgroup is not None:  # a client's problem's runner: in its own already, frozen and killed by it
            return
        cgroup = self._cgroup(f"{side.name}-timed")
        if cgroup is None:
            return
        cgroup.add(side.process.pid)
        self._mirrors.append(cgroup)

    def _cgroup(self, name: str) -> Cgroup | None:
        """A cgroup of its own for a candidate's runner or build step (cgroups.py), bounded by ``--kb-max-memory`` (else
        by the host's memory less the judge's reserve: footprint.tree_memory_default)."""
        if not self.sandbox.cgroups:
            return None
        self._spawned += 1
        return Cgroup.create(f"{name}-{self._spawned}", memory_max=self._memory_limit())

    def _memory_limit(self) -> int:
        gb = self.ctx.cfg.max_memory_gb
        return int(gb * 2**30) if gb > 0 else tree_memory_default()

    @property
    def early_cuda(self) -> int | None:
        """The GPU whose CUDA context the candidate's runner makes as soon as it has imported torch (runner.start_cuda), or
        None: not on a GPU, or ``KB_EARLY_CUDA=0``. Not the reference's runner: made beside the supervisor's own, its
        context slowed that one and the seal's kernels' loading more than it saved (x2, 100 level-1 items at -n 4, both
        runners' contexts made early: the reference stage 148 s summed, 134 s with neither; docs/performance.md, "Two
        GPUs"). Whether the candidate's own early context pays was not measured apart (KB_EARLY_CUDA=0 against it)."""
        if not self.ctx.on_gpu or os.environ.get("KB_EARLY_CUDA", "1") == "0":
            return None
        return self.ctx.device.index or 0

    @property
    def pin_cpu_runners(self) -> bool:
        """Whether a CPU judge's two runners pin their threads a core each (``KB_CPU_PIN=1``; docs/timing-fidelity.md, "CPU runners:
        a core per thread, on request"): on a quiet 2-vCPU machine it removed a two-speed lean; beside one other busy
        process it made one (0.86-1.51 in 18 judgments, against 0.99-1.05 in 11 of 12 unpinned), so it is off unless asked."""
        return self.ctx.cfg.device == "cpu" and os.environ.get("KB_CPU_PIN", "0") == "1"

    def set_up(self, side: Side, device: str = "") -> Side:
        """Set up a runner on the judged device, or on ``device`` (a build step: its threads are never pinned)."""
        cfg, status = self.ctx.cfg, self.ctx.status
        pin = not device and self.pin_cpu_runners
        stage = status.stage
        status.enter("runner_start")  # its interpreter imports torch: no candidate code yet, so not the candidate's time
        try:
            threads = torch.get_num_threads() if device else self.ctx.threads  # a build step compiles with every core
            setup = p.Setup(device or cfg.device, self.ctx.device.index or 0, cfg.timer, threads, pin_threads=pin,
                            ieee_float32=cfg.tol.wants_ieee_float32)  # both sides alike: Tolerance.wants_ieee_float32
            self.ask(side, setup, p.Ready, allowed=cfg.setup_timeout)
        except Verdict as verdict:  # before any candidate code: the sandbox or the machine, not the candidate
            self.stop(side)
            raise Verdict("harness_error", f"the runner could not start ({self.sandbox.label}): {verdict.message}") from None
        finally:
            status.enter(stage)
        return side

    # -------------------------------------------------------------- asking

    def ask(self, side: Side, request: p.Request, kind: type[p.Reply], *, label: str = "", fail_ok: bool = False,
            fds: list[int] | None = None, stop: bool = True, allowed: float | None = None, send_back: float = 0.0) -> Any:  # fmt: skip
        """Send a request and wait for its checked reply; any failure becomes the stage's verdict. ``allowed``: seconds
        for the reply (default: the candidate's time left; the reference's, the setup limit); ``send_back``: :meth:`wait`'s."""
        ctx = self.ctx
        stage = ctx.status.stage
        if allowed is None:
            allowed = ctx.cfg.setup_timeout if side.trusted else ctx.remaining()
        deadline = time.monotonic() + allowed
        where = f"{label}: " if label else ""
        side.thaw()
        side.asked = True
        try:
            side.channel.send(request.to_wire(), fds or [])
            reply = p.parse_reply(self.wait(side, deadline, send_back), kind)
        except (ChannelTimeout, TimeoutError):
            raise self.timed_out(side, stage) from None
        except (ChannelClosed, BrokenPipeError, ConnectionResetError):
            raise self.failure(side, stage, f"{where}the runner {side.exit_text()} during stage '{stage}' without answering") from None
        except (ProtocolError, p.BadReply) as exc:
            raise self.failure(side, stage, f"{where}malformed reply from the runner: {exc}") from None
        if stop:
            self.freeze(side)
        if not reply.ok and not fail_ok:
            raise self.failure(side, stage, where + reply.error)
        return reply

    def wait(self, side: Side, deadline: float, send_back: float = 0.0) -> dict[str, Any]:
        """The side's next message, by ``deadline``; meanwhile a build step pauses for another judge's CPU timing and
        its PCH requests are served, and a long candidate call in a shared phase steps aside for a timer (one in the
        exclusive time phase goes shared first after ``send_back`` seconds, 0: never: :meth:`Device.send_back`)."""
        ctx = self.ctx
        limit = ctx.cfg.max_memory_gb * 2**30
        running = time.monotonic()  # since when the side has run uninterrupted
        measured = running  # when its folders were last measured
        while True:
            if side.name == "build":  # a compiler must not share the CPU with another evaluation's timed calls
                deadline += self.device.pause_for_timing(side.freeze, side.thaw)
                if self.pch is not None:
                    self.pch.poll()
                    deadline += self._uncharge_pch()
            elif self.device.sharing and not side.trusted and time.monotonic() - running > STEP_ASIDE_AFTER:
                # not fair to a long first call, on purpose: one that will not step aside holds every timer, and every
                # new reader behind it (H100, level-3 corpus: 28 of 32 in 250 s with a fair share, all 32 in 225 s without)
                aside = self.step_aside(side)
                if aside:
                    deadline, running = deadline + aside, time.monotonic()
            elif send_back and not side.trusted and time.monotonic() - running > send_back:  # sharing: the branch above
                self.device.send_back(lambda: self.freeze(side), side.thaw)  # the rest of it in a shared hold, its own time
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("deadline")
            poll = POLL_BUILD if side.name == "build" else POLL_SHARED if self.device.sharing else POLL
            ready, _, _ = select.select([side.channel.sock], [], [], min(poll, left))
            if ready:
                message, _ = side.channel.recv(timeout=max(left, 5.0))
                return message
            if limit and not side.trusted and side.process.rss_bytes() > limit:
                stage = ctx.status.stage
                raise self.failure(side, stage, f"used more than {ctx.cfg.max_memory_gb:g} GB of host memory during stage '{stage}'")
            if side.disk and time.monotonic() - measured > DISK_CHECK_S:
                self.check_disk(side)
                measured = time.monotonic()

    def check_disk(self, side: Side) -> None:
        """Over :data:`plan.DISK_BYTES` in the folders it can write (build folder, JIT caches, a scratch on the host):
        the candidate's outcome, naming the limit."""
        if side.disk and _disk_bytes(side.disk, DISK_BYTES) > DISK_BYTES:
            stage = self.ctx.status.stage
            self.stop(side)
            who = f"{_who(side)} " if side.trusted else ""
            text = (f"{who}wrote more than {DISK_BYTES / 2**30:g} GiB to its folders (build folder, JIT caches, scratch) by stage "
                    f"'{stage}' (the limit: KB_DISK_GB)")
            raise Verdict("harness_error" if side.trusted else "runtime_error", text + side.log_tail(self.ctx.cfg.log_chars))

    def step_aside(self, side: Side) -> float:
        """In a shared phase, while ``side`` is in a long call and an exclusive holder waits whose memory fits: stop the
        side's tree, let the lock go and queue for it again (behind the waiting one, which first waits for a quiet GPU:
        Device.settle), then continue the side. Returns the seconds it took, charged to no one but the part its kernels
        ran on (Device.charge_stopped). A Triton autotune stopped so times one configuration too slow at most."""
        if self.device.wanted() is None:
            return 0.0
        status, stage, started = self.ctx.status, self.ctx.status.stage, time.monotonic()
        status.enter("stepped_aside")
        self.freeze(side)
        watch = self.device.processes.watch_stopped(side.members()) if self.ctx.on_gpu else None
        try:
            self.device.requeue()
        finally:
            own = self.device.charge_stopped(watch)
            side.thaw()
            status.enter(stage)
        self.ctx.found.count("stepped_aside")
        return time.monotonic() - started - own

    def freeze(self, side: Side) -> None:
        """Stop a candidate's tree between requests; in a GPU time phase, bind its threads to the timing core again. A
        tree that does not stop is the candidate's failure: nothing is timed while it may run."""
        started = time.perf_counter()
        try:
            stopped = side.freeze(self._strays)
        except StillRunning as exc:
            raise self.failure(side, self.ctx.status.stage, str(exc)) from None
        finally:  # how long stopping takes (split_s: freeze; freeze.slow for the stops over SLOW_FREEZE_S)
            spent = time.perf_counter() - started
            self.ctx.found.tally("split_s", "freeze", spent)
            if spent > SLOW_FREEZE_S:
                self.ctx.found.tally("split_s", "freeze.slow", spent)
        if stopped:
            self.device.rebind(side.members())

    def _strays(self) -> list[int]:
        """Processes a candidate's runner left behind without a cgroup or PID namespace to hold them (procs.strays)."""
        trusted = {side.process.pid for side in (self.reference, *self.spares, self.problem) if side is not None and side.alive()}
        return strays(self._roots, trusted)

    def failure(self, side: Side, stage: str, text: str) -> Verdict:
        chars = self.ctx.cfg.log_chars
        if side.trusted and self._memory_the_candidate_took(side, stage, text):
            self.stop_candidate()
            return Verdict("runtime_error", f"{_who(side)} ran out of device memory during stage '{stage}' while the candidate's "
                           f"process held device memory: {text}" + side.log_tail(chars))
        if side.trusted:
            return Verdict("harness_error", f"{_who(side)} failed during stage '{stage}': {text}" + side.log_tail(chars))
        cgroup = side.process.cgroup
        if cgroup is not None and cgroup.oom_killed():  # the kernel's own account of it: over --kb-max-memory
            which = ("--kb-max-memory" if self.ctx.cfg.max_memory_gb > 0
                     else "the host's memory less the judge's reserve; --kb-max-memory sets it")
            text = (f"used more than {self._memory_limit() / 2**30:.3g} GB of host memory during stage '{stage}' (killed at its "
                    f"cgroup's limit, {which}): {text}")
        self.stop(side)
        if stage in CANDIDATE_FAILURE:
            return Verdict(CANDIDATE_FAILURE[stage].value, text + side.log_tail(chars))
        return Verdict("unknown_error", f"the candidate's runner failed during stage '{stage}': {text}" + side.log_tail(chars))

    def timed_out(self, side: Side, stage: str) -> Verdict:
        cfg = self.ctx.cfg
        if side.trusted:
            return Verdict("harness_error", f"{_who(side)} did not answer within {cfg.setup_timeout:g} s during stage '{stage}'")
        self.stop(side)
        return Verdict("timeout", f"timed out after {cfg.timeout:g} s during stage '{stage}'" + side.log_tail(cfg.log_chars))

    # -------------------------------------------------------------- stopping

    def _uncharge_pch(self) -> float:
        """While the judge builds a header the build step asked for (its binding compile waits for it, up to KB_PCH_WAIT),
        the step's time is the judge's: the stage reads 'pch' (uncharged) and the step's deadline moves by as much.
        Returns the seconds to move it by since the last look."""
        now, status = time.monotonic(), self.ctx.status
        if self.pch is not None and self.pch.building():
            if status.stage != "pch":
                self._before_pch, self._pch_mark = status.stage, now
                status.enter("pch")
                return 0.0
            spent, self._pch_mark = now - self._pch_mark, now
            return spent
        if status.stage == "pch" and self._before_pch:
            status.enter(self._before_pch)
            self._before_pch = ""
            return now - self._pch_mark
        return 0.0

    def took_device_memory(self, stage: str, failure: str) -> bool:
        """Whether a trusted allocation's ``failure`` was for device memory the candidate took: out of memory on a GPU in
        a stage where the candidate's code has run (admission counted every other judge's need before the phase began)."""
        return (self.ctx.on_gpu and stage in CANDIDATE_FAILURE and self.candidate is not None
                and "out of memory" in failure.lower().replace("_", " "))

    def _memory_the_candidate_took(self, side: Side, stage: str, text: str) -> bool:
        """Whether the reference's runner failed for device memory the candidate took, its runner still alive (a client's
        problem's runner is the client's side, not the candidate's)."""
        return not side.client and self.took_device_memory(stage, text) and self.candidate.alive()

    def stop(self, side: Side | None) -> None:
        if side is None:
            return
        side.thaw()
        if side.alive():  # before the kill: a killed tree's CPU time is reaped by nobody who tells
            self.ctx.found.add_cpu(side.name, tree_cpu_seconds(side.process.pid))
        with contextlib.suppress(Exception):
            side.channel.send(p.Exit().to_wire())
        if side.trusted and os.environ.get(PROFILE_ENV):  # let it write its profile
            with contextlib.suppress(Exception):
                side.process.wait(10)
        side.process.kill()
        self._roots.discard(side.process.pid)  # a pid a stopped runner held, taken again by a stray, is a stray
        side.channel.close()
        if side.tree is not None:
            side.tree.close()

    def stop_candidate(self) -> None:
        if self.candidate is not None and self.candidate.alive():
            self.stop(self.candidate)

    def stop_all(self) -> None:
        self.stop_candidate()
        for side in (self.reference, *self.spares, self.problem):
            self.stop(side)
        for cgroup in self._mirrors:
            cgroup.close()

    def live_pids(self) -> list[list[int]]:
        """Each live runner's process tree (both sides), for binding to the timing core."""
        return [side.pids() for side in (self.reference, self.candidate) if side is not None and side.alive()]


def _who(side: Side) -> str:
    """How a verdict names a trusted side's runner."""
    if side.client:
        return f"the client's problem (problem_code, its {side.name.split('-')[0]} runner)"
    return "the reference"


def _disk_bytes(folders: list[Path], limit: int, max_entries: int = 200_000) -> int:
    """Bytes in the files below ``folders``, counted until over ``limit`` (then returned at once): an iterative walk that
    follows no link and skips what it cannot read (a folder chain too deep for a path is small, not over: its trim is
    build/tree.py's); a tree of more than ``max_entries`` entries counts as over."""
    total, seen, todo = 0, 0, [str(f) for f in folders if f.is_dir()]
    while todo:
        try:
            entries = os.scandir(todo.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                try:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
                if total > limit or seen > max_entries:
                    return max(total, limit + 1)
    return total
