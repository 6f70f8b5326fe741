"""How an evaluation was judged, typed: the ``extra`` of an :class:`~pytest_kernelbench.result.EvalResult`.

The supervisor writes these fields, the controller carries them across the process boundary as JSON, and reports,
the agent and the benchmarks read them by attribute. In JSON a field appears only once it is set (``None`` fields
are left out), so reports keep the shape they had as a plain dict; keys this version does not know are kept in
``more`` and written back as they came.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Extra:
    # --- where and how it ran
    sandbox: str | None = None  # the candidate's sandbox (bwrap, none: why)
    gpu_pin: str | None = None  # the one GPU the judge's processes saw (its UUID and device node), or why all (judge/gpus.py)
    runner_start: str | None = None  # how the candidate's runner started: "zygote" (forked, judge/zygote.py) or "interpreter: why"
    runner_early: bool | None = None  # the candidate's runner started while the reference worked
    build_cached: bool | None = None  # its build folder was in the cache
    # its module used the GPU as it was imported: its build step ran again with the GPU, the device lock shared (judge/gpuless.py)
    build_with_gpu: bool | None = None
    build_slot: int | None = None  # the machine's build slot its build held (locking.build_slot)
    build_cores: int | None = None  # GPU: how many cores its build step ran on, the timing cores set aside (cores.build_cores)
    build_slot_wait_s: float | None = None  # seconds it waited for one (charged to no one)
    pch: dict[str, Any] | None = None  # the shared precompiled headers the judge built for its build step
    # its .cu compiles, by header: "light" (torch/extension.h built as torch/types.h) or "fallback" (as written): build/light.py
    light_headers: dict[str, int] | None = None
    fused_compare: Any = None  # the fused seal/compare kernels warmed (on a GPU, beside the reference's set-up)
    cpu_check: str | None = None  # --device cpu-check: "nvcc", "cpu" or "triton-interpreter"
    scaled: list[Any] | None = None  # --device cpu-check: the problem's sizes scaled down
    skipped: str | None = None  # no verdict: this machine cannot judge it (the mode, the memory it needs: why)
    footprint: str | None = None  # what the footprint check changed to make it fit (judge/footprint.py)
    warm_step: bool | None = None  # the candidate's first call had a shared phase of its own
    min_free_gib_at_lock: float | None = None  # the least free device memory seen when a phase took the lock
    stepped_aside: int | None = None  # shared-phase calls stopped so that another judge could time
    reference_shared: bool | None = None  # its first call ran shared, the problem's footprint remembered (supervisor/memo.py)
    settle_gave_way: int | None = None  # times its time phase let the lock go while the GPU stayed busy (Device.settle)
    # each settle of a second or more: its seconds and, by NVML's samples, whose processes kept the GPU busy ("by":
    # "<supervisor pid>-<side>" for a judge's runner, else "pid N": judge/nvml.py), and how many samples saw each
    settle_busy: list[dict[str, Any]] | None = None
    supervisor_pid: int | None = None  # the evaluation's supervisor (which names a runner's cgroup: settle_busy)
    time_turns: int | None = None  # times its time phase, long, let another judge time between two rounds (Device.take_turn)
    time_turns_ended: int | None = None  # 1: a turn left the GPU busy longer than a turn, the phase took no more
    float32_precision: str | None = None  # "ieee": both runners without TF32, the tolerance being tighter (tolerance.py)
    timing_core: dict[str, int] | None = None  # GPU time phase: the core both runners were bound to, threads moved back
    # --- what the candidate's forward runs
    aten_ops: dict[str, int] | None = None  # the traced ATen operators of one call
    aten_ops_all_threads: bool | None = None
    op_trace_error: str | None = None
    kernel_profile: dict[str, dict[str, float]] | None = None  # per kernel: us and launches (the candidate's own claim)
    kernel_profile_error: str | None = None
    # --inputs varied: the distributions the trials checked, and those dropped with why (the reference raised or was not
    # finite there)
    input_variants: dict[str, Any] | None = None
    # --- the time phase
    calls_per_round: int | None = None
    timer: str | None = None  # events, round, cuda-graph or perf_counter
    cuda_graph_error: str | None = None  # why CUDA-graph timing fell back to events
    round_timer_off: str | None = None  # why --timer round fell back to timing each call (events)
    input_slack_mib: int | None = None  # room a GPU time phase's inputs moved in
    input_places: int | None = None  # how many places they were read from
    timed_calls: int | None = None
    checked_calls: int | None = None
    varied_checked_calls: int | None = None  # --inputs varied: checked timed calls whose inputs took a variant
    checked_together: int | None = None  # checked calls of timing rounds found right in one pass (compare.close_together)
    varied_strays: int | None = None  # values of varied calls outside the tolerance, within twice it (distributions.strays)
    timing_stop: str | None = None  # why timing stopped: "early", "rule" or "max_time" (stats.Stopper.why)
    early_stop_se: str | None = None  # which standard error the early stop read
    offstream_calls: dict[str, int] | None = None  # calls that left work on another stream, per side ("ref", "new")
    wall_check: dict[str, Any] | None = None  # the supervisor's clock against the claims (stats.WallCheck)
    wall_check_first_batch: dict[str, Any] | None = None  # a first batch it did not vouch for
    # rounds whose candidate request, far above its calls in the trials, finished with the device lock shared and were
    # warmed up again there before the phase's warm-up started again (Timer.rewarm): the round, the limit, the seconds
    # away from the exclusive lock and held shared, the warm-up rounds
    sent_back: list[dict[str, Any]] | None = None
    # --- the speedup
    speedup_capped: bool | None = None  # printed as the wall clock's bound, not the claims' ratio
    speedup_noisy: bool | None = None  # the spread cannot tell it from none
    speedup_interval: list[float | None] | None = None  # [low, high]
    speedup_process_sd: float | None = None  # one pair: the offset a pair of processes draws
    process_pairs: list[dict[str, Any]] | None = None  # each pair of runner processes' timing
    process_pairs_skipped: str | None = None
    # a GPU result: the problem's bound on this GPU (FLOPs, compulsory bytes, peaks) and the share of it reached (judge/sol.py)
    speed_of_light: dict[str, Any] | None = None
    output_sensitivity: float | None = None  # how much the reference's output moves with its inputs
    suspect_constant_output: bool | None = None  # near-constant: a speedup to distrust
    # --- where the time went (benchmarks/throughput.py sums these)
    split_s: dict[str, float] | None = None  # parts of the phases
    lock_held_s: dict[str, float] | None = None  # the device lock held, per phase
    # [stage, seconds since the supervisor started] at each stage's entry: where this judge was while another's work
    # met it (benchmarks/throughput.py keeps them per candidate)
    stages_at: list[list[Any]] | None = None
    cpu_s: dict[str, float] | None = None  # CPU seconds per process tree
    # --- op suites (pytest_kernelbench.suites.run)
    op_suite: dict[str, Any] | None = None
    more: dict[str, Any] = dataclasses.field(default_factory=dict)  # keys this version does not know

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in _FIELDS if getattr(self, f.name) is not None}
        for key in _TALLIES.intersection(data):  # summed at full precision, written to 0.1 ms
            data[key] = {name: round(seconds, 4) for name, seconds in data[key].items()}
        return {**self.more, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | Extra | None) -> Extra:
        if isinstance(data, Extra):
            return data
        data = dict(data or {})
        known = {name: data.pop(name) for name in list(data) if name in _NAMES}
        return cls(**known, more=data)

    def copy(self, drop: frozenset[str] = frozenset()) -> Extra:
        """A copy, less the fields named in ``drop``."""
        return Extra.from_dict({k: v for k, v in self.to_dict().items() if k not in drop})

    def tally(self, key: str, name: str, seconds: float) -> None:
        """``seconds`` added to ``self.<key>[name]`` (split_s, lock_held_s, cpu_s), unrounded: a part tallied once per
        call is often under 0.1 ms, and rounding each addition counted those as 0 or 0.1 ms."""
        totals = getattr(self, key) or {}
        totals[name] = totals.get(name, 0.0) + seconds
        setattr(self, key, totals)

    def count(self, key: str, by: int = 1) -> None:
        setattr(self, key, (getattr(self, key) or 0) + by)


_FIELDS = tuple(f for f in dataclasses.fields(Extra) if f.name != "more")
_NAMES = frozenset(f.name for f in _FIELDS)
_TALLIES = frozenset({"split_s", "lock_held_s", "cpu_s"})
