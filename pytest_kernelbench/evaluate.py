"""Isolated evaluation: one candidate, one fresh subprocess, one :class:`EvalResult`.

The worker (``pytest_kernelbench.worker``) is forked from a server that imported torch
once (:mod:`pytest_kernelbench.forkserver`, the default on Linux) or started as a fresh
interpreter (``worker_start="spawn"``). Either way it runs in its own process group with its
output sent to a file. A hang past the time limit, a segfault, ``os._exit``, a
100 MB log: each becomes a result here, the whole process group (children the
candidate forked included) is killed, and the caller goes on with a clean slate.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import forkserver
from .candidates import Candidate
from .config import EvalConfig
from .outcome import STAGE_FAILURE, Outcome
from .problems import Problem
from .result import EvalResult, TimingStats

_POLL_SECONDS = 0.05


def _read_tail(path: Path, limit: int) -> str:
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            if size > limit:
                fh.seek(size - limit)
            data = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    if size > limit:
        return f"[log truncated: last {limit} of {size} bytes]\n" + data
    return data


# Stages where the harness, not the candidate, is at work: importing torch, building
# the reference (torch.compile in --mode compile can take minutes), making the inputs, or
# waiting for the device lock. They do not count against the candidate's time limit; they have their own.
SETUP_STAGES = frozenset({"start", "reference", "inputs"})
WAIT_STAGES = frozenset({"wait_lock"})


class _StatusWatcher:
    """Follows the stages the worker announces and splits wall time by who was at work."""

    def __init__(self, path: Path):
        self.path = path
        self.stage = "start"
        self._entered = time.monotonic()
        self._done: dict[str, float] = {}
        self._seen = 0

    def poll(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return
        now = time.monotonic()
        for line in lines[self._seen :]:
            self._done[self.stage] = self._done.get(self.stage, 0.0) + now - self._entered
            self.stage, self._entered = line.partition(" ")[0], now
        self._seen = len(lines)

    def seconds_in(self, stages: frozenset[str]) -> float:
        spent = sum(v for k, v in self._done.items() if k in stages)
        return spent + (time.monotonic() - self._entered if self.stage in stages else 0.0)

    def candidate_seconds(self) -> float:
        """Wall time charged to the candidate: everything but setup and lock waits."""
        now = time.monotonic()
        total = sum(self._done.values()) + now - self._entered
        return total - self.seconds_in(SETUP_STAGES | WAIT_STAGES)


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _kill_group(proc: subprocess.Popen | forkserver.ForkedProcess) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "ended (exit status unknown)"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def worker_env(config: EvalConfig) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)  # changes per test: it would start a fork server per item
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env["TORCH_EXTENSIONS_DIR"] = config.build_dir
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def evaluate(
    problem: Problem,
    candidate: Candidate,
    config: EvalConfig,
    *,
    build_only: bool = False,
    stop: threading.Event | None = None,
) -> EvalResult:
    """Judge ``candidate`` against ``problem`` in a fresh subprocess; never raises for candidate faults.

    ``build_only``: only import the candidate, so that its extensions land in the build
    cache (outcome ``correct`` then means "built"); see :mod:`pytest_kernelbench.prebuild`.
    ``stop``: when set, the worker is killed and the result says so (session ending).
    """
    started = time.monotonic()
    base = EvalResult(
        problem=problem.id,
        level=problem.level,
        problem_id=problem.problem_id,
        outcome=Outcome.UNKNOWN_ERROR,
        device=config.device_label,
        mode=config.mode,
        source_hash=candidate.source_hash,
        candidate_path=candidate.path,
    )
    Path(config.build_dir).mkdir(parents=True, exist_ok=True)
    memory_limit = int(config.max_memory_gb * 2**30)
    with tempfile.TemporaryDirectory(prefix="kb-eval-") as tmp:
        work = Path(tmp)
        problem_path = work / f"problem_{problem.name}.py"
        candidate_path = work / f"candidate_{problem.name}.py"
        problem_path.write_text(problem.source)
        candidate_path.write_text(candidate.source)
        env = worker_env(config)
        cpu_limit = memory_limit if config.device == "cpu" else 0  # CUDA needs a huge address space: RSS watch below
        server = None
        if config.worker_start == "forkserver":
            try:
                server = forkserver.server_for(env)
            except OSError:
                server = None
        spec = {
            "problem_path": str(problem_path),
            "candidate_path": str(candidate_path),
            "result_path": str(work / "result.json"),
            "status_path": str(work / "status.log"),
            "config": config.to_dict(),
            "build_only": build_only,
            "parent_pid": server.pid if server is not None else os.getpid(),
        }
        (work / "spec.json").write_text(json.dumps(spec))
        log_path = work / "worker.log"
        with log_path.open("wb") as log:
            proc = None
            if server is not None:
                try:
                    proc = server.spawn(str(work / "spec.json"), str(log_path), tmp, cpu_limit)
                except forkserver.ForkServerError:
                    spec["parent_pid"] = os.getpid()  # fall back to a fresh interpreter
                    (work / "spec.json").write_text(json.dumps(spec))
            if proc is None:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest_kernelbench.worker", str(work / "spec.json")],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=tmp,
                    env=env,
                    start_new_session=True,
                    preexec_fn=forkserver.child_setup(cpu_limit, os.getpid()),
                )
            timed_out = setup_too_long = over_memory = stopped = False
            watcher = _StatusWatcher(Path(spec["status_path"]))
            try:
                while proc.poll() is None:
                    time.sleep(_POLL_SECONDS)
                    watcher.poll()
                    if watcher.candidate_seconds() > config.timeout:
                        timed_out = True
                        break
                    if watcher.seconds_in(SETUP_STAGES) > config.setup_timeout:
                        setup_too_long = True
                        break
                    if stop is not None and stop.is_set():
                        stopped = True
                        break
                    if memory_limit and config.device != "cpu" and _rss_bytes(proc.pid) > memory_limit:
                        over_memory = True
                        break
            finally:
                _kill_group(proc)  # also reaps children the candidate left behind
        watcher.poll()
        stage = watcher.stage
        log_tail = _read_tail(log_path, config.log_chars)
        base.wall_seconds = time.monotonic() - started
        result_path = Path(spec["result_path"])
        if over_memory:
            base.outcome, base.stage = STAGE_FAILURE.get(stage, Outcome.UNKNOWN_ERROR), stage
            base.message = f"used more than {config.max_memory_gb:g} GB of host memory during stage '{stage}'" + _with_log(log_tail)
            return base
        if stopped:
            base.stage, base.message = stage, f"stopped during stage '{stage}': the session ended"
            return base
        if setup_too_long:
            base.outcome, base.stage = Outcome.UNKNOWN_ERROR, stage
            base.message = (
                f"the harness took more than {config.setup_timeout:g} s to start and build the reference"
                f" (stage '{stage}'); raise setup_timeout if the reference is that slow" + _with_log(log_tail)
            )
            return base
        if timed_out:
            base.outcome, base.stage = Outcome.TIMEOUT, stage
            base.message = f"timed out after {config.timeout:g} s during stage '{stage}'" + _with_log(log_tail)
            return base
        if not result_path.exists():
            base.stage = stage
            if proc.returncode is not None and proc.returncode < 0:  # a signal: segfault, abort, OOM kill
                base.outcome = STAGE_FAILURE.get(stage, Outcome.UNKNOWN_ERROR)
            base.message = (
                f"worker {_describe_exit(proc.returncode)} during stage '{stage}' without reporting a result"
                + _with_log(log_tail)
            )
            return base
        return _merge(base, json.loads(result_path.read_text()), log_tail)


def _with_log(log_tail: str) -> str:
    return f"\n--- log tail ---\n{log_tail}" if log_tail.strip() else ""


def _merge(base: EvalResult, found: dict, log_tail: str) -> EvalResult:
    base.outcome = Outcome(found["outcome"])
    base.stage = found.get("stage", "")
    base.device_name = found.get("device_name", "")
    base.versions = found.get("versions", {})
    base.stage_seconds = {k: round(v, 4) for k, v in found.get("stage_seconds", {}).items()}
    base.max_abs_diff = found.get("max_abs_diff")
    base.trials = found.get("trials", 0)
    base.extra = found.get("extra", {})
    samples = found.get("samples")
    if base.outcome is Outcome.CORRECT and samples:
        base.ref = TimingStats.from_samples(samples["ref"])
        base.new = TimingStats.from_samples(samples["new"])
        base.speedup = base.ref.median / base.new.median if base.new.median > 0 else float("inf")
        base.message = ""
    else:
        base.message = found.get("message", "") + (_with_log(log_tail) if base.outcome is not Outcome.CORRECT else "")
    return base
