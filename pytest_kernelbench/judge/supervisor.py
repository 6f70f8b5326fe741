# ruff: noqa: E402  (the clock starts before the imports, torch among them)
"""The supervisor: one evaluation's trusted side. It never imports candidate code.

    python -m pytest_kernelbench.judge.supervisor SPEC.json     (or forked by the fork server)

It loads the problem (to make inputs), and starts two runner processes
(:mod:`pytest_kernelbench.judge.runner`): the reference's, trusted, as a plain child, and the
candidate's in the sandbox (:mod:`pytest_kernelbench.judge.sandbox`), after a sandboxed build step
when the candidate compiles an extension. Both sides are the same code in the same kind of
process with the same settings, so both are timed alike (a thread of the supervisor would not be:
on a GPU it skips the context switches the candidate's calls pay). Every input is made here from a seed drawn from the OS
for that call alone, copied into each side's shared buffers, and every call's output is sealed and
compared here. Statistics, the wall-clock cross-check, the speedup and the result are computed
and written here. A runner's replies are data, checked field by field
(:func:`~pytest_kernelbench.judge.protocol.parse_reply`).

Stages, announced on the status file the controller reads (a runner cannot write it): reference,
compile, init, run (trials), compare, trace, time, recheck (the candidate's process gone: the
output's sensitivity and the speedup), then, where the timing is to be repeated in fresh runner
processes (``time_again``), reference, compile, init and time once more; ``wait_lock`` before each
device phase.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()  # before torch's import: what a fresh interpreter spends starting counts as 'start'

import contextlib
import dataclasses
import gc
import json
import math
import os
import resource
import secrets
import select
import shutil
import socket
import statistics
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from filelock import Timeout

from ..candidates import builds_cuda_extension, builds_extension
from ..config import compile_mode
from . import cores, fused
from . import protocol as p
from .assignment import Assignment, describe_exit, read_tail
from .compare import Sealer, compare_chunked, compare_tensors, digest_value, flatten, values_equal
from .locking import admitted, cpu_timing_holder, device_lock, mark_cpu_timing, wait_while_cpu_timing
from .policy import compute_ops
from .runner import PROFILE_ENV, profiled, serve
from .sandbox import (
    SCRATCH,
    TIMING_ENV,
    ForkedRunner,
    Mounts,
    ProcessTree,
    RunnerProcess,
    SandboxInfo,
    SandboxUnavailable,
    become_subreaper,
    descendants,
    freeze_tree,
    kill_tree,
    resolve,
    runner_env,
    secret_paths,
    thaw,
    tree_cpu_seconds,
)
from .stats import PROCESS_SD, SPARE_PAIRS, PairTiming, Stopper, WallCheck, another_pair, combine_pairs, speedup_interval, wall_check
from .transport import Channel, ChannelClosed, ChannelTimeout, ProtocolError, SharedBuffer, contiguous_strides

if TYPE_CHECKING:
    from ..build.pch import Requests

_perf_counter = time.perf_counter
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
CHARGED = frozenset({"compile", "init", "run", "compare", "trace", "time"})  # stages whose time is the candidate's
CANDIDATE_FAILURE = {"compile": "compile_error", "init": "init_error", "run": "runtime_error", "compare": "runtime_error",
                     "trace": "runtime_error", "time": "runtime_error"}  # fmt: skip
ADMISSION_MARGIN_BYTES = 1 << 30  # a CUDA context, cuBLAS workspaces, Triton's first compiles
JIT_CACHE_BYTES = 2 << 30  # a candidate's Triton and inductor caches beyond this are emptied after its judge
# A candidate's first call gets a shared phase of its own (warm_up) where the trials' admission is at least this many
# times the candidate's alone; KB_WARM_STEP=0 leaves it in the first trial
WARM_STEP_RATIO = 2.0
WARMUP_UNLOCKED_BYTES = 1 << 30  # a compile-mode warm-up with bigger inputs holds the device lock (8 workers ran an H100 out of memory)
POLL = 0.25
CACHED_BUILD_WAIT_S = 2.0  # launch_early: how long a judge waits for a build folder's lock held by a pool's quick check
POLL_BUILD = 0.02  # a build step: how soon it stops for another evaluation's CPU timing (pause_for_timing)
POLL_SHARED = 0.05  # in a shared phase: how soon a long call notices a waiting exclusive holder (step_aside)
PCH_WAIT_S = 180.0  # a build step's binding compile waits at most this long for a shared PCH the judge builds for it
STEP_ASIDE_AFTER = 0.25  # seconds a candidate's call runs in a shared phase before it steps aside for one
AUTO_ROUND_CALLS = 16  # a timing round's calls per side at most, unless --round-calls says (calls_per_round) ...
ROUND_BYTES = 256 << 20  # ... within this many bytes of one side's shared inputs and outputs ...
ROUND_MS = 25.0  # ... and this many milliseconds of the reference's fastest call so far (a round's length)
BUFFER_ALIGN = 512  # bytes: where each tensor of a phase's one shared buffer starts
# A GPU timing phase's buffers have room to move in (docs/judge.md, "Where a side's inputs sit"): a quarter of their size
# and SHIFT_MAX at most, in SHIFT_STEP steps (none below one step); every call of the phase places its set anew there
SHIFT_STEP = 2 << 20
SHIFT_MAX = 1 << 30
CHECK_ONE_IN = 4  # above check_all_below_mb, a timed call is checked with probability 1/CHECK_ONE_IN ...
MIN_CHECKED = 4  # ... and timing goes on until at least this many timed calls were
# A GPU call too big to share a round (its inputs and outputs above ROUND_BYTES) costs a full fresh input set a sample
# (three copies of multi-GB inputs), so its timing may stop at EARLY_SAMPLES samples once both medians are known within
# EARLY_REL_ERR (a self-speedup's +-2% at about 3 sigma) and EARLY_CHECKED of its calls were checked, each with
# probability EARLY_CHECK_P: more checks than 30 calls at 1/CHECK_ONE_IN give (docs/judge.md, "Which calls are checked")
EARLY_SAMPLES = 16
EARLY_REL_ERR = 0.005
EARLY_CHECKED = 8
EARLY_CHECK_P = 0.5
PAIR_START_S = 10.0  # time_again: a new pair of runners' start, beyond the first pair's init and time stages
PAUSE_LIMIT = 120.0  # seconds a build step waits for one CPU timing phase at most (a phase times for max_time)
CHECK_ARCH = "9.0"  # --device cpu-check compiles CUDA for this architecture unless TORCH_CUDA_ARCH_LIST names one (no GPU to ask)


class Verdict(Exception):
    """The evaluation ends here with ``outcome`` (anything but correct)."""

    def __init__(self, outcome: str, message: str):
        super().__init__(message)
        self.outcome, self.message = outcome, message


class Status:
    """Appends ``<stage> <seconds>`` lines for the controller and keeps the seconds spent per stage."""

    def __init__(self, path: str, started: float | None = None):
        self._fh = open(path, "a", buffering=1)
        self.stage = "start"
        self._t0 = self._entered = started if started is not None else _perf_counter()
        self.stage_seconds: dict[str, float] = {}

    def enter(self, stage: str) -> None:
        now = _perf_counter()
        self.stage_seconds[self.stage] = self.stage_seconds.get(self.stage, 0.0) + now - self._entered
        self.stage, self._entered = stage, now
        self._fh.write(f"{stage} {now - self._t0:.3f}\n")
        self._fh.flush()

    def charged(self) -> float:
        spent = sum(v for k, v in self.stage_seconds.items() if k in CHARGED)
        return spent + (_perf_counter() - self._entered if self.stage in CHARGED else 0.0)


class Side:
    """One party: the reference (a runner on a thread here) or the candidate (a sandboxed runner process)."""

    def __init__(self, name: str, channel: Channel, process: RunnerProcess, log: Path, trusted: bool = False):
        self.name, self.channel, self.process, self.log = name, channel, process, log
        self.trusted = trusted  # the reference's runner: never runs candidate code
        self.tree: ProcessTree | None = None  # its process tree (the candidate's), kept from one stop to the next
        self.frozen = False  # stopped between requests
        self.asked = False  # sent a request since its last phase end: it may hold device memory to give back
        self.buffers: dict[int, SharedBuffer] = {}
        self.sets: list[CallSet] = []  # this phase's shared buffers: one set per call of a timing round
        self.home: list[CallSet] = []  # the sets as made, where the buffer has room to move them (slack > 0)
        self.slack = 0
        self.places: set[int] = set()  # the offsets the sets were moved by in this phase
        self._next_id = 0

    @property
    def args(self) -> list[p.Node]:
        return self.sets[0].args if self.sets else []

    @property
    def inputs(self) -> list[torch.Tensor]:
        return self.sets[0].inputs if self.sets else []

    @property
    def slots(self) -> list[torch.Tensor]:
        return self.sets[0].slots if self.sets else []

    def new_ids(self, count: int) -> list[int]:
        ids = list(range(self._next_id, self._next_id + count))
        self._next_id += count
        return ids

    def drop_buffers(self) -> list[int]:
        ids = list(self.buffers)
        self.buffers.clear()
        self.sets, self.home, self.slack, self.places = [], [], 0, set()
        return ids


@dataclasses.dataclass
class CallSet:
    """One call's shared buffers on one side: its inputs (the nodes the runner decodes, the supervisor's views of
    them) and its output slots (views, and the ``expect`` tree naming them)."""

    args: list[p.Node]
    inputs: list[torch.Tensor]
    slots: list[torch.Tensor] = dataclasses.field(default_factory=list)
    expect: p.Node | None = None
    buffer: SharedBuffer | None = None  # the one its tensors are in

    def moved(self, by: int) -> CallSet:
        """This set ``by`` bytes further into its buffer: its nodes and its views."""
        assert self.buffer is not None
        buf = self.buffer

        def view(t: torch.Tensor) -> torch.Tensor:
            return buf.view(t.dtype, list(t.shape), offset=buf.offset_of(t) + by)

        expect = None if self.expect is None else _moved_node(self.expect, by)
        return CallSet([_moved_node(a, by) for a in self.args], [view(t) for t in self.inputs], [view(t) for t in self.slots],
                       expect, buf)  # fmt: skip


def slack_bytes(total: int) -> int:
    """Room beyond ``total`` bytes of a GPU timing phase's buffer for its sets to move in (:data:`SHIFT_STEP` steps)."""
    return min(SHIFT_MAX, total // 4) // SHIFT_STEP * SHIFT_STEP


class Record:
    """One side's calls of a round as the supervisor saw them: a reply and its seals per call (none for a call not
    checked), and the wall time of all of them together."""

    def __init__(self, replies: list[p.Called], wall_ms: float, seals: list[list[torch.Tensor]]):
        self.replies, self.wall_ms, self.seals = replies, wall_ms, seals


class Supervisor:
    def __init__(self, spec: Assignment, status: Status):
        self.spec = spec
        self.cfg = spec.config
        self.status = status
        self.work = Path(spec.work)
        self.found: dict[str, Any] = {"extra": {}}
        self.device = torch.device("cuda", self.cfg.device_index) if self.cfg.device == "cuda" else torch.device("cpu")
        self.sealer = Sealer()
        self.ref: Side | None = None
        self.new: Side | None = None
        self.sandbox: SandboxInfo | None = None
        self._quiet_s: float | None = None  # a probe kernel's round trip on a quiet GPU
        self._sharing = False  # in a shared device phase: other judges' work is on the GPU too
        self._lock: Any = None  # the device lock of the phase held now (step_aside lets it go and takes it again)
        self._core: set[int] | None = None  # in a GPU time phase: the one core both runners are bound to (on_timing_core)
        self.samples: dict[str, list[float]] = {"ref": [], "new": []}  # the runners' claims, ms
        self.walls: dict[str, list[float]] = {"ref": [], "new": []}  # the supervisor's own clock, ms
        self.source = Path(spec.candidate_path).read_text()
        self.ref_peak_bytes = 0  # the reference runner's peak device memory (its first call), for admission
        self.ref_ms = math.inf  # the reference's fastest call so far (its first, then the trials'): calls_per_round
        self.round_calls = 1  # calls of each side in one timing round (calls_per_round)
        self.io_bytes = (0, 0)  # (inputs, outputs) of one call: the supervisor's shared buffers are made of these
        self._jit: Path | None = None  # this source's Triton and inductor caches (jit_cache)
        self._key: str | None = None  # build_key()
        self._pch: Requests | None = None  # the running build step's requests for a shared PCH (build)
        self.folder: Path | None = None  # the candidate's build folder (its runners bind it), once built or found cached
        self.pairs: list[PairTiming] = []  # each pair of runner processes' timing (time_again)
        self.pair_samples: dict[str, list[float]] = {"ref": [], "new": []}  # every pair's timed samples, ms
        self.spares: list[Side] = []  # reference runners for later process pairs, forked with the first (reference)
        self.pair_refs: list[str] = []  # how each pair's reference runner started: forked, or a new interpreter
        self.needs_build = builds_extension(self.source)
        self.cpu_check = self.cfg.device == "cpu-check"  # no GPU: CUDA candidates compiled only, others run on the CPU, untimed
        self.compile_only = self.cpu_check and builds_cuda_extension(self.source)

    # -------------------------------------------------------------- the evaluation

    def run(self) -> dict[str, Any]:
        outcome, message = "correct", ""
        try:
            if self.spec.build_only:
                self.prebuild()
            else:
                if self.compile_only:
                    self.check_build()
                self.reference()
                self.compile()
                self.init()
                self.warm_up()
                self.trials()
                if self.cpu_check:
                    raise self.checked()
                self.time()
                self.recheck()
                self.time_again()
        except Verdict as verdict:
            outcome, message = verdict.outcome, verdict.message + self.scaled_note()
        except BaseException as exc:  # noqa: BLE001 - the harness's own fault is still a result
            outcome, message = "harness_error", "the judge failed: " + "".join(traceback.format_exception(exc))[-4000:]
        finally:
            self.stop_candidate()
            for side in (self.ref, *self.spares):
                self.stop_side(side)
            self.trim_jit_cache()
            used = resource.getrusage(resource.RUSAGE_SELF)  # since this process was forked or started
            self.add_cpu("supervisor", used.ru_utime + used.ru_stime)
        stage = self.status.stage
        self.status.enter("done")
        self.found.update(outcome=outcome, message=message, stage="done" if outcome == "correct" else stage,
                          stage_seconds=self.status.stage_seconds)  # fmt: skip
        return self.found

    def remaining(self) -> float:
        return self.cfg.timeout - self.status.charged()

    def reference(self) -> None:
        """Load the problem here (for inputs), the reference in its runner process; learn the output's structure."""
        self.status.enter("reference")
        self.ref = self.start_reference()  # before this process touches CUDA: then it can be forked
        # and the reference runners of later process pairs (time_again), forked now too: idle until then, and alike
        for k in range(self.spares_wanted()):
            self.spares.append(self.start_reference(tag=f"-{k + 2}"))
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if self.cpu_check:
            self.scale_problem()
        self.problem = _load_module("kb_problem", self.spec.problem_path)
        for needed in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.problem, needed):
                raise Verdict("harness_error", f"the problem defines no {needed}")
        self.resolve_sandbox()
        self.seed_all(self.cfg.seed)
        self.init_values = list(self.problem.get_init_inputs())
        self.launch_early()
        self.ready_reference()
        big = self.cfg.mode != "eager" and self.device.type == "cuda" and input_bytes(self.problem) > WARMUP_UNLOCKED_BYTES
        locked = self.cfg.mode == "eager" or big
        with self.device_phase("reference") if locked else contextlib.nullcontext():
            self.out_spec = self.discover()
            if self.device.type == "cuda":  # before any candidate code runs: the GPU is ours and the reference's
                with self.split("reference.probe_floor"):
                    self._quiet_s = self._probe_floor()
        if self.device.type == "cuda" and self.io_bytes[1] >= fused.MIN_ELEMENTS * 4:  # big outputs: seals, comparisons
            with self.split("reference.fused_warm"):  # compiled (or loaded) now, not in a locked phase
                self.found["extra"]["fused_compare"] = fused.warm(self.device, self.sealer.k1, self.sealer.k2)

    def ready_reference(self) -> None:
        """The reference's runner set up, the problem's Model loaded in it and built (the seeded weights)."""
        # scrubbed on a GPU only, where freed device memory can reach another process; the kernel zeroes every page it
        # gives a process, and on a CPU (no cache flush between calls) the scrub warmed the reference's next output in
        # cache: bundled references judged against themselves, 16 cores, 10 of 20 within +-5% with it, 18 without
        scrub = self.device.type == "cuda"
        self.ask(self.ref, p.Setup(self.cfg.device, self.cfg.device_index, self.cfg.timer, torch.get_num_threads(), scrub_outputs=scrub,
                                   pin_threads=self.pin_cpu_runners), p.Ready)  # fmt: skip
        self.ask(self.ref, p.Load(Path(self.spec.problem_path).read_text(), "kb_reference.py", "Model", compile_mode(self.cfg.mode)),
                 p.Done)  # fmt: skip
        self.ask(self.ref, p.Init(self.encode(self.ref, self.init_values).args, self.cfg.seed, self.cfg.ref_mode), p.Done)

    def launch_early(self) -> None:
        """Start the candidate's runner now, so that it imports torch (seconds, in a fresh interpreter) while the
        reference works: when nothing is to be built, or when its build is in the cache already (a build pool
        ahead of the judge). Otherwise compile() starts it after the build step. No candidate code runs yet."""
        if self.spec.build_only or self.compile_only:
            return
        folder = self.cached_build() if self.needs_build else None
        if self.needs_build and folder is None:
            return
        self.folder = folder
        self.new = self.launch_runner(folder)
        self.found["extra"]["runner_early"] = True

    def launch_runner(self, folder: Path | None) -> Side:
        """The candidate's runner: its build folder (if any) under a throw-away overlay, its JIT caches writable."""
        mounts = Mounts(writable=[self.jit_cache()], overlay=[folder] if folder else [])
        return self.launch(self.candidate_env(folder), "runner.log", mounts)

    def cached_build(self) -> Path | None:
        """The candidate's build folder if a finished build is there now. A build in flight is not (it holds the folder's
        lock for minutes); a pool's build step that only finds the folder cached holds it for moments, hence a short wait
        (without it a re-judge, pool on, started one runner late: CI rehearsal at 15d79a4)."""
        from ..build.cache import BuildFolder

        folder = BuildFolder(self.cfg.build_dir, self.build_key(), timeout=CACHED_BUILD_WAIT_S)
        try:
            with folder:
                return folder.path if folder.cached else None
        except Timeout:
            return None

    def resolve_sandbox(self) -> None:
        self.found.update(device_name=_device_name(self.device), versions=_versions())
        try:
            self.sandbox = resolve(self.cfg.sandbox)
        except SandboxUnavailable as exc:
            raise Verdict("harness_error", str(exc)) from None
        self.found["extra"]["sandbox"] = self.sandbox.label

    def start_reference(self, fork: bool = True, tag: str = "") -> Side:
        """The reference's runner: a plain child process (trusted code; level 4 needs the network and caches).

        Forked from here (``fork``) while this process has not touched CUDA nor run a parallel CPU op
        (it has torch imported: a new interpreter would import it again; a child forked after OpenMP's
        threads started hangs in its first parallel region), else started as a new interpreter. Either way it runs
        :func:`runner.serve` with this process's environment, in which :data:`TIMING_ENV` is set
        (``controller.supervisor_env``), as the candidate's runner has it. ``tag``: a spare's folder and log."""
        scratch = self.work / f"reference{tag}"
        # under KB_PROFILE_DIR this process runs under cProfile, which a forked child inherits (3.12: a second one fails)
        if fork and not (self.device.type == "cuda" and torch.cuda.is_initialized()) and not os.environ.get(PROFILE_ENV):
            mine, theirs = socket.socketpair()
            log = self.work / f"reference{tag}.log"
            try:
                held = [side.channel.sock.fileno() for side in (self.ref, *self.spares) if side is not None]  # the other runners'
                held = [fd for fd in held if fd >= 0]
                process = ForkedRunner(serve, scratch=scratch, log_path=log, pass_fd=theirs.fileno(), close_fds=[mine.fileno(), *held])
            finally:
                theirs.close()
            return Side("reference", Channel(mine), process, log, trusted=True)
        env = {**os.environ, **TIMING_ENV, "PYTHONPATH": os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)}
        info = SandboxInfo("none", reason="the reference is trusted")
        return self.spawn("reference", info, env, Mounts(), scratch, log_name=f"reference{tag}.log", trusted=True)

    def discover(self) -> p.Node:
        """One reference call on fresh inputs, answered with the output's structure."""
        ref = self.ref
        with self.split("reference.inputs"):
            ref.sets = [self.encode(ref, self.make_inputs())]
        with self.split("reference.call"):
            reply = self.ask(ref, p.Call(ref.args, None), p.Called)
        if reply.structure is None:
            raise Verdict("harness_error", "the reference's runner did not describe its output")
        self.ref_peak_bytes, self.ref_ms = reply.peak_bytes, reply.ms
        outputs = sum(_nbytes(leaf) for leaf in _tensor_leaves(reply.structure))
        self.io_bytes = (sum(t.numel() * t.element_size() for t in ref.inputs), outputs)
        with self.split("reference.unmap"):
            self.end_phase_buffers(ref)
        return reply.structure

    def prebuild(self) -> None:
        """The build pool's evaluation: the sandboxed build step alone. No reference runner, no problem, no device
        lock: nothing of the judging (``correct`` means built; a --device cpu-check build ends ``built``)."""
        if self.compile_only:
            self.check_build()
        self.status.enter("compile")
        self.resolve_sandbox()
        if self.needs_build:
            self.build()

    def compile(self) -> None:
        """Build the candidate's extension in a sandboxed build step, then import it in its runner."""
        self.status.enter("compile")
        self.folder = self.build() if self.needs_build else None
        if self.new is None:  # not started early (launch_early)
            self.new = self.launch_runner(self.folder)
        self.load_candidate()

    def load_candidate(self) -> None:
        """The candidate's runner set up, and its ``ModelNew`` imported there (its build folder bound)."""
        self.set_up(self.new)
        self.ask(self.new, p.Load(self.source, "kb_candidate.py", "ModelNew"), p.Done)

    # -------------------------------------------------------------- --device cpu-check (no GPU)

    def check_build(self) -> None:
        """A CUDA extension: its sandboxed build step compiles every source with the commands torch writes (nvcc
        for CHECK_ARCH) and links nothing (compile_only.py); it never runs. Outcome built, or compile_error."""
        self.status.enter("compile")
        self.resolve_sandbox()
        self.found["extra"]["cpu_check"] = "nvcc"
        env = self.compiler_env()
        if "CUDA_HOME" not in env:
            raise Verdict("harness_error", "--device cpu-check: no CUDA toolkit here to compile the candidate's CUDA sources "
                          "with (no nvcc on PATH, in CUDA_HOME or /usr/local/cuda)")  # fmt: skip
        self.build()
        arch = env["TORCH_CUDA_ARCH_LIST"]
        raise Verdict("built", f"compiled with nvcc ({env['CUDA_HOME']}) for TORCH_CUDA_ARCH_LIST={arch}; not run (--device cpu-check)")

    def checked(self) -> Verdict:
        """Every trial's outputs matched on the CPU: the check passed; no timing without the GPU."""
        how = "triton-interpreter" if "triton" in self.source else "cpu"
        self.found["extra"]["cpu_check"] = how
        where = "in Triton's interpreter (TRITON_INTERPRET=1) on the CPU" if how == "triton-interpreter" else "on the CPU"
        return Verdict("built", f"matched the reference in {self.cfg.trials} trials {where}; not timed (--device cpu-check)")

    def scale_problem(self) -> None:
        """The problem's sizes scaled down where its source allows (shrink.py): both sides load that problem."""
        from .shrink import scaled

        path = Path(self.spec.problem_path)
        text, changes = scaled(path.read_text())
        if changes:
            path.write_text(text)
            self.found["extra"]["scaled"] = changes

    def scaled_note(self) -> str:
        from .shrink import describe

        changes = self.found["extra"].get("scaled")
        return f"\n(--device cpu-check ran the problem with its sizes scaled down: {describe(changes)})" if changes else ""

    def init(self) -> None:
        with self.device_phase("init", shared=True):
            self.ask(self.new, p.Init(self.encode(self.new, self.init_values).args, self.cfg.seed, self.cfg.ref_mode), p.Done)

    def warm_up(self, before_time: bool = False) -> None:
        """The candidate's first call (Triton JIT and autotune, inductor, graph capture: seconds of CPU) on fresh inputs,
        untimed and unchecked, in a shared phase admitted for the candidate's own footprint (:meth:`warm_bytes`) rather
        than for both sides' buffers. On a GPU, where that admission is at most 1/WARM_STEP_RATIO of the trials': for level
        1's multi-GB problems the trials' admits one judge at a time on 80 GB, and a first call that compiled there held
        every other judge's trials behind it (docs/performance.md, "Eleventh session"); and always ``before_time``, in a
        later pair of runners (:meth:`time_again`), whose first call would otherwise autotune in the exclusive ``time``
        phase. Its output is not looked at: every later call gets fresh inputs, so nothing it could keep from this one is
        of use."""
        need = self.warm_bytes()
        if self.device.type != "cuda" or os.environ.get("KB_WARM_STEP", "1") == "0":
            return
        if not before_time and self.admission_bytes() < WARM_STEP_RATIO * need:
            return
        with self.device_phase("run", shared=True, need=need), self.split("run.warm"):
            self.new.sets = self.encode_sets(self.new, [self.make_inputs()])
            self.ask(self.new, p.Call(self.new.args, None), p.Called, label="warm-up call (untimed)")
        self.found["extra"]["warm_step"] = True

    def trials(self) -> None:
        """Correctness trials, fresh inputs each; then the operator trace of one more call."""
        n = self.cfg.trials
        worst = 0.0
        with self.device_phase("run", shared=True):
            self.bind()
            for i in range(n):
                self.status.enter("run")
                worst = max(worst, self.judged_pair(f"trial {i + 1}/{n}", candidate_first=True))
            self.found.update(max_abs_diff=worst, trials=n)
            self.trace()

    def trace(self) -> None:
        self.status.enter("trace")
        self.refill(self.new, [self.make_inputs()])
        reply = self.ask(self.new, p.Trace(self.new.args, all_threads=self.cfg.strict), p.Traced, fail_ok=True)
        extra = self.found["extra"]
        if reply.ok:
            extra["aten_ops"], extra["aten_ops_all_threads"] = reply.ops, reply.all_threads
        else:
            extra["aten_ops"], extra["op_trace_error"] = {}, reply.error.strip().splitlines()[-1][:300]
        if self.cfg.profile and self.device.type == "cuda":
            self.profile()
        if self.cfg.strict:
            if not reply.ok:
                raise Verdict("rejected", "--strict: the operators of ModelNew.forward could not be traced: " + extra["op_trace_error"])
            compute = compute_ops(reply.ops)
            if compute:
                listed = ", ".join(f"{op} x{k}" for op, k in list(compute.items())[:10])
                raise Verdict("rejected", f"--strict: ModelNew.forward runs PyTorch compute ops: {listed}")

    def profile(self) -> None:
        """Where the candidate's time goes, per kernel: its own process's claim, kept for the agent's prompt only."""
        self.refill(self.new, [self.make_inputs()])
        reply = self.ask(self.new, p.Profile(self.new.args), p.Profiled, fail_ok=True)
        if reply.ok:
            self.found["extra"]["kernel_profile"] = {name: {"us": us, "launches": int(n)} for name, (us, n) in reply.kernels.items()}
        else:
            self.found["extra"]["kernel_profile_error"] = (reply.error.strip().splitlines() or [""])[-1][:300]

    def time(self) -> None:
        """Warm-up, then reference and candidate interleaved, each call on fresh inputs; every warm-up call and
        the timed calls :meth:`check_timed_call` picks are checked. A batch whose times the supervisor's clock
        does not vouch for is timed again, and the candidate is rejected only when the second batch, too, fails
        (an honest candidate's overhead is noise, a cheat's is there every time: docs/judge.md)."""
        with self.device_phase("time"), self.on_timing_core():
            with self.split("time.settle"):
                self.settle()
            graph = self.cfg.timer == "cuda-graph" and self.device.type == "cuda"
            self.round_calls = 1 if graph else self.calls_per_round()
            self.found["extra"]["calls_per_round"] = self.round_calls
            with self.split("time.bind"):
                self.bind(calls=self.round_calls, moving=not graph)  # a graph reads the places it was captured with
            if self.new.slack:
                self.found["extra"]["input_slack_mib"] = self.new.slack >> 20
            with self.split("time.warmup"):
                warm = math.ceil(self.cfg.warmup / self.round_calls)  # the warm-up's calls, in whole rounds, each checked
                for k in range(warm):
                    graph = self.timed_round(f"warm-up {self.unit} {k + 1}", k % 2 == 1, graph, keep=False)
            extra = self.found["extra"]
            for key in ("timed_calls", "checked_calls"):
                extra[key] = extra.get(key, 0) + warm * self.round_calls
            self.found["extra"]["timer"] = "cuda-graph" if graph else "events" if self.device.type == "cuda" else "perf_counter"
            with self.split("time.batch"):
                graph, check = self.timed_batch(graph)
            if not check.ok:
                first = check
                self.found["extra"]["wall_check_first_batch"] = first.to_dict()
                graph, check = self.timed_batch(graph, again=True)
            if self.new.slack:  # how many places its inputs were read from (the phase's end drops them)
                self.found["extra"]["input_places"] = len(self.new.places)
        self.found["extra"]["wall_check"] = check.to_dict()
        if not check.ok:
            raise Verdict("rejected", check.message() + f" (and in a first batch of timed calls: {first.excess_ms * 1e3:.0f} us "
                          f"over a bound of {first.bound_ms * 1e3:.0f} us)")  # fmt: skip
        self.confirmed_new_ms = check.confirmed_ms

    def timed_batch(self, graph: bool, again: bool = False) -> tuple[bool, WallCheck]:
        """Timed calls until the stopping rule is met and at least MIN_CHECKED of them were checked (new samples
        each batch); then the wall-clock cross-check of the batch."""
        robust = os.environ.get("KB_ROBUST_STOP", "1") != "0"  # the early stop's precision (Stopper.precise): IQR, or the std
        stopper = Stopper(self.cfg.timing_min_reps, self.cfg.max_reps, self.cfg.max_time, self.cfg.rel_err, self.round_calls, robust)
        self.samples, self.walls = {"ref": [], "new": []}, {"ref": [], "new": []}
        started, rounds, checked = _perf_counter(), 0, 0
        name = f"timed {self.unit}" + (" (second batch)" if again else "")
        early = self.early_stop()

        def enough() -> bool:
            if early and checked >= EARLY_CHECKED and stopper.precise(self.samples, EARLY_SAMPLES, EARLY_REL_ERR):
                return True
            return stopper.done(self.samples, _perf_counter() - started) and checked >= min(MIN_CHECKED, self.cfg.max_reps)

        while not enough():
            checks = [self.check_timed_call(early) for _ in range(self.round_calls)]
            graph = self.timed_round(f"{name} {rounds + 1}", rounds % 2 == 1, graph, keep=True, checks=checks)
            rounds, checked = rounds + 1, checked + sum(checks)
        extra = self.found["extra"]
        extra["timing_stop"] = "early" if early and len(self.samples["ref"]) < self.cfg.timing_min_reps else "rule"
        if early:  # which standard error the early stop read (stats.Stopper.precise)
            extra["early_stop_se"] = "iqr" if robust else "stdev"
        extra["checked_calls"] += checked
        extra["timed_calls"] += rounds * self.round_calls
        return graph, wall_check(self.samples["ref"], self.walls["ref"], self.samples["new"], self.walls["new"], self.device.type)

    def recheck(self) -> None:
        """The candidate's process is gone: how much the reference's output moves with its input; the speedup.

        The reference is not re-timed alone: on the H100 a reference timed without the candidate's
        kernels between its calls ran up to 23% faster (the GPU's power state), so only the
        interleaved medians compare like with like. Queued candidate work cannot slow the reference:
        every call drains the GPU before the next one (:meth:`call`).
        """
        self.status.enter("recheck")
        self.stop_candidate()
        with self.device_phase("recheck", shared=True):
            self.bind(sides=(self.ref,))
            self.found["extra"].update(self.sensitivity())
        self.add_pair()

    def add_pair(self) -> None:
        """This pair of runners' speedup and interval, and the result's: the pairs' so far (:func:`stats.combine_pairs`)."""
        ref, new = statistics.median(self.samples["ref"]), statistics.median(self.samples["new"])
        confirmed = max(new, self.confirmed_new_ms)  # what the supervisor's clock vouches for (stats.wall_check)
        speedup = ref / confirmed if confirmed > 0 else math.inf
        self.pairs.append(PairTiming(speedup, *speedup_interval(self.samples["ref"], self.samples["new"], speedup), confirmed > new))
        self.pair_refs.append("forked" if isinstance(self.ref.process, ForkedRunner) else "new interpreter")
        for key in ("ref", "new"):
            self.pair_samples[key] += self.samples[key]
        process_sd = self.process_sd  # one pair: the offset its processes drew, unseen by its rounds
        result = combine_pairs(self.pairs, process_sd)
        self.found["samples"] = {k: list(v) for k, v in self.pair_samples.items()}
        self.found["speedup"] = result.speedup
        self.found["extra"].update(speedup_capped=result.capped, speedup_noisy=result.noisy,
                                   speedup_interval=[round(result.lo, 4), round(result.hi, 4) if math.isfinite(result.hi) else None])
        if len(self.pairs) == 1:
            self.found["extra"]["speedup_process_sd"] = process_sd
        else:
            self.found["extra"].pop("speedup_process_sd", None)
            pairs = zip(self.pairs, self.pair_refs, strict=True)
            self.found["extra"]["process_pairs"] = [{**t.to_dict(), "reference": how} for t, how in pairs]

    @property
    def process_sd(self) -> float:
        """The offset a pair of runner processes draws on this device (:data:`stats.PROCESS_SD`)."""
        return PROCESS_SD.get(self.device.type, 0.0)

    def spares_wanted(self) -> int:
        """How many reference runners to fork now for later pairs of runner processes (:func:`stats.another_pair`): where
        ``--kb-process-pairs`` asks, one for each pair after the first; on a CPU, for the second and third (few results
        take a fourth or fifth: their references start as new interpreters); none on a GPU, where few results take a
        second pair and its reference starts as a new interpreter (this process has touched CUDA)."""
        if self.spec.build_only or self.cpu_check:
            return 0
        if self.cfg.process_pairs:
            return self.cfg.process_pairs - 1
        return SPARE_PAIRS - 1 if self.device.type == "cpu" else 0

    def time_again(self) -> None:
        """Time in fresh runner processes, both sides, while :func:`stats.another_pair` asks: an offset that lasts a
        whole evaluation belongs to the processes (where their threads and buffers landed; on a 16-core host a reference
        judged against itself printed 1.172, every round agreeing), and only new processes draw it again. Every call of
        a new pair is checked as in the first; the candidate is loaded again from its build folder, not built again."""
        while another_pair(self.pairs, self.cfg.process_pairs, self.device.type, self.process_sd):
            need = sum(self.status.stage_seconds.get(stage, 0.0) for stage in ("init", "time")) + PAIR_START_S
            if self.remaining() < need:  # the offset stays unknown: the speedup is not printed as a steady one
                self.found["extra"].update(speedup_noisy=True, process_pairs_skipped=f"{self.remaining():.0f} s left of the "
                                           f"candidate's time, a new pair of runners needs about {need:.0f} s")  # fmt: skip
                return
            self.status.enter("reference")
            self.stop_side(self.ref)
            self.status.enter("compile")
            self.new = self.launch_runner(self.folder)  # imports torch while the reference's new runner is readied
            self.status.enter("reference")
            # a spare forked with the first; else a new interpreter: this process has run parallel ops since that fork
            self.ref = self.spares.pop(0) if self.spares else self.start_reference(fork=False, tag=f"-{len(self.pairs) + 1}")
            self.ready_reference()
            self.status.enter("compile")
            self.load_candidate()
            self.init()
            self.warm_up(before_time=True)
            self.time()
            self.stop_candidate()
            self.add_pair()

    # -------------------------------------------------------------- calls

    def judged_pair(self, label: str, candidate_first: bool) -> float:
        with self.split("run/pair.inputs"):
            values = self.make_inputs()
        order = (self.new, self.ref) if candidate_first else (self.ref, self.new)
        records = {side.name: self.call(side, [values], label=label) for side in order}
        self.ref_ms = min(self.ref_ms, records["reference"].replies[0].ms)
        self.status.enter("compare")
        with self.split("run/pair.check"):
            return self.check(values, records["candidate"], records["reference"], label)

    @property
    def unit(self) -> str:
        return "call" if self.round_calls == 1 else "round"

    def calls_per_round(self) -> int:
        """How many calls of each side a timing round holds: ``--round-calls``, or on a GPU as many as fit in ROUND_MS
        of the reference's fastest call so far (AUTO_ROUND_CALLS at most; 1 on the CPU), so that waking, stopping and
        draining a runner (milliseconds: :meth:`call`) are paid once a round instead of once a call; either way no
        more than fit in ROUND_BYTES of one side's shared inputs and outputs."""
        by_bytes = ROUND_BYTES // max(1, sum(self.io_bytes))
        if self.cfg.round_calls:
            return int(max(1, min(self.cfg.round_calls, by_bytes)))
        if self.device.type != "cuda":
            return 1
        by_time = ROUND_MS / self.ref_ms if self.ref_ms > 0 else AUTO_ROUND_CALLS
        return int(max(1, min(AUTO_ROUND_CALLS, by_bytes, by_time)))

    def early_stop(self) -> bool:
        """Whether this timing may stop at EARLY_SAMPLES: on a GPU, for calls too big to share a round, unless
        ``min_reps`` was given."""
        return self.device.type == "cuda" and not self.cfg.min_reps and self.round_calls == 1 and sum(self.io_bytes) > ROUND_BYTES

    def check_timed_call(self, early: bool = False) -> bool:
        """Whether the next timed pair is checked (sealed and compared): always when the outputs are small,
        else with probability 1/CHECK_ONE_IN (EARLY_CHECK_P for a timing that may stop early), drawn from the OS's
        entropy in this process. The candidate cannot tell a checked call from another until it has returned; a
        candidate wrong on a fraction f of n timed calls goes unseen with probability (1 - f p)^n (docs/judge.md,
        "Which calls are checked")."""
        if self.io_bytes[1] < self.cfg.check_all_below_mb * 2**20:
            return True
        if early:
            return secrets.randbelow(1 << 16) < int(EARLY_CHECK_P * (1 << 16))
        return secrets.randbelow(CHECK_ONE_IN) == 0

    def timed_round(self, label: str, candidate_first: bool, graph: bool, keep: bool, checks: list[bool] | None = None) -> bool:
        """One round: each side's calls on the same fresh inputs (a set per call), one side after the other; the
        checked calls compared. A sample is a round's mean time per call, claimed and on the wall clock: a side has
        every input of the round before its first call, so it could move work between the round's calls (answer
        them all in the first, then copy), which a median over calls would not see and a round's sum does."""
        with self.split("time/round.inputs"):
            inputs = [self.make_inputs() for _ in range(self.round_calls)]  # one list of values per call
        checks = checks or [True] * self.round_calls
        order = (self.new, self.ref) if candidate_first else (self.ref, self.new)
        records = {side.name: self.call(side, inputs, label=label, graph=graph, seal=checks) for side in order}
        with self.split("time/round.check"):
            for i, values in enumerate(inputs):
                if checks[i]:
                    name = f"{label}, call {i + 1}" if len(inputs) > 1 else label
                    self.check(values, records["candidate"], records["reference"], name, i)
        for side, key in ((self.ref, "ref"), (self.new, "new")):
            rec = records[side.name]
            offstream = sum(reply.offstream for reply in rec.replies)
            if offstream:
                counts = self.found["extra"].setdefault("offstream_calls", {})
                counts[key] = counts.get(key, 0) + offstream
            if keep:
                self.samples[key].append(math.fsum(reply.ms for reply in rec.replies) / len(rec.replies))
                self.walls[key].append(rec.wall_ms / len(rec.replies))
        errors = [r.graph_error for rec in records.values() for r in rec.replies if r.graph_error]
        if graph and errors:
            self.found["extra"]["cuda_graph_error"] = errors[0]
            return False
        return graph

    def call(self, side: Side, inputs: list[list[Any]], *, label: str = "", graph: bool = False, seal: list[bool] | None = None) -> Record:
        """One side's calls of a round (one per list of values, each on its own call set), on the supervisor's clock
        from writing their inputs to the GPU being quiet again after the last.

        The candidate's runner is stopped (SIGSTOP, which cannot be caught) whenever it is not serving
        a request: nothing of the candidate's runs while the reference is called or compared. After
        its reply, a side's output is sealed and, on a GPU, the supervisor waits until no other
        context has work queued (:meth:`drain`), once before the side is stopped and once after:
        kernels a candidate left running behind its reply are waited for on its own wall clock,
        never on the reference's.
        """
        part = f"{self.status.stage}/call"  # split_s: where a call's time goes in each phase (within its parts, hence '/')
        with self.split(f"{part}.wake"):
            # continued (ask thaws it) and awake before the clock: neither is its time, and its inputs are still old ones
            self.ask(side, p.Ping(), p.Done, label=label, stop=False)
            # the GPU is quiet at the start: the pair's fresh inputs may still be being drawn (asynchronous kernels), and
            # the first side of a pair would pay for them in its window, a cost the other's window has not (stats.wall_check)
            self.sync()
        self.move(side)  # before the clock: new views and nodes, no device work
        start = _perf_counter()
        with self.split(f"{part}.inputs"):
            self.refill(side, inputs)
        sets = side.sets[: len(inputs)]
        request = p.Calls([p.Call(s.args, s.expect, graph) for s in sets])
        with self.split(f"{part}.request"):
            replies = self.ask(side, request, p.CalledEach, label=label, stop=False).calls
        if len(replies) != len(sets):
            raise self.failure(side, self.status.stage, f"{label}: {len(replies)} replies to {len(sets)} calls")
        # both sides seal a checked call, so that their wall windows hold the same work (stats.wall_check)
        seal = seal or [True] * len(sets)
        with self.split(f"{part}.seal"):
            seals = [[self.sealer.take(slot) for slot in s.slots] if sealed else [] for s, sealed in zip(sets, seal, strict=True)]
            self.sync()  # the seals are computed
        with self.split(f"{part}.drain"):
            self.drain(side)  # kernels it left queued behind its reply are its own time
        wall = (_perf_counter() - start) * 1e3
        # Stopping it is not its time (a sandboxed tree costs more to stop than the reference's process); what
        # it launched before it stopped is: a GPU still busy after the stop is waited for and charged to it.
        with self.split(f"{part}.stop"):
            self.freeze(side)
            wall += self.drain(side) * 1e3
        return Record(replies, wall, seals)

    def freeze(self, side: Side) -> None:
        """Stop the candidate's process tree (the reference's is trusted and waits on its socket: stopping
        it would only cost time, 1-2 ms a call on the H100); in a GPU time phase, bind its threads to the timing core
        again (:meth:`on_timing_core`: one it moved elsewhere during its call, or started, is moved back)."""
        if not side.trusted and side.process.poll() is None and not side.frozen:
            side.tree = side.tree or ProcessTree(side.process.pid)
            side.tree.freeze()
            side.frozen = True
            if self._core is not None:
                moved = cores.bind(side.tree.members, self._core)[1]
                self.found["extra"]["timing_core"]["moved_back"] += moved

    @contextlib.contextmanager
    def on_timing_core(self) -> Iterator[None]:
        """On a GPU, both runners bound to one core for the time phase (:mod:`.cores`: how fast a process dispatches
        a call depends on the core it landed on, and a short call's event window holds its dispatch), and back to this
        process's cores after it. ``KB_TIMING_CORE=0``: left where they are."""
        core = cores.timing_core(self.cfg.device_index) if self.device.type == "cuda" else None
        if core is None or os.environ.get("KB_TIMING_CORE", "1") == "0":
            yield
            return
        self._core = {core}
        record = self.found["extra"].setdefault("timing_core", {"core": core, "threads": 0, "moved_back": 0})  # all pairs'
        record["threads"] += self.bind_runners(self._core)
        try:
            yield
        finally:
            self._core = None
            self.bind_runners(cores.allowed())

    def bind_runners(self, to: set[int]) -> int:
        """Bind every thread of both runners' process trees to ``to``; returns how many there were."""
        bound = 0
        for side in (self.ref, self.new):
            if side is not None and side.process.poll() is None:
                bound += cores.bind([side.process.pid, *descendants(side.process.pid)], to)[0]
        return bound

    def thaw(self, side: Side) -> None:
        if side.frozen and side.tree is not None:
            side.tree.thaw()
        side.frozen = False

    def drain(self, side: Side) -> float:
        """CUDA: launch a tiny kernel of ours until one comes back at once (another context's queued work
        delays it by its time slices); returns the seconds waited beyond a first quiet probe (0.0 on a
        quiet GPU, and on CPU). A side that keeps the GPU busy past its time limit times out.

        Not in a shared phase: other judges' work keeps the GPU busy there (two judges draining would
        wait on each other's probes for ever), and nothing there is timed; its outputs are sealed at the
        reply, so work the candidate left queued that changes them later is still caught."""
        if self.device.type != "cuda" or self._sharing:
            return 0.0
        waited = self._until_quiet(time.monotonic() + (self.cfg.setup_timeout if side.trusted else max(self.remaining(), 0.0)))
        if waited is None:
            raise self.timed_out(side, self.status.stage)
        return waited

    def settle(self) -> None:
        """CUDA, holding the device alone: wait, charged to no one, for work still queued by other judges'
        candidates (a shared phase does not drain, so a stopped candidate's kernels may still run) before
        the first timed call; a GPU that stays busy is the harness's error, not a speedup."""
        if self.device.type == "cuda" and self._until_quiet(time.monotonic() + self.cfg.setup_timeout, pause=0.001) is None:
            raise Verdict("harness_error", f"the GPU stayed busy with other work for {self.cfg.setup_timeout:g} s before timing")

    def _until_quiet(self, deadline: float, pause: float = 0.0) -> float | None:
        """Probe until one comes back as fast as on a quiet GPU: 0.0 when the first one does, else the seconds
        it took; None when ``deadline`` (time.monotonic) passed first. ``pause``: seconds between probes."""
        if self._quiet_s is None:
            self._quiet_s = self._probe_floor()
        start = _perf_counter()
        if self._probe() <= self._quiet_s:
            return 0.0
        while self._probe() > self._quiet_s:
            if time.monotonic() > deadline:
                return None
            if pause:
                time.sleep(pause)
        return _perf_counter() - start

    def _probe(self) -> float:
        t0 = _perf_counter()
        self._probe_buf.add_(1)
        torch.cuda.synchronize(self.device)
        return _perf_counter() - t0

    def _probe_floor(self) -> float:
        """How long a probe takes on a quiet GPU (every runner is stopped here), with margin."""
        self._probe_buf = torch.zeros(1, device=self.device)
        times = sorted(self._probe() for _ in range(21))
        return max(3 * times[10], times[10] + 100e-6)

    def candidate_alive(self) -> bool:
        return self.new is not None and self.new.process.poll() is None

    def check(self, values: list[Any], new: Record, ref: Record, label: str, index: int = 0) -> float:
        """Call ``index`` of a round: the candidate's inputs as they were given, its output against the reference's."""
        mine_set, theirs_set = self.new.sets[index], self.ref.sets[index]
        changed = _first_changed(mine_set.inputs, [v for v in flatten(values) if isinstance(v, torch.Tensor)])
        if changed is not None:
            raise Verdict("rejected", f"ModelNew.forward modified input {changed} in place ({label})")
        got, want = new.replies[index], ref.replies[index]
        if got.mismatch:
            raise Verdict("incorrect", f"{label}: {got.mismatch}")
        if len(got.values) != len(want.values) or not all(
            values_equal(a, b, self.cfg.atol, self.cfg.rtol) for a, b in zip(got.values, want.values, strict=False)
        ):
            raise Verdict("incorrect", f"{label}: output values {got.values[:5]!r}, expected {want.values[:5]!r}")
        worst = 0.0
        several = len(theirs_set.slots) > 1
        for i, (mine, theirs, seal) in enumerate(zip(mine_set.slots, theirs_set.slots, new.seals[index], strict=True)):
            why, diff = compare_tensors(mine, theirs, self.cfg.atol, self.cfg.rtol, self.sealer, digest_value(seal))
            if why:
                raise Verdict("incorrect", f"{label}: output{f' {i}' if several else ''}: {why}")
            worst = max(worst, diff)
        return worst

    def ask(self, side: Side, request: p.Request, kind: type[p.Reply], *, label: str = "", fail_ok: bool = False,
            fds: list[int] | None = None, stop: bool = True) -> Any:  # fmt: skip
        """Send a request and wait for its checked reply; any failure becomes the stage's verdict."""
        stage = self.status.stage
        deadline = time.monotonic() + (self.cfg.setup_timeout if side.trusted else self.remaining())
        where = f"{label}: " if label else ""
        self.thaw(side)
        side.asked = True
        try:
            side.channel.send(request.to_wire(), fds or [])
            reply = p.parse_reply(self.wait(side, deadline), kind)
        except (ChannelTimeout, TimeoutError):
            raise self.timed_out(side, stage) from None
        except (ChannelClosed, BrokenPipeError, ConnectionResetError):
            raise self.failure(side, stage, f"{where}the runner {self.exit_text(side)} during stage '{stage}' without answering") from None
        except (ProtocolError, p.BadReply) as exc:
            raise self.failure(side, stage, f"{where}malformed reply from the runner: {exc}") from None
        if stop:
            self.freeze(side)
        if not reply.ok and not fail_ok:
            raise self.failure(side, stage, where + reply.error)
        return reply

    def wait(self, side: Side, deadline: float) -> dict[str, Any]:
        limit = self.cfg.max_memory_gb * 2**30
        running = time.monotonic()  # since when the side has run uninterrupted
        while True:
            if side.name == "build":  # a compiler must not share the CPU with another evaluation's timed calls
                deadline += self.pause_for_timing(side)
                if self._pch is not None:
                    self._pch.poll()
            elif self._sharing and not side.trusted and time.monotonic() - running > STEP_ASIDE_AFTER:
                # not fair to a long first call, on purpose: one that will not step aside holds every timer, and every
                # new reader behind it (H100, level-3 corpus: 28 of 32 in 250 s with a fair share, all 32 in 225 s without)
                aside = self.step_aside(side)
                if aside:
                    deadline, running = deadline + aside, time.monotonic()
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("deadline")
            poll = POLL_BUILD if side.name == "build" else POLL_SHARED if self._sharing else POLL
            ready, _, _ = select.select([side.channel.sock], [], [], min(poll, left))
            if ready:
                message, _ = side.channel.recv(timeout=max(left, 5.0))
                return message
            if limit and not side.trusted and side.process.rss_bytes() > limit:
                raise self.failure(side, self.status.stage,
                                   f"used more than {self.cfg.max_memory_gb:g} GB of host memory during stage '{self.status.stage}'")

    def pause_for_timing(self, side: Side) -> float:
        """While another evaluation times on the CPU (its marker in the lock folder, see :meth:`device_phase`),
        stop this build step's process tree; returns the seconds it was stopped (not charged to it)."""
        holder = cpu_timing_holder(self.cfg.lock_dir)
        if holder is None or holder == os.getpid():
            return 0.0
        stage, started = self.status.stage, time.monotonic()
        self.status.enter("paused")
        stopped = freeze_tree(side.process.pid)
        try:
            wait_while_cpu_timing(self.cfg.lock_dir, poll=0.02, limit=PAUSE_LIMIT, mine=os.getpid())
        finally:
            thaw(stopped)
            self.status.enter(stage)
        return time.monotonic() - started

    def failure(self, side: Side, stage: str, text: str) -> Verdict:
        if side.trusted:
            return Verdict("harness_error", f"the reference failed during stage '{stage}': {text}" + self.log_tail(side))
        self.stop_side(side)
        if stage in CANDIDATE_FAILURE:
            return Verdict(CANDIDATE_FAILURE[stage], text + self.log_tail(side))
        return Verdict("unknown_error", f"the candidate's runner failed during stage '{stage}': {text}" + self.log_tail(side))

    def timed_out(self, side: Side, stage: str) -> Verdict:
        if side.trusted:
            return Verdict("harness_error", f"the reference did not answer within {self.cfg.setup_timeout:g} s during stage '{stage}'")
        self.stop_side(side)
        return Verdict("timeout", f"timed out after {self.cfg.timeout:g} s during stage '{stage}'" + self.log_tail(side))

    # -------------------------------------------------------------- inputs, buffers, phases

    def seed_all(self, seed: int) -> None:
        """Seed the generators ``get_inputs`` draws from: the CPU's and the judged GPU's (``torch.manual_seed``
        seeds every device and backend: 1.3 ms a call on the H100, twice per timed pair)."""
        torch.default_generator.manual_seed(seed)
        if self.device.type == "cuda":
            torch.cuda.default_generators[self.device.index or 0].manual_seed(seed)

    def make_inputs(self) -> list[Any]:
        """Fresh inputs from a seed the OS gives for this call alone, on the judged device."""
        seed = secrets.randbits(62)
        self.seed_all(seed)
        if self.cfg.inputs_on == "device" and self.device.type == "cuda":
            try:
                with self.device:
                    values = list(self.problem.get_inputs())
            except Exception:  # noqa: BLE001 - a get_inputs that only works on the host
                self.seed_all(seed)
                values = list(self.problem.get_inputs())
        else:
            values = list(self.problem.get_inputs())
        return [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in values]

    def share(self, side: Side, nbytes: int) -> tuple[int, SharedBuffer]:
        """A new shared buffer, mapped by the side's runner before this returns."""
        buf = SharedBuffer.create(nbytes, self.device)
        [buf_id] = side.new_ids(1)
        try:
            self.ask(side, p.MapBuffers([buf_id], [nbytes]), p.Done, fds=[buf.fd])
        finally:
            buf.close_fd()
        side.buffers[buf_id] = buf
        return buf_id, buf

    def encode(self, side: Side, values: list[Any]) -> CallSet:
        """``values`` copied into a new shared buffer of ``side``: the nodes naming them, and their views here."""
        return self.encode_sets(side, [values])[0]

    def encode_sets(self, side: Side, inputs: list[list[Any]], slots: bool = False, slack: int = 0) -> list[CallSet]:
        """One :class:`CallSet` per list of values, all in one new shared buffer (one mapping for the runner to open,
        however many calls a round holds); with ``slots``, output slots too, shaped as the reference's output; the
        buffer ``slack`` bytes bigger than they need."""
        tensors = [[v for v in flatten(values) if isinstance(v, torch.Tensor)] for values in inputs]
        leaves = _tensor_leaves(self.out_spec) if slots else []
        places, total = [], 0  # byte offsets in the buffer: each call's inputs, then its slots
        for ts in tensors:
            places.append([])
            for n in [t.numel() * t.element_size() for t in ts] + [_nbytes(leaf) for leaf in leaves]:
                places[-1].append(total)
                total += -(-n // BUFFER_ALIGN) * BUFFER_ALIGN
        buf_id, buf = self.share(side, total + slack)
        sets = []
        for values, ts, at in zip(inputs, tensors, places, strict=True):
            ins, outs = at[: len(ts)], at[len(ts) :]
            views = [buf.view(t.dtype, list(t.shape), offset=o) for o, t in zip(ins, ts, strict=True)]
            for view, t in zip(views, ts, strict=True):
                view.copy_(t)
            where = iter([(buf_id, o) for o in ins])
            call_set = CallSet([_node(v, where) for v in values], views, buffer=buf)
            if slots:
                placed = list(zip(outs, leaves, strict=True))
                call_set.slots = [buf.view(getattr(torch, leaf["dtype"]), leaf["shape"], offset=o) for o, leaf in placed]
                call_set.expect = _expect(self.out_spec, iter([(buf_id, o, leaf) for o, leaf in placed]))
            sets.append(call_set)
        self.sync()
        return sets

    def refill(self, side: Side, inputs: list[list[Any]]) -> None:
        """New values into the side's first ``len(inputs)`` call sets."""
        for call_set, values in zip(side.sets, inputs, strict=False):
            for view, value in zip(call_set.inputs, (v for v in flatten(values) if isinstance(v, torch.Tensor)), strict=True):
                view.copy_(value)
        self.sync()

    def bind(self, sides: tuple[Side, ...] | None = None, calls: int = 1, moving: bool = False) -> None:
        """Input buffers and output slots for this phase, for each side: ``calls`` sets (a timing round's calls); with
        ``moving`` (a GPU time phase), room for :meth:`move` to place them anew for every call."""
        for side in sides or (self.ref, self.new):
            sets = [self.make_inputs() for _ in range(calls)]
            side.slack = slack_bytes(calls * sum(self.io_bytes)) if moving and self.device.type == "cuda" else 0  # a round's
            side.sets = side.home = self.encode_sets(side, sets, slots=True, slack=side.slack)

    def move(self, side: Side) -> None:
        """Place the side's call sets at a new random offset in its buffer (in its slack, :data:`SHIFT_STEP` steps):
        on the H100 a memory-bound reference ran 2-7% slower or faster for as long as its inputs stayed where they were
        put, and read from a new place each round it kept no lean (docs/judge.md, "Where a side's inputs sit")."""
        if side.slack:
            by = secrets.randbelow(side.slack // SHIFT_STEP + 1) * SHIFT_STEP
            side.sets = [s.moved(by) for s in side.home]
            side.places.add(by)

    def end_phase_buffers(self, *sides: Side | None) -> Verdict | None:
        """Each side unmaps the phase's buffers (its runner synchronises first: an unmap under a running kernel is an
        illegal memory access), then frees its device memory (a gc pass): all sides at once, a side that fails one
        request is not asked the next. The candidate gets its time left for this (the reference 60 s); one that does
        not answer in it is stopped (its mappings go with it): the verdict is returned."""
        live, lost = [], None
        for side in sides:  # not one that was never asked anything since (a runner still starting: seconds, H100)
            if side is not None and (side.asked or side.buffers):
                side.asked = False
                ids = side.drop_buffers()
                self.thaw(side)
                if side.process.poll() is None:
                    live.append((side, ids))
        for request in (p.UnmapBuffers, p.Release):
            asked, live = live, []
            for side, ids in asked:
                with contextlib.suppress(Exception):
                    side.channel.send((request(ids) if request is p.UnmapBuffers else request()).to_wire())
                    live.append((side, ids))
            asked, live = live, []
            for side, ids in asked:
                allowed = 60.0 if side.trusted else min(60.0, max(self.remaining(), 1.0))
                try:
                    self.wait(side, time.monotonic() + allowed)
                    live.append((side, ids))
                except Exception as error:
                    if not side.trusted and lost is None:
                        if side.process.poll() is None:  # a failure verdict (memory) has stopped it already
                            self.stop_side(side)
                        lost = error if isinstance(error, Verdict) else Verdict(
                            "timeout", f"did not free the buffers of stage '{self.status.stage}' in its time left ({allowed:.0f} s)")
        return lost

    @contextlib.contextmanager
    def device_phase(self, stage: str, shared: bool = False, need: int | None = None) -> Iterator[None]:
        """Hold the device for one phase, exclusively or (untimed work) shared with other judges under
        memory admission (:mod:`.locking`: ``need`` bytes, else :meth:`admission_bytes`); free every buffer
        of the phase before letting go."""
        self.status.enter("wait_lock")
        key = self.found["device_name"] + (f":{_device_uuid(self.device)}" if self.device.type == "cuda" else "")
        lock = device_lock(self.cfg.lock_dir, key if self.device.type == "cuda" else "cpu")
        timing = self.device.type == "cpu" and stage == "time"
        with contextlib.ExitStack() as held:
            try:
                if shared and self.device.type == "cuda":
                    held.enter_context(admitted(lock, need or self.admission_bytes(), self.free_device_bytes, self.cfg.lock_timeout))
                lock.acquire(timeout=self.cfg.lock_timeout, shared=shared, announce=None if shared else self.exclusive_need(stage))
            except Timeout:
                raise Verdict("harness_error", f"could not take the device lock {lock.lock_file} in {self.cfg.lock_timeout:g} s") from None
            held.callback(self.add_seconds, "lock_held_s", stage, _perf_counter())  # after the release below (last in, first out)
            held.callback(lock.release)
            self._sharing, self._lock = shared, lock
            try:
                if timing:  # builds in flight on this machine stop while this phase times (pause_for_timing)
                    mark_cpu_timing(self.cfg.lock_dir, True)
                self.status.enter(stage)
                if self.device.type == "cuda":
                    free = self.free_device_bytes() / 2**30
                    extra = self.found["extra"]
                    extra["min_free_gib_at_lock"] = round(min(free, extra.get("min_free_gib_at_lock", free)), 2)
                yield
            except Verdict:  # the evaluation ends here: the candidate is not waited for (it may never answer again)
                self.stop_candidate()
                raise
            finally:
                if timing:
                    mark_cpu_timing(self.cfg.lock_dir, False)
                self._sharing, self._lock = False, None
                with self.split(f"{stage}.end"):
                    lost = self.end_phase_buffers(self.ref, self.new)
                    if self.device.type == "cuda":  # the phase's device memory is free before the next holder comes
                        gc.collect()
                        torch.cuda.empty_cache()
            if lost is not None:  # the phase itself ended well (a verdict already on its way is not replaced)
                raise lost

    @contextlib.contextmanager
    def split(self, part: str) -> Iterator[None]:
        """Seconds spent in one part of a phase (``extra.split_s``): ``time.batch`` is a part of the time phase, and a
        name with a '/' a detail within the parts (``time/call.seal``: sealing outputs, wherever in that phase)."""
        since = _perf_counter()
        try:
            yield
        finally:
            self.add_seconds("split_s", part, since)

    def add_cpu(self, name: str, seconds: float) -> None:
        """CPU seconds of one process tree (``extra.cpu_s``: supervisor, reference, build, candidate), for
        benchmarks/throughput.py: where a machine's cores go per candidate."""
        self.tally("cpu_s", name, seconds)

    def add_seconds(self, key: str, name: str, since: float) -> None:
        """The seconds since ``since`` added to ``extra[key][name]``: ``lock_held_s`` (the device lock held, per phase) and
        ``split_s`` (parts of the exclusive phases); benchmarks/throughput.py sums both over a run."""
        self.tally(key, name, _perf_counter() - since)

    def tally(self, key: str, name: str, seconds: float) -> None:
        totals = self.found["extra"].setdefault(key, {})
        totals[name] = round(totals.get(name, 0.0) + seconds, 4)

    def free_device_bytes(self) -> int:
        return int(torch.cuda.mem_get_info(self.device)[0])

    def exclusive_need(self, stage: str) -> int:
        """The device memory an exclusive phase announces while it waits (shared holders step aside only when it
        fits beside them): the time phase's admission; the reference's first call, before its peak is known,
        four times the inputs (0 on CPU)."""
        if self.device.type != "cuda":
            return 0
        return self.admission_bytes() if stage == "time" else int(4 * input_bytes(self.problem)) + ADMISSION_MARGIN_BYTES

    def step_aside(self, side: Side) -> float:
        """In a shared phase, while ``side`` is in a long call and an exclusive holder waits whose memory fits:
        stop the side's process tree, let the lock go and queue for it again (behind the waiting one, whose
        timing phase first waits for the GPU to be quiet: Supervisor.settle), then continue the side.
        Returns the seconds it took (charged to no one). A Triton autotune stopped so times one of its
        configurations too slow at most (it takes medians of many launches)."""
        need = self._lock.wanted()  # (only called in a shared phase: wait())
        if need is None or (self.device.type == "cuda" and self.free_device_bytes() < need):
            return 0.0
        stage, started = self.status.stage, time.monotonic()
        self.status.enter("stepped_aside")
        self.freeze(side)
        self._lock.release()
        try:
            self._lock.acquire(timeout=self.cfg.lock_timeout, shared=True)
        except Timeout:
            lost = f"could not take the device lock {self._lock.lock_file} back in {self.cfg.lock_timeout:g} s"
            raise Verdict("harness_error", lost) from None
        finally:
            self.thaw(side)
            self.status.enter(stage)
        self.found["extra"]["stepped_aside"] = self.found["extra"].get("stepped_aside", 0) + 1
        return time.monotonic() - started

    def admission_bytes(self) -> int:
        """What a shared phase may add to the device: each runner's working memory (the reference's peak, and as
        much again for the candidate), the supervisor's shared inputs and output slots of both sides and its own
        fresh inputs (not in the runners' peaks: on the H100 judges admitted without them ran level 1's
        multi-GB problems out of memory), and a context's worth for workspaces and first compiles."""
        inputs, outputs = self.io_bytes
        moving = 2 * slack_bytes(max(ROUND_BYTES, inputs + outputs)) if self.device.type == "cuda" else 0  # time's (bind)
        return 2 * self.ref_peak_bytes + 3 * inputs + 2 * outputs + moving + ADMISSION_MARGIN_BYTES

    def warm_bytes(self) -> int:
        """What the candidate's first call alone may add to the device (:meth:`warm_up`): its runner's working memory
        (taken as the reference's peak, as in :meth:`admission_bytes`), its inputs in a shared buffer, the fresh inputs
        they are copied from, and a context's worth for first compiles."""
        return self.ref_peak_bytes + 2 * self.io_bytes[0] + ADMISSION_MARGIN_BYTES

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def sensitivity(self) -> dict[str, Any]:
        """How much the reference output moves between two random inputs (METR's near-constant problems)."""
        self.call(self.ref, [self.make_inputs()])
        first = [s.clone() for s in self.ref.slots if s.is_floating_point()]
        self.call(self.ref, [self.make_inputs()])
        second = [s for s in self.ref.slots if s.is_floating_point()]
        if not first or not any(t.numel() for t in first):
            return {}
        spread, suspect = 0.0, True
        for a, b in zip(first, second, strict=True):
            if a.numel():
                _, over, diff = compare_chunked(a, b, self.cfg.atol, self.cfg.rtol)
                spread, suspect = max(spread, diff), suspect and over == 0
        scale = max(float(a.abs().max()) for a in first if a.numel()) or 1.0
        return {"output_sensitivity": spread / scale, "suspect_constant_output": bool(suspect)}

    # -------------------------------------------------------------- the candidate's processes

    def build(self) -> Path:
        """The sandboxed build step: import the candidate with only its own build folder writable."""
        from ..build.cache import BuildFolder
        from ..build.pch import Requests

        env = self.compiler_env()
        folder = BuildFolder(self.cfg.build_dir, self.build_key(), timeout=max(self.remaining(), 1.0))
        with folder:
            self.found["extra"]["build_cached"] = cached = folder.cached
            if not cached:
                wanted = folder.path / "pch-wanted.jsonl"
                step_env = {**self.candidate_env(folder.path, jit=False), "KB_PCH_WANTED": str(wanted),
                            "KB_PCH_WAIT": f"{min(PCH_WAIT_S, self.remaining() / 4):.0f}"}  # fmt: skip
                if env.get("CXX") and self.cfg.pch_dir != "off":  # served while the step runs: wait() polls it
                    self._pch = Requests(Path(self.cfg.pch_dir), wanted)
                # set up on the CPU: a build needs no CUDA context (0.5 s and a context switch on a GPU another judge times)
                builder = self.set_up(self.launch(step_env, "build.log", Mounts(writable=[folder.path]), side_name="build"), device="cpu")
                try:
                    self.ask(builder, p.Load(self.source, "kb_candidate.py", build_only=True, build_rank=self.spec.build_rank,
                                           compile_only=self.compile_only), p.Done)
                finally:
                    self.stop_side(builder)
                    if self._pch is not None:  # trusted work for later builds, even after a failed build: not its time
                        self.status.enter("pch")
                        self.found["extra"]["pch"], self._pch = self._pch.close(), None
                        self.status.enter("compile")
        return folder.path

    def compiler_env(self) -> dict[str, str]:
        """CXX (the shared-PCH wrapper) and the CUDA arch the build is for: decided here, not by the candidate."""
        env: dict[str, str] = {}
        if self.cfg.pch_dir != "off":
            from ..build.pch import compiler_wrapper

            wrapper = compiler_wrapper(self.cfg.pch_dir)
            if wrapper:
                env["CXX"] = wrapper
        if self.device.type == "cuda" and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
            major, minor = torch.cuda.get_device_capability(self.device)
            env["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
        if self.cpu_check:
            env.update(check_env())
        return env

    def candidate_env(self, folder: Path | None, jit: bool = True) -> dict[str, str]:
        """A runner's compiler settings, build folder and (not for a build step) its Triton and inductor caches."""
        extra = self.compiler_env()
        if folder is not None:
            extra["TORCH_EXTENSIONS_DIR"] = str(folder)
        if jit:
            caches = self.jit_cache()
            extra.update(TRITON_CACHE_DIR=str(caches / "triton"), TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"))
        return extra

    def build_key(self) -> str:
        """This candidate's key in the build cache (its source, the versions, the GPU architecture, the compiler
        settings): its build folder and its JIT caches are named by it."""
        from ..build.cache import build_key

        if self._key is None:
            self._key = build_key(self.source, torch, self.device, self.compiler_env())
        return self._key

    def jit_cache(self) -> Path:
        """Triton's and inductor's caches for this candidate's source, kept from one judge of it to the next.

        Keyed like its build folder (source, versions, GPU architecture, compiler settings), so no
        other source ever reads it; writable by this source's runners only (a candidate can reach
        nothing but its own re-judges, which run the same code); emptied when it outgrows
        :data:`JIT_CACHE_BYTES`."""
        if self._jit is None:
            self._jit = Path(self.cfg.build_dir) / f"jit-{self.build_key()}"
            self._jit.mkdir(parents=True, exist_ok=True)
        return self._jit

    def trim_jit_cache(self) -> None:
        if self._jit is None:
            return
        try:
            size = sum(f.lstat().st_size for f in self._jit.rglob("*") if f.is_file() and not f.is_symlink())
        except OSError:
            size = JIT_CACHE_BYTES + 1
        if size > JIT_CACHE_BYTES:  # its contents only: another judge of this source may be binding the folder now
            for child in list(self._jit.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)

    def launch(self, extra_env: dict[str, str], log_name: str, mounts: Mounts, side_name: str = "candidate") -> Side:
        """A runner process in the sandbox, importing torch while nothing is asked of it yet (no candidate code)."""
        info = self.sandbox
        scratch = SCRATCH if info.kind == "bwrap" else self.work / f"{side_name}-scratch"
        mounts.masks = [Path(self.cfg.lock_dir), Path(self.cfg.build_dir), self.work, *secret_paths()]
        if self.cfg.pch_dir != "off":
            mounts.readonly.append(Path(self.cfg.pch_dir))
        if os.environ.get("PYTHONPYCACHEPREFIX"):  # the trusted bytecode cache (build/bytecode.py), read-only here
            mounts.readonly.append(Path(os.environ["PYTHONPYCACHEPREFIX"]))
        env = runner_env(dict(os.environ), scratch / "home", PACKAGE_ROOT, extra_env)
        return self.spawn(side_name, info, env, mounts, scratch, log_name=log_name)

    @property
    def pin_cpu_runners(self) -> bool:
        """Whether a CPU judge's two runners pin their threads a core each (``KB_CPU_PIN=1``; docs/judge.md, "CPU runners:
        a core per thread, on request"): on a quiet 2-vCPU machine it removed a two-speed lean; beside one other busy
        process it made one (0.86-1.51 in 18 judgments, against 0.99-1.05 in 11 of 12 unpinned), so it is off unless asked."""
        return self.cfg.device == "cpu" and os.environ.get("KB_CPU_PIN", "0") == "1"

    def set_up(self, side: Side, device: str = "") -> Side:
        """Set up a runner on the judged device, or on ``device`` (a build step: its threads are never pinned)."""
        pin = not device and self.pin_cpu_runners
        try:
            self.ask(side, p.Setup(device or self.cfg.device, self.cfg.device_index, self.cfg.timer, torch.get_num_threads(),
                                   pin_threads=pin), p.Ready)  # fmt: skip
        except Verdict as verdict:  # before any candidate code: the sandbox or the machine, not the candidate
            self.stop_side(side)
            raise Verdict("harness_error", f"the runner could not start ({self.sandbox.label}): {verdict.message}") from None
        return side

    def spawn(self, name: str, info: SandboxInfo, env: dict[str, str], mounts: Mounts, scratch: Path, *,
              log_name: str = "", trusted: bool = False) -> Side:  # fmt: skip
        mine, theirs = socket.socketpair()
        argv = [sys.executable, "-m", "pytest_kernelbench.judge.runner", str(theirs.fileno()), str(scratch)]
        log = self.work / (log_name or f"{name}.log")
        try:
            process = RunnerProcess(info, argv, env=env, mounts=mounts, work=self.work, scratch=scratch, log_path=log,
                                    pass_fd=theirs.fileno())  # fmt: skip
        finally:
            theirs.close()
        return Side(name, Channel(mine), process, log, trusted=trusted)

    def stop_side(self, side: Side | None) -> None:
        if side is None:
            return
        self.thaw(side)
        if side.process.poll() is None:  # before the kill: a killed tree's CPU time is reaped by nobody who tells
            self.add_cpu(side.name, tree_cpu_seconds(side.process.pid))
        with contextlib.suppress(Exception):
            side.channel.send(p.Exit().to_wire())
        if side.trusted and os.environ.get(PROFILE_ENV):  # let it write its profile
            with contextlib.suppress(Exception):
                side.process.wait(10)
        side.process.kill()
        side.channel.close()
        if side.tree is not None:
            side.tree.close()

    def stop_candidate(self) -> None:
        if self.new is not None and self.new.process.poll() is None:
            self.stop_side(self.new)

    def exit_text(self, side: Side) -> str:
        code = side.process.poll()
        if code is None:
            for _ in range(20):
                time.sleep(0.05)
                code = side.process.poll()
                if code is not None:
                    break
        if code is None:
            return "stopped answering"
        if code > 128 and side.process.info.kind == "bwrap":
            code = 128 - code  # bwrap reports a child killed by signal N as exit status 128 + N
        return describe_exit(code)

    def log_tail(self, side: Side) -> str:
        text = read_tail(side.log, self.cfg.log_chars)
        return f"\n--- runner log tail ---\n{text}" if text.strip() else ""


# -------------------------------------------------------------------- helpers


def check_env() -> dict[str, str]:
    """--device cpu-check's build and runner settings: the CUDA toolkit nvcc belongs to, an explicit architecture
    (there is no GPU to ask), and Triton's interpreter (kernels run on CPU tensors, one Python step per program)."""
    from .compile_only import cuda_home

    env = {"TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST") or CHECK_ARCH, "TRITON_INTERPRET": "1"}
    home = cuda_home()
    if home:
        env["CUDA_HOME"] = home
    return env


def _node(value: Any, places: Iterator[tuple[int, int]]) -> p.Node:
    """``value`` as a tree, each tensor leaf at the next (buffer id, byte offset) of ``places``."""
    if isinstance(value, torch.Tensor):
        buf, offset = next(places)
        return {"t": {"buf": buf, "dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                      "stride": contiguous_strides(list(value.shape)), "offset": offset}}  # fmt: skip
    if isinstance(value, (list, tuple)):
        return {"seq": [_node(v, places) for v in value], "tuple": isinstance(value, tuple)}
    if isinstance(value, dict):
        return {"map": [[str(k), _node(v, places)] for k, v in value.items()]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"v": repr(value)}
    return {"v": value}


def _tensor_leaves(spec: p.Node) -> list[dict[str, Any]]:
    if "t" in spec:
        return [spec["t"]]
    if "seq" in spec:
        return [leaf for item in spec["seq"] for leaf in _tensor_leaves(item)]
    if "map" in spec:
        return [leaf for _, item in spec["map"] for leaf in _tensor_leaves(item)]
    return []


def _nbytes(leaf: dict[str, Any]) -> int:
    return math.prod(leaf["shape"]) * torch.empty((), dtype=getattr(torch, leaf["dtype"])).element_size()


def _moved_node(node: p.Node, by: int) -> p.Node:
    """``node`` (:func:`_node`, :func:`_expect`) with every tensor leaf ``by`` bytes further into its buffer."""
    if "t" in node:
        return {"t": {**node["t"], "offset": node["t"]["offset"] + by}}
    if "seq" in node:
        return {**node, "seq": [_moved_node(item, by) for item in node["seq"]]}
    if "map" in node:
        return {"map": [[key, _moved_node(item, by)] for key, item in node["map"]]}
    return node


def _expect(spec: p.Node, slots: Iterator[tuple[int, int, dict[str, Any]]]) -> p.Node:
    if "t" in spec:
        buf, offset, leaf = next(slots)
        return {"t": {"buf": buf, "dtype": leaf["dtype"], "shape": leaf["shape"], "stride": contiguous_strides(leaf["shape"]),
                      "offset": offset}}  # fmt: skip
    if "seq" in spec:
        return {"seq": [_expect(item, slots) for item in spec["seq"]], "tuple": spec.get("tuple", False)}
    if "map" in spec:
        return {"map": [[key, _expect(item, slots)] for key, item in spec["map"]]}
    return {"v": spec.get("v")}


def input_bytes(problem: Any) -> float:
    """Bytes of one input set, from shapes alone (get_inputs on the meta device); inf if unknown."""
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            values = list(problem.get_inputs())
        return float(sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor)))
    except Exception:  # noqa: BLE001 - a get_inputs that needs real data
        return math.inf


def _first_changed(inputs: list[torch.Tensor], pristine: list[torch.Tensor]) -> int | None:
    for i, (after, before) in enumerate(zip(inputs, pristine, strict=True)):
        if not torch.equal(after, before):
            return i
    return None


def _load_module(name: str, path: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _device_name(device: torch.device) -> str:
    from .runner import _device_name as name

    return name(torch, device)


def _versions() -> dict[str, str]:
    from .runner import _versions as versions

    return versions(torch)


def _device_uuid(device: torch.device) -> str:
    return str(getattr(torch.cuda.get_device_properties(device), "uuid", device.index))


def _die_with_parent(parent: int) -> None:
    """Stop (and take the runners along) once the process that started us is gone."""
    sleep, getppid = time.sleep, os.getppid

    def watch() -> None:
        while getppid() == parent:
            sleep(0.5)
        _kill_children()
        os._exit(1)

    threading.Thread(target=watch, name="kb-parent-watch", daemon=True).start()


def _kill_children() -> None:
    from .sandbox import _ppids

    me = os.getpid()
    for child, parent in _ppids().items():
        if parent == me:
            kill_tree(child)


def main(argv: list[str], started: float | None = None) -> int:
    # What exists now (torch, sympy, the fork server's warm-up) is never garbage: each phase's gc.collect (device memory
    # back before the lock goes) then walks only this evaluation's objects (~120 ms less a phase on the H100). No tensor
    # of the evaluation exists yet, and a frozen object is never collected (537ed4f froze after set-up: buffers leaked).
    gc.freeze()
    spec = Assignment.read(Path(argv[1]))
    if spec.parent_pid:
        _die_with_parent(spec.parent_pid)
    become_subreaper()  # whatever a runner leaves behind comes back to us, and is killed below
    status = Status(spec.status_path, started)
    try:
        found = profiled(Supervisor(spec, status).run, "supervisor")
    finally:
        _kill_children()
    tmp = spec.result_path + ".tmp"
    Path(tmp).write_text(json.dumps(found, default=str))
    os.replace(tmp, spec.result_path)
    return 0


if __name__ == "__main__":
    rc = main(sys.argv, started=_STARTED)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
