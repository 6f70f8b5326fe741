"""One evaluation in stage order: the reference, the candidate's build and runner, its warm-up and correctness trials,
the operator trace, the exclusive time phase, the recheck once the candidate's process is gone, and more pairs of
runner processes while the statistics ask (:func:`..stats.another_pair`). :func:`main` is the supervisor process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import json
import math
import os
import resource
import statistics
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ...candidates import builds_extension
from ...config import compile_mode
from .. import fused
from .. import protocol as p
from ..assignment import Assignment
from ..distributions import STANDARD, TIMED_MAX_BYTES, TIMED_VARIANTS, Variants
from ..policy import compute_ops
from ..procs import become_subreaper, die_with_parent, kill_children
from ..runner import profiled
from ..sandbox import ForkedRunner
from ..stats import PROCESS_SD, SPARE_PAIRS, PairTiming, another_pair, combine_pairs, speedup_interval
from .buffers import Buffers, nbytes, tensor_leaves
from .building import Builder
from .device import Device
from .memo import Remembered, memo_for, recall, remember
from .plan import PAIR_START_S, WARM_STEP_RATIO, WARMUP_UNLOCKED_BYTES, admission_bytes, reference_bytes, warm_bytes
from .problem import LocalProblem, SandboxedProblem
from .record import Context, Status, Verdict
from .sides import Runners
from .timing import Timer


def _beside(work: Callable[[], Any]) -> Callable[[], Any]:
    """Start ``work`` in a thread of its own now; the call returned waits for it and gives its value (or raises what it
    raised). For a GPU's first Triton launch (triton's driver, the cache, the module: 0.3-0.5 s an evaluation on the
    H200s) while this thread waits on the reference's runner."""
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kb-beside")
    future = pool.submit(work)
    pool.shutdown(wait=False)  # the work runs on; the thread ends with it
    return future.result


class Evaluation:
    def __init__(self, spec: Assignment, status: Status):
        self.ctx = ctx = Context(spec, status)
        self.cfg, self.found = ctx.cfg, ctx.found
        self.device = Device(ctx)
        self.runners = Runners(ctx, self.device)
        self.buffers = Buffers(ctx, self.runners, self.device)
        self.builder = Builder(ctx, self.runners, self.device)
        self.timer = Timer(ctx, self.runners, self.buffers, self.device)
        self.needs_build = builds_extension(ctx.source)
        self.folder: Path | None = None  # the candidate's build folder (its runners bind it), once built or found cached
        self.init_values: list[Any] = []
        self.pairs: list[PairTiming] = []  # each pair of runner processes' timing (time_again)
        self.pair_samples: dict[str, list[float]] = {"reference": [], "candidate": []}  # every pair's timed samples, ms
        self.pair_refs: list[str] = []  # how each pair's reference runner started: forked, or a new interpreter

    def run(self) -> dict[str, Any]:
        outcome, message = "correct", ""
        try:
            if self.ctx.spec.build_only:
                self.prebuild()
            else:
                self.evaluate()
        except Verdict as verdict:
            outcome, message = verdict.outcome, verdict.message + self.scaled_note()
        except BaseException as exc:  # noqa: BLE001 - the harness's own fault is still a result
            outcome, message = "harness_error", "the judge failed: " + "".join(traceback.format_exception(exc))[-4000:]
        finally:
            self.runners.stop_all()
            self.builder.trim_jit_cache()
            used = resource.getrusage(resource.RUSAGE_SELF)  # since this process was forked or started
            self.found.add_cpu("supervisor", used.ru_utime + used.ru_stime)
        status = self.ctx.status
        stage = status.stage
        status.enter("done")
        self.found.extra.stages_at = status.timeline
        self.found.update(outcome=outcome, message=message, stage="done" if outcome == "correct" else stage,
                          stage_seconds=status.stage_seconds)  # fmt: skip
        return self.found.to_dict()

    def evaluate(self) -> None:
        if self.builder.compile_only:
            self.check_build()
        self.reference()
        self.compile()
        self.init()
        self.warm_up()
        self.trials()
        if self.ctx.cpu_check:
            raise self.checked()
        self.timer.time()
        self.recheck()
        self.time_again()

    # -------------------------------------------------------------- the reference

    def reference(self) -> None:
        """Load the problem here (for inputs), the reference in its runner process; learn the output's structure."""
        ctx, runners = self.ctx, self.runners
        ctx.status.enter("reference")
        if self.cfg.problem_sandbox:  # a client's problem: its runners started like a candidate's (problem.py)
            runners.resolve_sandbox()
        with self.found.split("reference.start"):
            runners.reference = runners.start_reference()  # before this process touches CUDA: then it can be forked
            # and the reference runners of later process pairs (time_again), forked now too: idle until then, and alike
            for k in range(self.spares_wanted()):
                runners.spares.append(runners.start_reference(tag=f"-{k + 2}"))
        if not self.cfg.problem_sandbox:
            runners.resolve_sandbox()
        for side in (runners.reference, *runners.spares):
            runners.cgroup_like_the_candidate(side)
        with self.found.split("reference.launch"):  # the candidate's runner imports torch while all below is done
            self.launch_early()
        warmed = None
        if ctx.on_gpu:
            with self.found.split("reference.context"):  # this process's CUDA context
                torch.cuda.set_device(ctx.device)
                torch.cuda.init()
            warmed = _beside(lambda: fused.warm(ctx.device, self.timer.sealer.k1, self.timer.sealer.k2))
        with self.found.split("reference.problem"):
            if self.cfg.problem_sandbox:
                ctx.problem = SandboxedProblem(ctx, runners, self.buffers)
            else:
                if ctx.cpu_check:
                    self.scale_problem()
                ctx.problem = LocalProblem(ctx, ctx.spec.problem_path)
            self.init_values = ctx.problem.init_values(self.cfg.seed)
        with self.found.split("reference.setup"):  # its runner's CUDA context, the problem's Model built there
            self.ready_reference()
        if warmed is not None:  # the seal's kernels, loaded (or compiled) beside the above: here before any locked phase
            with self.found.split("reference.fused_warm"):
                self.found.extra.fused_compare = warmed()
        big = self.cfg.mode != "eager" and ctx.on_gpu and ctx.problem.input_bytes() > WARMUP_UNLOCKED_BYTES
        locked = self.cfg.mode == "eager" or big
        memo = memo_for(ctx, self.device.key())
        known = recall(memo, ctx.on_gpu) if memo is not None else None
        with self.reference_phase(locked, known):
            ctx.out_spec = self.discover()
            if known is not None:  # measured holding the device alone, by an earlier judge of this problem here
                self.device.quiet_s, ctx.fp.ref_ms = known.quiet_s, min(ctx.fp.ref_ms, known.fp.ref_ms)
            elif ctx.on_gpu:  # before any candidate code runs: the GPU is ours and the reference's
                with self.found.split("reference.probe_floor"):
                    self.device.quiet_s = self.device.probe_floor()
        if known is not None:
            self.found.extra.reference_shared = True
        elif memo is not None:
            remember(memo, ctx.fp, self.device.quiet_s)

    def reference_phase(self, locked: bool, known: Remembered | None) -> contextlib.AbstractContextManager[None]:
        """The reference's first call: shared, admitted for its remembered footprint (:func:`plan.reference_bytes`); else
        holding the device alone where ``locked`` (eager mode, a big compile-mode problem)."""
        if known is not None:
            return self.buffers.phase("reference", shared=True, need=reference_bytes(known.fp))
        return self.buffers.phase("reference") if locked else contextlib.nullcontext()

    def ready_reference(self) -> None:
        """The reference's runner set up, the problem's Model loaded in it and built (the seeded weights)."""
        cfg, runners, ref = self.cfg, self.runners, self.runners.reference
        # scrubbed on a GPU only, where freed device memory can reach another process; the kernel zeroes every page it
        # gives a process, and on a CPU (no cache flush between calls) the scrub warmed the reference's next output in
        # cache: bundled references judged against themselves, 16 cores, 10 of 20 within +-5% with it, 18 without
        setup = p.Setup(cfg.device, self.ctx.device.index or 0, cfg.timer, self.ctx.threads, scrub_outputs=self.ctx.on_gpu,
                        pin_threads=runners.pin_cpu_runners, ieee_float32=cfg.tol.wants_ieee_float32)  # fmt: skip
        if cfg.tol.wants_ieee_float32 and self.ctx.on_gpu:
            self.found.extra.float32_precision = "ieee"
        runners.ask(ref, setup, p.Ready)
        problem = Path(self.ctx.spec.problem_path).read_text()
        runners.ask(ref, p.Load(problem, "kb_reference.py", "Model", compile_mode(cfg.mode)), p.Done)
        runners.ask(ref, p.Init(self.buffers.encode(ref, self.init_values).args, cfg.seed, cfg.ref_mode), p.Done)

    def discover(self) -> p.Node:
        """One reference call on fresh inputs, answered with the output's structure."""
        ref, fp = self.runners.reference, self.ctx.fp
        with self.found.split("reference.inputs"):
            ref.sets = [self.buffers.encode(ref, self.buffers.make_inputs())]
        with self.found.split("reference.call"):
            reply = self.runners.ask(ref, p.Call(ref.args, None), p.Called)
        if reply.structure is None:
            raise Verdict("harness_error", "the reference's runner did not describe its output")
        fp.ref_peak_bytes, fp.ref_ms = reply.peak_bytes, reply.ms
        outputs = sum(nbytes(leaf) for leaf in tensor_leaves(reply.structure))
        fp.io_bytes = (sum(t.numel() * t.element_size() for t in ref.inputs), outputs)
        with self.found.split("reference.unmap"):
            self.buffers.end_phase(ref)
        return reply.structure

    # -------------------------------------------------------------- the candidate's build and runner

    def launch_early(self) -> None:
        """Start the candidate's runner now, so that it imports torch (seconds, in a fresh interpreter) while the
        reference works: when nothing is to be built, or when its build is in the cache already (a build pool
        ahead of the judge). Otherwise compile() starts it after the build step. No candidate code runs yet."""
        if self.ctx.spec.build_only or self.builder.compile_only:
            return
        folder = self.builder.cached_build() if self.needs_build else None
        if self.needs_build and folder is None:
            return
        self.folder = folder
        self.runners.candidate = self.builder.launch_runner(folder)
        self.found.extra.runner_early = True

    def prebuild(self) -> None:
        """The build pool's evaluation: the sandboxed build step alone. No reference runner, no problem, no device
        lock: nothing of the judging (``correct`` means built; a --device cpu-check build ends ``built``)."""
        if self.builder.compile_only:
            self.check_build()
        self.ctx.status.enter("compile")
        self.runners.resolve_sandbox()
        if self.needs_build:
            self.builder.build()

    def compile(self) -> None:
        """Build the candidate's extension in a sandboxed build step, then set its runner up (:meth:`init` imports it)."""
        self.ctx.status.enter("compile")
        self.folder = self.builder.build() if self.needs_build else None
        if self.runners.candidate is None:  # not started early (launch_early)
            self.runners.candidate = self.builder.launch_runner(self.folder)
        self.runners.set_up(self.runners.candidate)

    # -------------------------------------------------------------- --device cpu-check (no GPU)

    def check_build(self) -> None:
        """A CUDA extension: its sandboxed build step compiles every source with the commands torch writes (nvcc
        for plan.CHECK_ARCH) and links nothing (compile_only.py); it never runs. Outcome built, or compile_error."""
        self.ctx.status.enter("compile")
        self.runners.resolve_sandbox()
        self.found.extra.cpu_check = "nvcc"
        env = self.builder.compiler_env()
        if "CUDA_HOME" not in env:
            raise Verdict("harness_error", "--device cpu-check: no CUDA toolkit here to compile the candidate's CUDA sources "
                          "with (no nvcc on PATH, in CUDA_HOME or /usr/local/cuda)")  # fmt: skip
        self.builder.build()
        arch = env["TORCH_CUDA_ARCH_LIST"]
        raise Verdict("built", f"compiled with nvcc ({env['CUDA_HOME']}) for TORCH_CUDA_ARCH_LIST={arch}; not run (--device cpu-check)")

    def checked(self) -> Verdict:
        """Every trial's outputs matched on the CPU: the check passed; no timing without the GPU."""
        how = "triton-interpreter" if "triton" in self.ctx.source else "cpu"
        self.found.extra.cpu_check = how
        where = "in Triton's interpreter (TRITON_INTERPRET=1) on the CPU" if how == "triton-interpreter" else "on the CPU"
        return Verdict("built", f"matched the reference in {self.cfg.trials} trials {where}; not timed (--device cpu-check)")

    def scale_problem(self) -> None:
        """The problem's sizes scaled down where its source allows (shrink.py): both sides load that problem."""
        from ..shrink import scaled

        path = Path(self.ctx.spec.problem_path)
        text, changes = scaled(path.read_text())
        if changes:
            path.write_text(text)
            self.found.extra.scaled = changes

    def scaled_note(self) -> str:
        from ..shrink import describe

        changes = self.found.extra.scaled
        return f"\n(--device cpu-check ran the problem with its sizes scaled down: {describe(changes)})" if changes else ""

    # -------------------------------------------------------------- the candidate's calls

    def init(self) -> None:
        """The candidate's module imported in its runner (its build folder bound; the ``compile`` stage's last part), then
        its ``ModelNew`` built, both in one shared phase: code a module runs as it is imported may use the device as
        much as a call may, and the runner waits for that work before it answers (Runner.on_load), so none of it
        runs beside another judge's timing (docs/judge.md, "The device lock")."""
        new, status = self.runners.candidate, self.ctx.status
        with self.buffers.phase("init", shared=True):
            status.enter("compile")
            with self.found.split("init.load"):
                self.runners.ask(new, p.Load(self.ctx.source, "kb_candidate.py", "ModelNew"), p.Done)
            status.enter("init")
            self.runners.ask(new, p.Init(self.buffers.encode(new, self.init_values).args, self.cfg.seed, self.cfg.ref_mode), p.Done)

    def warm_up(self, before_time: bool = False) -> None:
        """The candidate's first call (Triton JIT and autotune, inductor, graph capture: seconds of CPU) on fresh inputs,
        untimed and unchecked, in a shared phase admitted for the candidate's own footprint (:func:`plan.warm_bytes`)
        rather than for both sides' buffers. On a GPU, where that admission is at most 1/WARM_STEP_RATIO of the trials':
        for level 1's multi-GB problems the trials' admits one judge at a time on 80 GB, and a first call that compiled
        there held every other judge's trials behind it; and always ``before_time``, in a later pair of runners
        (:meth:`time_again`), whose first call would otherwise autotune in the exclusive ``time`` phase. Its output is
        not looked at: every later call gets fresh inputs, so nothing it could keep from this one is of use."""
        fp, new = self.ctx.fp, self.runners.candidate
        need = warm_bytes(fp)
        if not self.ctx.on_gpu or os.environ.get("KB_WARM_STEP", "1") == "0":
            return
        if not before_time and admission_bytes(fp) < WARM_STEP_RATIO * need:
            return
        with self.buffers.phase("run", shared=True, need=need), self.found.split("run.warm"):
            new.sets = self.buffers.encode_sets(new, [self.buffers.make_inputs()])
            self.runners.ask(new, p.Call(new.args, None), p.Called, label="warm-up call (untimed)")
        self.found.extra.warm_step = True

    def trials(self) -> None:
        """Correctness trials, fresh inputs each (with ``--inputs varied``, from other distributions after the first:
        judge/distributions.py); then the operator trace of one more call. Under --device cpu-check the first trial's
        call is the trace (a Triton kernel's call in the interpreter is dear), except with --strict, whose trace covers
        every thread."""
        n = self.cfg.trials
        worst, variants = 0.0, Variants(self.cfg.inputs)
        traced_trial = self.ctx.cpu_check and not self.cfg.strict
        with self.buffers.phase("run", shared=True):
            self.buffers.bind()
            for i in range(n):
                self.ctx.status.enter("run")
                variant, label = variants.for_trial(i), f"trial {i + 1}/{n}"
                shown = label if variant == STANDARD else f"{label} (inputs {variant})"
                diff = self.timer.judged_pair(shown, candidate_first=True, variant=variant, trace=traced_trial and i == 0)
                if diff is None:  # the reference has no finite answer there: held to what it answers, on standard inputs
                    variants.drop(variant, self.timer.dropped_why)
                    diff = self.timer.judged_pair(label, candidate_first=True)
                else:
                    variants.passed(variant, self.timer.checks.atol_scale)
                worst = max(worst, diff or 0.0)
            self.found.update(max_abs_diff=worst, trials=n)
            if self.cfg.inputs == "varied":
                self.found.extra.input_variants = variants.to_dict()
                if self.ctx.fp.io_bytes[0] <= TIMED_MAX_BYTES:
                    self.timer.timed_variants = [v for v in dict.fromkeys(variants.checked) if v in TIMED_VARIANTS]
            self.trace()

    def trace(self) -> None:
        new, extra = self.runners.candidate, self.found.extra
        if extra.aten_ops is not None:  # traced in a trial already (never under --strict: trials)
            return
        self.ctx.status.enter("trace")
        self.buffers.refill(new, [self.buffers.make_inputs()])
        reply = self.runners.ask(new, p.Trace(new.args, all_threads=self.cfg.strict), p.Traced, fail_ok=True)
        if reply.ok:
            extra.aten_ops, extra.aten_ops_all_threads = reply.ops, reply.all_threads
        else:
            extra.aten_ops, extra.op_trace_error = {}, reply.error.strip().splitlines()[-1][:300]
        if self.cfg.profile and self.ctx.on_gpu:
            self.profile()
        if self.cfg.strict:
            if not reply.ok:
                raise Verdict("rejected", "--strict: the operators of ModelNew.forward could not be traced: " + extra.op_trace_error)
            compute = compute_ops(reply.ops)
            if compute:
                listed = ", ".join(f"{op} x{k}" for op, k in list(compute.items())[:10])
                raise Verdict("rejected", f"--strict: ModelNew.forward runs PyTorch compute ops: {listed}")

    def profile(self) -> None:
        """Where the candidate's time goes, per kernel: its own process's claim, kept for the agent's prompt only."""
        new = self.runners.candidate
        self.buffers.refill(new, [self.buffers.make_inputs()])
        reply = self.runners.ask(new, p.Profile(new.args), p.Profiled, fail_ok=True)
        if reply.ok:
            self.found.extra.kernel_profile = {name: {"us": us, "launches": int(n)} for name, (us, n) in reply.kernels.items()}
        else:
            self.found.extra.kernel_profile_error = (reply.error.strip().splitlines() or [""])[-1][:300]

    # -------------------------------------------------------------- after timing

    def recheck(self) -> None:
        """The candidate's process is gone: how much the reference's output moves with its input; the speedup.

        The reference is not re-timed alone: on the H100 a reference timed without the candidate's kernels between its
        calls ran up to 23% faster (the GPU's power state), so only the interleaved medians compare like with like.
        Queued candidate work cannot slow the reference: every call drains the GPU before the next one (Timer.call).
        """
        self.ctx.status.enter("recheck")
        self.runners.stop_candidate()
        with self.buffers.phase("recheck", shared=True):
            self.buffers.bind(sides=(self.runners.reference,))
            self.found.extra.output_sensitivity, self.found.extra.suspect_constant_output = self.timer.sensitivity()
        self.add_pair()

    def add_pair(self) -> None:
        """This pair of runners' speedup and interval, and the result's: the pairs' so far (:func:`stats.combine_pairs`)."""
        samples, extra = self.timer.samples, self.found.extra
        ref, new = statistics.median(samples["reference"]), statistics.median(samples["candidate"])
        confirmed = max(new, self.timer.confirmed_new_ms)  # what the supervisor's clock vouches for (stats.wall_check)
        speedup = ref / confirmed if confirmed > 0 else math.inf
        interval = speedup_interval(samples["reference"], samples["candidate"], speedup)
        self.pairs.append(PairTiming(speedup, *interval, confirmed > new))
        self.pair_refs.append("forked" if isinstance(self.runners.reference.process, ForkedRunner) else "new interpreter")
        for key in ("reference", "candidate"):
            self.pair_samples[key] += samples[key]
        process_sd = self.process_sd  # one pair: the offset its processes drew, unseen by its rounds
        result = combine_pairs(self.pairs, process_sd)
        self.found.update(samples={"ref": list(self.pair_samples["reference"]), "new": list(self.pair_samples["candidate"])},
                          speedup=result.speedup)  # fmt: skip
        extra.speedup_capped, extra.speedup_noisy = result.capped, result.noisy
        extra.speedup_interval = [round(result.lo, 4), round(result.hi, 4) if math.isfinite(result.hi) else None]
        if len(self.pairs) == 1:
            extra.speedup_process_sd = process_sd
        else:
            extra.speedup_process_sd = None
            pairs = zip(self.pairs, self.pair_refs, strict=True)
            extra.process_pairs = [{**t.to_dict(), "reference": how} for t, how in pairs]

    @property
    def process_sd(self) -> float:
        """The offset a pair of runner processes draws on this device (:data:`stats.PROCESS_SD`)."""
        return PROCESS_SD.get(self.ctx.device.type, 0.0)

    def spares_wanted(self) -> int:
        """How many reference runners to fork now for later pairs of runner processes (:func:`stats.another_pair`): where
        ``--kb-process-pairs`` asks, one for each pair after the first; on a CPU, for the second and third (few results
        take a fourth or fifth: their references start as new interpreters); none on a GPU, where few results take a
        second pair and its reference starts as a new interpreter (this process has touched CUDA)."""
        if self.ctx.spec.build_only or self.ctx.cpu_check:
            return 0
        if self.cfg.process_pairs:
            return self.cfg.process_pairs - 1
        return SPARE_PAIRS - 1 if not self.ctx.on_gpu else 0

    def time_again(self) -> None:
        """Time in fresh runner processes, both sides, while :func:`stats.another_pair` asks: an offset that lasts a
        whole evaluation belongs to the processes (where their threads and buffers landed; on a 16-core host a reference
        judged against itself printed 1.172, every round agreeing), and only new processes draw it again. Every call of
        a new pair is checked as in the first; the candidate is loaded again from its build folder, not built again."""
        ctx, runners, status = self.ctx, self.runners, self.ctx.status
        while another_pair(self.pairs, self.cfg.process_pairs, ctx.device.type, self.process_sd):
            need = sum(status.stage_seconds.get(stage, 0.0) for stage in ("init", "time")) + PAIR_START_S
            if ctx.remaining() < need:  # the offset stays unknown: the speedup is not printed as a steady one
                self.found.extra.speedup_noisy = True
                self.found.extra.process_pairs_skipped = (f"{ctx.remaining():.0f} s left of the candidate's time, a new pair "
                                                          f"of runners needs about {need:.0f} s")  # fmt: skip
                return
            status.enter("reference")
            runners.stop(runners.reference)
            status.enter("compile")
            runners.candidate = self.builder.launch_runner(self.folder)  # imports torch while the reference's is readied
            status.enter("reference")
            # a spare forked with the first; else a new interpreter: this process has run parallel ops since that fork
            spare = runners.spares.pop(0) if runners.spares else None
            runners.reference = spare or runners.start_reference(fork=False, tag=f"-{len(self.pairs) + 1}")
            if spare is None:
                runners.cgroup_like_the_candidate(runners.reference)
            self.ready_reference()
            status.enter("compile")
            runners.set_up(runners.candidate)
            self.init()
            self.warm_up(before_time=True)
            self.timer.time()
            runners.stop_candidate()
            self.add_pair()


def main(argv: list[str], started: float | None = None) -> int:
    """The supervisor process: ``argv[1]`` is the assignment; the result is written where it says."""
    # What exists now (torch, sympy, the fork server's warm-up) is never garbage: each phase's gc.collect (device memory
    # back before the lock goes) then walks only this evaluation's objects (~120 ms less a phase on the H100). No tensor
    # of the evaluation exists yet, and a frozen object is never collected (537ed4f froze after set-up: buffers leaked).
    gc.freeze()
    spec = Assignment.read(Path(argv[1]))
    if spec.parent_pid:
        die_with_parent(spec.parent_pid)
    become_subreaper()  # whatever a runner leaves behind comes back to us, and is killed below
    status = Status(spec.status_path, started)
    try:
        found = profiled(Evaluation(spec, status).run, "supervisor")
    finally:
        kill_children()
    tmp = spec.result_path + ".tmp"
    Path(tmp).write_text(json.dumps(found, default=str))
    os.replace(tmp, spec.result_path)
    return 0
