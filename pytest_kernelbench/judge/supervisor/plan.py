"""Timing and memory policy, as constants and pure functions of what the reference's first call showed
(:class:`Footprint`): how many calls a timing round holds, when timing may stop early, which timed calls are checked,
how much device memory a phase is admitted for, where a side's inputs may move. No process, no device, no state.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from typing import Any

import torch

from ...config import env_number
from ..protocol import MAX_CALLS

ADMISSION_MARGIN_BYTES = 1 << 30  # a CUDA context, cuBLAS workspaces, Triton's first compiles
UNKNOWN_NEED_BYTES = 1 << 40  # a reference's first call announces this where its inputs' shapes are unknown: all of a GPU
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
TOGETHER_ROUND_CALLS = MAX_CALLS  # the same with --timer round (a round's calls timed together): all one request carries
BUFFER_ALIGN = 512  # bytes: where each tensor of a phase's one shared buffer starts
# A GPU timing phase's buffers have room to move in (docs/timing-fidelity.md, "Where a side's inputs sit"): a quarter of their size
# and SHIFT_MAX at most, in SHIFT_STEP steps (none below one step); every call of the phase places its set anew there
SHIFT_STEP = 2 << 20
SHIFT_MAX = 1 << 30
CHECK_ONE_IN = 4  # above check_all_below_mb, a timed call is checked with probability 1/CHECK_ONE_IN ...
MIN_CHECKED = 4  # ... and timing goes on until at least this many timed calls were
# A GPU call too big to share a round (its inputs and outputs above ROUND_BYTES) costs a full fresh input set a sample
# (three copies of multi-GB inputs), so its timing may stop at EARLY_SAMPLES samples once both medians are known within
# EARLY_REL_ERR (a self-speedup's +-2% at about 3 sigma) and EARLY_CHECKED of its calls were checked, each with
# probability EARLY_CHECK_P: more checks than 30 calls at 1/CHECK_ONE_IN give (docs/timing-fidelity.md, "Which calls are checked")
EARLY_SAMPLES = 16
EARLY_REL_ERR = 0.005
EARLY_CHECKED = 8
EARLY_CHECK_P = 0.5
# The same early stop for a round of calls whose reference takes EARLY_ROUND_MS or more in the time phase (level 3's
# models, 0.2-30 ms a call): the supervisor's own work in a round's window is about 0.4 ms a call, so its clock resolves
# such a round, and 16 precise samples vouch for it as 30 do
EARLY_ROUND_MS = 2.5
# A candidate's request in the time phase that runs past COLD_CALL_FACTOR times its calls' median in the trials (the
# supervisor's clock), and at least COLD_CALL_MIN_S, is a recompile, autotune, capture or lazy set-up the phase's own
# inputs set off: it finishes with the lock shared, up to REWARM_ROUNDS rounds warm it up there, and the phase starts
# its warm-up again (Timer.rewarm); after SENT_BACK_MAX of them its calls stay in the phase, however long
COLD_CALL_FACTOR = 20.0
COLD_CALL_MIN_S = 1.0
REWARM_ROUNDS = 3
SENT_BACK_MAX = 2
# A time phase that has held the lock alone for KB_TIME_TURN_S while other judges wait for it, shared or alone (and
# one waiting to hold it alone fits in the GPU's memory) lets it go between two rounds until they have it
# (TURN_HANDOFF_S at most), then queues for it again (Device.take_turn): a long timing does not stall short ones
TIME_TURN_S = env_number("KB_TIME_TURN_S")
TURN_HANDOFF_S = 1.0
PAIR_START_S = 10.0  # time_again: a new pair of runners' start, beyond the first pair's init and time stages
# Device.settle: a GPU still busy after SETTLE_TURN_S holding the lock alone runs a kernel longer than a step aside, or
# a queue of them; the lock goes back for SETTLE_AWAY_S, doubling up to SETTLE_AWAY_MAX_S (that kernel's owner runs on,
# charged), then is queued for again. Not sooner: its owner, let go on, queues more of its long kernels (PIKE corpus, one
# H200, 953e23d: turns of 5 s, five waits of 10-55 s, 107 s in all, where c74c273's judges waited 49 s holding the lock)
SETTLE_TURN_S = 20.0
SETTLE_AWAY_S = 5.0
SETTLE_AWAY_MAX_S = 60.0
# a settle this long keeps whose processes NVML saw busy meanwhile (extra.settle_busy: judge/nvml.py), SETTLE_NOTES at most
SETTLE_NOTE_S = 1.0
SETTLE_NOTES = 20
# A quiet GPU's probe (Device.probe_floor) is taken as 3x the median round trip, at least the median + 100 us, and at most
# PROBE_FLOOR_MAX_S: H200, 2026-11-30 (benchmarks/experiments/probe_beside_kernel.py): quiet, a median of 14-17 us (a
# floor of 113-117 us); beside another process's one long kernel, 211 us at least and 2.4 ms at the median (its time
# slices), so a floor measured there (7.1 ms) took that busy GPU for a quiet one. KB_PROBE_FLOOR_MAX_US: for a machine
# whose quiet probes take longer (none seen)
PROBE_FLOOR_MAX_S = env_number("KB_PROBE_FLOOR_MAX_US") * 1e-6
PAUSE_LIMIT = 120.0  # seconds a build step waits for one CPU timing phase at most (a phase times for max_time)
# the disk one candidate may fill in the host folders it can write (its build folder, JIT caches, a scratch outside bwrap),
# measured every DISK_CHECK_S seconds while it runs and after each phase; over it is the candidate's outcome
DISK_BYTES = int(env_number("KB_DISK_GB") * 2**30)
DISK_CHECK_S = 2.0
CHECK_ARCH = "9.0"  # --device cpu-check compiles CUDA for this architecture unless TORCH_CUDA_ARCH_LIST names one (no GPU to ask)


@dataclasses.dataclass
class Footprint:
    """What the reference's first call showed: one call's bytes of inputs and outputs, its runner's peak device
    memory, and its fastest call so far (then the trials')."""

    on_gpu: bool
    io_bytes: tuple[int, int] = (0, 0)
    ref_peak_bytes: int = 0
    ref_ms: float = math.inf


def slack_bytes(total: int) -> int:
    """Room beyond ``total`` bytes of a GPU timing phase's buffer for its sets to move in (:data:`SHIFT_STEP` steps)."""
    return min(SHIFT_MAX, total // 4) // SHIFT_STEP * SHIFT_STEP


def input_bytes(problem: Any) -> float:
    """Bytes of one input set, from shapes alone (get_inputs on the meta device); inf if unknown."""
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            values = list(problem.get_inputs())
        return float(sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor)))
    except Exception:  # noqa: BLE001 - a get_inputs that needs real data
        return math.inf


def calls_per_round(fp: Footprint, asked: int, most: int = AUTO_ROUND_CALLS) -> int:
    """How many calls of each side a timing round holds: ``asked`` (``--round-calls``), or on a GPU as many as fit in
    ROUND_MS of the reference's fastest call so far (``most`` at most: AUTO_ROUND_CALLS, or TOGETHER_ROUND_CALLS when a
    round's calls are timed together; 1 on the CPU), so that waking, stopping and draining a runner (milliseconds) are
    paid once a round instead of once a call; either way no more than fit in ROUND_BYTES of one side's shared inputs and
    outputs."""
    by_bytes = ROUND_BYTES // max(1, sum(fp.io_bytes))
    if asked:
        return int(max(1, min(asked, by_bytes)))
    if not fp.on_gpu:
        return 1
    by_time = ROUND_MS / fp.ref_ms if fp.ref_ms > 0 else most
    return int(max(1, min(most, by_bytes, by_time)))


def early_stop(fp: Footprint, min_reps_asked: int, round_calls: int, call_ms: float | None = None) -> bool:
    """Whether a timing may stop at EARLY_SAMPLES: on a GPU, for calls too big to share a round and for rounds whose
    reference takes EARLY_ROUND_MS or more, unless ``min_reps`` was given. ``call_ms``: the reference's median call in
    this timing so far (in a shared phase other judges' work slows its calls), else its fastest call before it."""
    if not fp.on_gpu or min_reps_asked:
        return False
    ms = fp.ref_ms if call_ms is None else call_ms
    return (round_calls == 1 and sum(fp.io_bytes) > ROUND_BYTES) or round_calls * ms >= EARLY_ROUND_MS


def check_timed_call(fp: Footprint, check_all_below_mb: float, early: bool = False) -> bool:
    """Whether the next timed pair is checked (sealed and compared): always when the outputs are small, else with
    probability 1/CHECK_ONE_IN (EARLY_CHECK_P for a timing that may stop early), drawn from the OS's entropy in the
    supervisor. The candidate cannot tell a checked call from another until it has returned; a candidate wrong on a
    fraction f of n timed calls goes unseen with probability (1 - f p)^n (docs/timing-fidelity.md, "Which calls are checked")."""
    if fp.io_bytes[1] < check_all_below_mb * 2**20:
        return True
    if early:
        return secrets.randbelow(1 << 16) < int(EARLY_CHECK_P * (1 << 16))
    return secrets.randbelow(CHECK_ONE_IN) == 0


def admission_bytes(fp: Footprint) -> int:
    """What a shared phase may add to the device: each runner's working memory (the reference's peak, and as much
    again for the candidate), the supervisor's shared inputs and output slots of both sides and its own fresh inputs
    (not in the runners' peaks: on the H100 judges admitted without them ran level 1's multi-GB problems out of
    memory), the time phase's room to move inputs in, and a context's worth for workspaces and first compiles."""
    inputs, outputs = fp.io_bytes
    moving = 2 * slack_bytes(max(ROUND_BYTES, inputs + outputs)) if fp.on_gpu else 0
    return 2 * fp.ref_peak_bytes + 3 * inputs + 2 * outputs + moving + ADMISSION_MARGIN_BYTES


def quiet_floor(probes_s: list[float], cap: float = PROBE_FLOOR_MAX_S) -> float:
    """A quiet GPU's probe time, with margin, from probes taken on it (Device.probe_floor): 3x their median, at least
    the median + 100 us, at most ``cap``."""
    median = sorted(probes_s)[len(probes_s) // 2]
    return min(max(3 * median, median + 100e-6), cap)


def reference_bytes(fp: Footprint) -> int:
    """What the reference's first call may add to the device where its footprint is known (memo.py): its runner's
    peak, its inputs in a shared buffer and the fresh inputs they are copied from, its outputs, a context's worth."""
    inputs, outputs = fp.io_bytes
    return fp.ref_peak_bytes + 2 * inputs + outputs + ADMISSION_MARGIN_BYTES


def warm_bytes(fp: Footprint) -> int:
    """What the candidate's first call alone may add to the device (its warm-up step): its runner's working memory
    (taken as the reference's peak, as in :func:`admission_bytes`), its inputs in a shared buffer, the fresh inputs
    they are copied from, and a context's worth for first compiles."""
    return fp.ref_peak_bytes + 2 * fp.io_bytes[0] + ADMISSION_MARGIN_BYTES


def exclusive_need(fp: Footprint, stage: str, problem: Any) -> int:
    """The device memory an exclusive phase announces while it waits (shared holders step aside only when it fits
    beside them): the time phase's admission; the reference's first call, before its peak is known, four times the
    inputs (0 on CPU)."""
    if not fp.on_gpu:
        return 0
    if stage == "time":
        return admission_bytes(fp)
    return int(min(4 * problem.input_bytes(), UNKNOWN_NEED_BYTES)) + ADMISSION_MARGIN_BYTES  # inf: shapes unknown
