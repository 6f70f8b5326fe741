"""``evaluate()``: one candidate, one supervisor process, one :class:`EvalResult`.

The supervisor (:mod:`pytest_kernelbench.judge.supervisor`) is forked from a server that imported
torch once (:mod:`pytest_kernelbench.judge.forkserver`, the default on Linux) or started as a
fresh interpreter (``worker_start="spawn"``), in its own process group, output to a file. It runs
no candidate code; the candidate runs in the runner it starts. Here we only follow the stages it
announces on its status file, enforce the time limits as a backstop, and read the result it
writes: a hang, a crash or a runaway memory use of the supervisor itself is still a result, and
the whole group is killed before the next evaluation.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..build.bytecode import bytecode_prefix
from ..candidates import Candidate
from ..config import EvalConfig, mode_unavailable
from ..extra import Extra
from ..outcome import Outcome
from ..problems import Problem
from ..result import EvalResult, TimingStats
from . import footprint, forkserver, sol
from .assignment import Assignment, describe_exit, read_tail
from .procs import child_setup
from .sandbox import TIMING_ENV
from .stages import SETUP_STAGES, TIMELINE_ENTRIES, UNCHARGED

_POLL_SECONDS = 0.05
GRACE_SECONDS = 30.0  # the supervisor enforces the limit itself; this backstop only catches a stuck supervisor


class _StatusWatcher:
    """Follows the stages the supervisor announces and splits wall time by who was at work."""

    def __init__(self, path: Path):
        self.path = path
        self.stage = "start"
        self._entered = time.monotonic()
        self._done: dict[str, float] = {}
        self._seen = 0
        self.timeline: list[list[object]] = []  # [stage, the supervisor's seconds] as announced: a lost result's stages_at

    def poll(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return
        now = time.monotonic()
        for line in lines[self._seen :]:
            self._done[self.stage] = self._done.get(self.stage, 0.0) + now - self._entered
            self.stage, _, at = line.partition(" ")
            self._entered = now
            with contextlib.suppress(ValueError):  # a line cut short by a kill
                if len(self.timeline) < TIMELINE_ENTRIES:
                    self.timeline.append([self.stage, float(at)])
        self._seen = len(lines)

    def seconds_in(self, stages: frozenset[str]) -> float:
        spent = sum(v for k, v in self._done.items() if k in stages)
        return spent + (time.monotonic() - self._entered if self.stage in stages else 0.0)

    def split(self) -> dict[str, float]:
        """Seconds in each stage so far (the current one until now)."""
        spent = dict(self._done)
        spent[self.stage] = spent.get(self.stage, 0.0) + time.monotonic() - self._entered
        return {k: round(v, 4) for k, v in spent.items()}

    def candidate_seconds(self) -> float:
        now = time.monotonic()
        total = sum(self._done.values()) + now - self._entered
        return total - self.seconds_in(UNCHARGED)


def _kill_group(proc: subprocess.Popen | forkserver.ForkedProcess) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def supervisor_env(config: EvalConfig) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)  # changes per test: it would start a fork server per item
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    prefix = bytecode_prefix()  # where torch has no bytecode installed: a trusted cache, read by every judge process
    if prefix:
        env["PYTHONPYCACHEPREFIX"] = prefix
    env.update(TIMING_ENV)  # the reference's runner thread lives here: the same allocator and threads as a runner process
    # the fork server sizes inputs on the meta device ahead (forkserver.warm_meta: sympy and torch's decompositions, 2 CPU-
    # seconds on CI's machine): every problem is measured there before its judge (footprint.py), and a GPU supervisor
    # sizes inputs for its memory admission
    env[forkserver.WARM_META_ENV] = "1"
    if config.device == "cuda":
        env[forkserver.FUSED_ENV] = "1"
    return env


def start_ahead(config: EvalConfig) -> None:
    """Start the fork server this process's judges will fork their supervisors from now, ahead of the first item: it
    imports torch and sizes on the meta device before it serves (3-5 s; the first item of each xdist worker waited
    4.4-6.5 s for it, on CPU and on the H200s)."""
    if config.worker_start == "forkserver":
        with contextlib.suppress(OSError):
            forkserver.server_for(supervisor_env(config))


def _start(config: EvalConfig, work: Path, spec: Assignment, log) -> subprocess.Popen | forkserver.ForkedProcess:
    env = supervisor_env(config)
    server = None
    if config.worker_start == "forkserver":
        try:
            server = forkserver.server_for(env)
        except OSError:
            server = None
    spec.parent_pid = server.pid if server is not None else os.getpid()
    spec.write(work / "spec.json")
    if server is not None:
        try:
            return server.spawn(str(work / "spec.json"), str(work / "supervisor.log"), str(work), 0)
        except forkserver.ForkServerError:
            spec.parent_pid = os.getpid()  # fall back to a fresh interpreter
            spec.write(work / "spec.json")
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_kernelbench.judge.supervisor", str(work / "spec.json")],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(work), env=env,
        start_new_session=True, preexec_fn=child_setup(0, os.getpid()),
    )  # fmt: skip


def evaluate(
    problem: Problem,
    candidate: Candidate,
    config: EvalConfig,
    *,
    build_only: bool = False,
    build_rank: int = 0,
    stop: threading.Event | None = None,
) -> EvalResult:
    """Judge ``candidate`` against ``problem``; never raises for candidate faults.

    ``build_only``: only the candidate's build step, so that its extension lands in the build
    cache (outcome ``correct`` then means "built"); see :mod:`pytest_kernelbench.build.pool`. ``build_rank``: how many
    builds the pool queued ahead of this one (a lower priority each: ``runner.build_nice``).
    ``stop``: when set, the supervisor is killed and the result says so (session ending).
    """
    started = time.monotonic()
    config = config.for_level(problem.level)  # --ref-mode unset: eval for PIKE's levels, train for KernelBench's
    base = EvalResult(problem=problem.id, level=problem.level, problem_id=problem.problem_id, outcome=Outcome.UNKNOWN_ERROR,
                      device=config.device_label, mode=config.mode, ref_mode=config.ref_mode, source_hash=candidate.source_hash,
                      candidate_path=candidate.path, tolerance=config.tol.to_dict())  # fmt: skip
    unavailable = mode_unavailable(config.mode, config.device)
    if unavailable:  # no verdict: this machine cannot run the baseline (pytest skips such items before they get here)
        base.outcome, base.message, base.extra = Outcome.HARNESS_ERROR, unavailable, Extra(skipped=unavailable)
        return base
    measured = None if build_only else _footprint(problem, config)
    if not build_only:  # before the judge starts: a problem whose data cannot fit is no verdict (judge/footprint.py)
        fitted = footprint.fit(problem, config, measured)
        if fitted.skip:
            base.outcome, base.message, base.extra = Outcome.HARNESS_ERROR, fitted.skip, Extra(skipped=fitted.skip)
            return base
        config = fitted.config
        if fitted.note:
            base.extra.footprint = fitted.note
    Path(config.build_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kb-eval-") as tmp:
        work = Path(tmp)
        (work / "problem.py").write_text(problem.source)
        (work / "candidate.py").write_text(candidate.source)
        spec = Assignment(str(work / "problem.py"), str(work / "candidate.py"), tmp, str(work / "result.json"),
                          str(work / "status.log"), config, build_only, build_rank)  # fmt: skip
        log_path = work / "supervisor.log"
        with log_path.open("wb") as log:
            proc = _start(config, work, spec, log)
            watcher = _StatusWatcher(Path(spec.status_path))
            base.extra.supervisor_pid = proc.pid
            why = ""
            try:
                why = _watch(proc, watcher, config, stop)
            finally:
                _kill_group(proc)  # the supervisor's group; its runners die with it (sandbox) or were killed by it
        watcher.poll()
        base.wall_seconds = time.monotonic() - started
        result_path = Path(spec.result_path)
        if not why and result_path.exists():
            result = _machine_fault(_merge(base, json.loads(result_path.read_text())), config)
            if config.device == "cuda" and result.correct and not build_only:  # the problem's bound on this GPU
                result.extra.speed_of_light = sol.speed_of_light(measured, result.device_name, result.ref_ms, result.new_ms)
            return result
        base.stage_seconds = watcher.split()  # no result of the supervisor's: the split it announced, as seen here
        base.extra.stages_at = watcher.timeline or None
        return _lost(base, why, watcher.stage, proc.returncode, read_tail(log_path, config.log_chars), config, problem)


def _footprint(problem: Problem, config: EvalConfig) -> footprint.Footprint | None:
    """The problem's footprint (:mod:`.footprint`), measured once per process in a child like a supervisor; None when
    not wanted or not known."""
    if not footprint.wanted(problem, config):
        return None
    return footprint.remembered(problem.source, lambda: _measure(problem, config))


def _measure(problem: Problem, config: EvalConfig) -> footprint.Footprint | None:
    with tempfile.TemporaryDirectory(prefix="kb-footprint-") as tmp:
        path, log_path = Path(tmp) / "problem.py", Path(tmp) / "footprint.log"
        path.write_text(problem.source)
        env = supervisor_env(config)
        with log_path.open("wb") as log:
            proc: subprocess.Popen | forkserver.ForkedProcess | None = None
            if config.worker_start == "forkserver":
                with contextlib.suppress(OSError, forkserver.ForkServerError):
                    proc = forkserver.server_for(env).spawn(str(path), str(log_path), tmp, 0, entry=footprint.__name__)
            if proc is None:
                proc = subprocess.Popen([sys.executable, "-m", footprint.__name__, str(path)], stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, cwd=tmp, env=env, start_new_session=True)  # fmt: skip
            try:
                proc.wait(timeout=footprint.CHILD_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            finally:
                _kill_group(proc)
        return footprint.read_child(path)


def _watch(proc, watcher: _StatusWatcher, config: EvalConfig, stop: threading.Event | None) -> str:
    """'' when the supervisor ended by itself, else why it was stopped."""
    while proc.poll() is None:
        time.sleep(_POLL_SECONDS)
        watcher.poll()
        if watcher.candidate_seconds() > config.timeout + GRACE_SECONDS:
            return "timeout"
        if watcher.seconds_in(SETUP_STAGES) > config.setup_timeout + GRACE_SECONDS:
            return "setup"
        if stop is not None and stop.is_set():
            return "stopped"
    return ""


def _lost(base: EvalResult, why: str, stage: str, returncode: int | None, log_tail: str, config: EvalConfig,
          problem: Problem) -> EvalResult:
    """A result for an evaluation whose supervisor did not write one. A supervisor killed by SIGKILL that nobody here
    sent is the kernel's out-of-memory killer at work: no verdict on the candidate, a skip that says so."""
    base.stage = stage
    if not why and returncode == -signal.SIGKILL:
        line = footprint.killed(problem, _footprint(problem, config), stage)
        base.outcome, base.message, base.extra = Outcome.HARNESS_ERROR, line, Extra.from_dict({**base.extra.to_dict(), "skipped": line})
        return base
    tail = f"\n--- supervisor log tail ---\n{log_tail}" if log_tail.strip() else ""
    if why == "timeout":
        base.outcome = Outcome.TIMEOUT
        base.message = f"timed out after {config.timeout:g} s during stage '{stage}'" + tail
    elif why == "setup":
        base.outcome = Outcome.HARNESS_ERROR
        base.message = (f"the harness took more than {config.setup_timeout:g} s to start and build the reference (stage "
                        f"'{stage}'); raise setup_timeout if the reference is that slow" + tail)  # fmt: skip
    elif why == "stopped":
        base.message = f"stopped during stage '{stage}': the session ended"
    else:
        base.outcome = Outcome.HARNESS_ERROR
        base.message = f"the supervisor {describe_exit(returncode)} during stage '{stage}' without writing a result" + tail
    return base


def _machine_fault(result: EvalResult, config: EvalConfig) -> EvalResult:
    """--device cpu-check: a compile error over a header of CUDA or torch that this machine lacks (and a GPU machine has)
    is the harness's, naming what to install (:func:`.cuda_headers.missing_header`), not the candidate's."""
    if config.device == "cpu-check" and result.outcome is Outcome.COMPILE_ERROR:
        from .compile_only import cuda_home
        from .cuda_headers import header_env, missing_header, torch_include_dir

        why = missing_header(result.message, cuda_home(), torch_include_dir(), header_env())
        if why:
            result.outcome, result.message = Outcome.HARNESS_ERROR, f"{why}\n{result.message}"
    return result


def _merge(base: EvalResult, found: dict) -> EvalResult:
    base.outcome = Outcome(found["outcome"])
    base.stage = found.get("stage", "")
    base.device_name = found.get("device_name", "")
    base.versions = found.get("versions", {})
    base.stage_seconds = {k: round(v, 4) for k, v in found.get("stage_seconds", {}).items()}
    base.max_abs_diff = found.get("max_abs_diff")
    base.trials = found.get("trials", 0)
    base.extra = Extra.from_dict({**base.extra.to_dict(), **(found.get("extra") or {})})
    samples = found.get("samples")
    if base.outcome is Outcome.CORRECT and samples:
        base.ref = TimingStats.from_samples(samples["ref"])
        base.new = TimingStats.from_samples(samples["new"])
        speedup = found.get("speedup")
        base.speedup = float(speedup) if speedup is not None else float("inf")
        base.message = ""
    else:
        base.message = found.get("message", "")
    return base
