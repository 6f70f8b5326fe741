"""How one evaluation is run: the knobs shared by pytest, ``kbagent eval`` and the worker."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from .errors import KernelBenchUsageError
from .judge.protocol import MAX_CALLS as MAX_ROUND_CALLS
from .tolerance import PRESETS as TOLERANCES
from .tolerance import Tolerance, check_number
from .tolerance import parse as parse_tolerance

TIMERS = ("auto", "events", "round", "cuda-graph")  # --timer (judge/supervisor/timing.py)
AUTO_ROUND_BELOW_MS = 1.0  # --timer auto: a round's calls timed together where the reference's call is shorter (GPU)
INPUTS = ("standard", "varied")  # --inputs: the correctness trials' distributions (judge/distributions.py)

MAX_PROCESS_PAIRS = 5  # --process-pairs: as many as a CPU takes by itself (stats.AUTO_PAIRS); each a runner start and a timing phase


# the judge's numeric settings from the environment (judge/supervisor/plan.py) and their defaults
ENV_NUMBERS = {"KB_DISK_GB": "8", "KB_PROBE_FLOOR_MAX_US": "150", "KB_TIME_TURN_S": "5"}
# KB_LIGHT_HEADERS: how build/light.py compiles a .cu (aten: ATen's own headers first, then torch/types.h; 1: torch/types.h
# where it builds; 0: off)
LIGHT_HEADERS = ("aten", "1", "0")


def light_headers() -> str:
    """KB_LIGHT_HEADERS's value ("aten" where unset); another is a one-line usage error, raised by EvalConfig before any work."""
    given = os.environ.get("KB_LIGHT_HEADERS") or LIGHT_HEADERS[0]
    if given not in LIGHT_HEADERS:
        raise KernelBenchUsageError(f"KB_LIGHT_HEADERS={given!r}: choose aten (ATen's own headers first, the default), 1 "
                                    "(torch/types.h where it builds) or 0 (off)")  # fmt: skip
    return given


def env_number(name: str) -> float:
    """A positive number the environment sets (:data:`ENV_NUMBERS`: the default where unset); one that is not is a
    one-line usage error, which EvalConfig raises before any work."""
    given = os.environ.get(name) or ENV_NUMBERS[name]
    try:
        value = float(given)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise KernelBenchUsageError(f"{name}={given!r}: give a positive number (default {ENV_NUMBERS[name]})")
    return value


def default_cache_dir() -> Path:
    if os.environ.get("KB_CACHE_DIR"):
        return Path(os.environ["KB_CACHE_DIR"])
    try:
        import platformdirs
    except ImportError:  # a bare GPU box running the engine from a checkout
        return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "pytest-kernelbench"
    return Path(platformdirs.user_cache_dir("pytest-kernelbench", appauthor=False))


def default_lock_dir() -> Path:
    return Path(os.environ.get("KB_LOCK_DIR") or os.path.join(tempfile.gettempdir(), "pytest-kernelbench-locks"))


# Paths on the machine that judges: left out of reports and saved run settings, never carried elsewhere.
MACHINE_FOLDERS = ("lock_dir", "build_dir", "pch_dir", "hide")

# How the reference runs (--mode): eager, torch.compile with an inductor mode ("compile" is "compile:default"),
# or torch.compile with the torch_tensorrt backend (needs torch-tensorrt and a GPU).
INDUCTOR_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MODES = ("eager", "compile", *(f"compile:{m}" for m in INDUCTOR_MODES), "tensorrt")
# PIKE judges inference: its evaluator calls model.eval() on both sides. KernelBench leaves models in train mode.
PIKE_LEVELS = ("0", "3-metr", "3-metr-old", "5")
SUITE_LEVELS = ("smoke", "opinfo")  # the level of an op suite's items (--suite): BackendBench's
REF_MODES = ("eval", "train")
DEVICES = ("cpu", "cuda", "cpu-check")
# Signs of a GPU driver on Linux: a device node (NVIDIA's; Jetson's; ROCm's; WSL's CUDA), NVIDIA's loaded kernel
# module, or its tools (libcuda makes missing nodes through nvidia-modprobe on first use, so a freshly booted server
# may have none yet). Without any of them torch.cuda.is_available() is False, and importing torch to hear it costs
# seconds (2.5-4 CPU-s on CI's machine).
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvhost-ctrl-gpu", "/dev/nvgpu", "/dev/nvmap", "/dev/kfd", "/dev/dxg",
                    "/proc/driver/nvidia")  # fmt: skip
GPU_DRIVER_TOOLS = ("nvidia-smi", "nvidia-modprobe")


def cuda_available(*, asked: bool = False) -> bool:
    """``torch.cuda.is_available()``. Where nobody asked for cuda (the default device), a Linux machine with no sign of
    a GPU driver is answered without importing torch; ``asked`` (``--device cuda``) always asks torch."""
    if not asked and sys.platform.startswith("linux") and not any(os.path.exists(node) for node in GPU_DEVICE_NODES):
        if not any(shutil.which(tool) for tool in GPU_DRIVER_TOOLS):
            return False
    import torch

    return torch.cuda.is_available()


def pick_device(requested: str | None) -> str:
    """The judge's device: as asked (``cuda`` only where one is visible), else cuda where one is, else cpu."""
    if requested in ("cpu", "cpu-check"):  # nothing to ask torch: the judges import it themselves
        return requested
    if requested == "cuda" and not cuda_available(asked=True):
        raise KernelBenchUsageError("--device cuda: no CUDA device is visible (torch.cuda.is_available() is False); use --device cpu")
    return requested or ("cuda" if cuda_available() else "cpu")


def compile_mode(mode: str) -> str:
    """What the reference's runner wraps it in: "" (eager), an inductor mode ("default", "max-autotune", ...) or "tensorrt"."""
    if mode in ("eager", "tensorrt"):
        return "" if mode == "eager" else mode
    kind, _, inductor = mode.partition(":")
    if kind != "compile" or (inductor and inductor not in INDUCTOR_MODES):
        raise KernelBenchUsageError(f"--mode {mode}: choose {', '.join(MODES)}")
    return inductor or "default"


def default_ref_mode(level: str) -> str:
    """eval for PIKE's levels (its evaluator calls model.eval()), train for KernelBench's (and files of no level)."""
    return "eval" if level in PIKE_LEVELS else "train"


def default_tolerance(level: str) -> str:
    """The tolerance of the project whose problems ``level`` holds: ``pike`` for PIKE's levels (0, 3-metr, 5),
    ``backendbench`` for an op suite's items (--suite), ``kernelbench`` for KernelBench's levels (1-4), the bundled
    ``mini`` (KernelBench-format problems judged by KernelBench's conventions, train mode included) and files of no level."""
    if level in PIKE_LEVELS:
        return "pike"
    return "backendbench" if level in SUITE_LEVELS else "kernelbench"


def mode_unavailable(mode: str, device: str) -> str:
    """Why this machine cannot run the reference in ``mode`` ("" when it can): --mode tensorrt needs torch-tensorrt and CUDA."""
    if mode != "tensorrt":
        return ""
    import importlib.util

    if importlib.util.find_spec("torch_tensorrt") is None:
        return "--mode tensorrt needs torch-tensorrt, which is not installed (pip install torch-tensorrt, for your CUDA build of torch)"
    return "" if device == "cuda" else f"--mode tensorrt needs --device cuda (TensorRT runs on NVIDIA GPUs), not {device}"


@dataclasses.dataclass
class EvalConfig:
    device: str = "cpu"  # "cpu", "cuda", or "cpu-check" (no GPU: CUDA candidates compiled, others run on the CPU; docs/judge.md)
    device_index: int = 0
    timeout: float = 300.0  # wall-clock seconds charged to the candidate: compile, init, run, compare, time
    setup_timeout: float = 900.0  # seconds for the harness's own setup (importing torch, building the reference), and per reference call
    mode: str = "eager"  # how the reference runs: one of MODES ("compile:max-autotune": torch.compile(mode="max-autotune"))
    ref_mode: str = ""  # "eval" or "train": model.eval()/.train() on both sides after construction; "": by level (for_level)
    # the outputs' tolerance: kernelbench, pike, backendbench (per output dtype: tolerance.py) or "ATOL[,RTOL]"; "": by
    # level (for_level); atol/rtol, when given, replace the rule's for every dtype
    tolerance: str = ""
    atol: float | None = None
    rtol: float | None = None
    trials: int = 5  # correctness trials, each on fresh inputs
    seed: int = 42  # the models' weights (torch.manual_seed before each builds); inputs come from fresh OS entropy every call
    warmup: int = 3
    # timing samples of each side at least (a call, or a round's mean); 0: the device's default (timing_min_reps: GPU 30,
    # CPU 10); on a GPU, calls too big to share a round may stop at 16 once both medians are precise (docs/timing-fidelity.md)
    min_reps: int = 0
    max_reps: int = 0  # timed calls of each side at most, once min_reps samples are in (stats.Stopper); 0: GPU 300, CPU 50
    max_time: float = 0.0  # seconds of timing per candidate; 0: device default (GPU 3, CPU 2)
    rel_err: float = 0.01  # stop timing once the median's standard error is below this fraction of it
    # calls of each side in one timing round (each on its own fresh inputs, one request to the runner): 0 is as many as
    # fit in the supervisor's bounds on a GPU (judge/supervisor/plan.py calls_per_round), 1 on the CPU
    round_calls: int = 0
    # pairs of runner processes the timing runs in, each pair started afresh (judge/stats.py another_pair): 0 is one,
    # and on the CPU a second where the first's speedup lies outside +-5% (noisy or not), a third where those leave it in doubt
    process_pairs: int = 0
    # timed calls whose outputs total less than this are all compared; above it, each one is with probability
    # 1/4 (the supervisor's draw, which the candidate cannot see), and at least 4 (docs/timing-fidelity.md, "Which calls are checked")
    check_all_below_mb: float = 64.0
    strict: bool = False  # reject candidates whose forward dispatches PyTorch compute ops
    profile: bool = False  # on a GPU: a per-kernel time table of one candidate call (torch.profiler), for kbagent's improve prompt
    # where get_inputs() makes its tensors: "device" (factory calls run under torch.device, in the
    # locked window: milliseconds) or "host" (KernelBench's way: on the CPU, then copied; a level-1
    # problem's 1.6e9 random numbers take the CPU 10-25 s per input set)
    inputs_on: str = "device"
    # the correctness trials' inputs: "varied" (after the first trial, other scales, a shift, uniform, special values, small
    # integers, each where the reference stays finite: judge/distributions.py) or "standard" (get_inputs()'s own
    # distribution only, as KernelBench and PIKE publish their numbers)
    inputs: str = "varied"
    lock_dir: str = ""
    lock_timeout: float = 3600.0  # seconds to wait for the device lock before giving up
    build_dir: str = ""  # build cache: one TORCH_EXTENSIONS_DIR per candidate key inside (see buildcache.py)
    pch_dir: str = ""  # shared precompiled torch/extension.h for load_inline binding files (see pch.py); "off": none
    max_memory_gb: float = 0.0  # host memory of the candidate's processes (resident, less the shared buffers); 0: its cgroup's default
    log_chars: int = 10_000  # how much of a failing candidate's log a result keeps
    # how a supervisor process starts: "forkserver" (forked from a server that imported torch once:
    # saves ~2 s per candidate; Linux) or "spawn" (a fresh interpreter each time)
    worker_start: str = ""
    # how each call is timed on the GPU: "auto" (a round's calls of a short call together, else "events"),
    # "events" (CUDA events around one call), "round" (events around a round's calls back to back) or "cuda-graph"
    # (each side's call captured once in a CUDA graph, events around one replay: no host launch cost; falls back to
    # events for both sides, saying why, when either capture fails)
    timer: str = "auto"
    # the candidate's runner: "auto" (a bubblewrap sandbox when one can be started, else a plain
    # process, said once), "required" (no sandbox is an error), "off" (a plain process)
    sandbox: str = "auto"
    # more paths the candidate's sandbox hides, as it hides the lock and build folders (kbagent serve: its --state folder,
    # whose episode log holds every rollout's code)
    hide: tuple[str, ...] = ()
    # the problem's code is a client's (kbagent serve --allow-problem-code): its reference and its get_inputs() run in
    # runners sandboxed like a candidate's, and none of it in a judge's own processes (judge/supervisor/problem.py)
    problem_sandbox: bool = False

    def __post_init__(self) -> None:
        _check_numbers(self)
        gpu = self.device == "cuda"
        self.max_reps = self.max_reps or (300 if gpu else 50)
        self.max_time = self.max_time or (3.0 if gpu else 2.0)
        if self.timing_min_reps > self.max_reps:  # the stopping rule would stop at max_reps calls short of min_reps samples
            raise KernelBenchUsageError(
                f"min_reps {self.timing_min_reps} is above max_reps {self.max_reps}: give max_reps at least min_reps")
        self.lock_dir = self.lock_dir or str(default_lock_dir())
        self.worker_start = self.worker_start or os.environ.get("KB_WORKER_START") or (
            "forkserver" if sys.platform.startswith("linux") else "spawn")
        if self.worker_start not in ("forkserver", "spawn"):
            raise KernelBenchUsageError(
                f"worker start must be 'forkserver' or 'spawn', not {self.worker_start!r} (KB_WORKER_START)")
        if self.timer not in TIMERS:
            raise KernelBenchUsageError(f"--kb-timer {self.timer}: choose {', '.join(TIMERS[:-1])} or {TIMERS[-1]}")
        if self.timer == "cuda-graph" and self.device != "cuda":
            raise KernelBenchUsageError("--kb-timer cuda-graph needs --device cuda (CPU timing has no graphs)")
        if not 0 <= self.round_calls <= MAX_ROUND_CALLS:
            raise KernelBenchUsageError(f"--round-calls {self.round_calls}: give 0 (automatic) to {MAX_ROUND_CALLS}")
        if not 0 <= self.process_pairs <= MAX_PROCESS_PAIRS:
            raise KernelBenchUsageError(f"--process-pairs {self.process_pairs}: give 0 (automatic) to {MAX_PROCESS_PAIRS}")
        if self.inputs not in INPUTS:
            raise KernelBenchUsageError(f"--inputs {self.inputs}: choose {' or '.join(INPUTS)}")
        if self.sandbox not in ("auto", "required", "off"):
            raise KernelBenchUsageError(f"--kb-sandbox {self.sandbox}: choose auto, required or off")
        if self.problem_sandbox and self.device == "cpu-check":  # scaling a problem down runs its code in the judge
            raise KernelBenchUsageError("a client's problem_code cannot be judged with device cpu-check: choose cpu or cuda")
        if gpu:  # the speed of light's peaks (judge/sol.py): a malformed KB_PEAK before any work, not in every result
            from .judge.sol import env_peak

            env_peak()
        for name in ENV_NUMBERS:  # before any supervisor reads them (judge/supervisor/plan.py)
            env_number(name)
        light_headers()  # read by each build (judge/supervisor/building.py)
        compile_mode(self.mode)  # a usage error for a mode that does not exist
        if self.ref_mode not in ("", *REF_MODES):
            raise KernelBenchUsageError(f"--ref-mode {self.ref_mode}: choose eval or train")
        if self.tolerance:
            parse_tolerance(self.tolerance)  # a usage error for a rule that does not exist
        for flag in ("atol", "rtol"):
            if getattr(self, flag) is not None:
                setattr(self, flag, check_number(f"--{flag}", getattr(self, flag)))
        if self.device not in DEVICES:
            raise KernelBenchUsageError(f"--device {self.device}: choose {', '.join(DEVICES)}")
        self.build_dir = self.build_dir or os.environ.get("KB_BUILD_CACHE") or str(default_cache_dir() / "builds")
        self.pch_dir = self.pch_dir or os.environ.get("KB_PCH_DIR") or str(default_cache_dir() / "pch")
        self.hide = tuple(os.path.abspath(path) for path in self.hide)  # a list when read back from JSON

    @property
    def timing_min_reps(self) -> int:
        """The samples each side is timed for at least: ``min_reps``, or the device's default."""
        return self.min_reps or (30 if self.device == "cuda" else 10)

    @property
    def device_label(self) -> str:
        return f"cuda:{self.device_index}" if self.device == "cuda" else self.device

    @property
    def target_device(self) -> str:
        """The device candidates are written for: cpu-check checks candidates meant for a GPU."""
        return "cuda" if self.device == "cpu-check" else self.device

    def for_level(self, level: str) -> EvalConfig:
        """This config for a problem of ``level``: an unset ``ref_mode`` or ``tolerance`` becomes that level's project's
        (:func:`default_ref_mode`, :func:`default_tolerance`)."""
        if self.ref_mode and self.tolerance:
            return self
        return dataclasses.replace(self, ref_mode=self.ref_mode or default_ref_mode(level),
                                   tolerance=self.tolerance or default_tolerance(level))  # fmt: skip

    @property
    def tol(self) -> Tolerance:
        """The outputs' tolerance by dtype: ``tolerance`` (unset: KernelBench's, as for a file of no level; a problem's
        evaluation has its level's, :meth:`for_level`) with ``atol``/``rtol`` in place of its numbers where given."""
        return parse_tolerance(self.tolerance or default_tolerance("")).replaced(self.atol, self.rtol)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def public(self) -> dict[str, Any]:
        """The settings without this machine's folders: what reports and run records keep."""
        return {k: v for k, v in self.to_dict().items() if k not in MACHINE_FOLDERS}


# Numbers an EvalConfig field takes: (the least, whether the least itself is allowed); NaN is never one.
_BOUNDS = {"timeout": (0, False), "setup_timeout": (0, False), "atol": (0, True), "rtol": (0, True), "trials": (1, True),
           "warmup": (0, True), "min_reps": (0, True), "max_reps": (0, True), "max_time": (0, True), "rel_err": (0, False),
           "check_all_below_mb": (0, True), "lock_timeout": (0, False), "max_memory_gb": (0, True), "log_chars": (0, True),
           "device_index": (0, True)}  # fmt: skip


def _check_numbers(config: EvalConfig) -> None:
    for name, (least, allowed) in _BOUNDS.items():
        value = getattr(config, name)
        if name in ("atol", "rtol"):  # unset: the tolerance rule's numbers (tolerance.py)
            if value is not None:
                check_number(option_name(name), value)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise KernelBenchUsageError(f"{option_name(name)} {value}: expected a number")
        if value < least or (value == least and not allowed):
            bound = f"{least} or more" if allowed else f"more than {least}"
            raise KernelBenchUsageError(f"{option_name(name)} {value:g}: must be {bound}")


def check_folders(config: EvalConfig) -> None:
    """The folders the judge writes (locks, builds, the shared PCH), made now or one line: before any work."""
    for name in ("lock_dir", "build_dir", "pch_dir"):
        folder = getattr(config, name)
        if name == "pch_dir" and folder == "off":
            continue
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            usable = os.access(folder, os.W_OK | os.X_OK)
            why = "not writable"
        except OSError as exc:
            usable, why = False, exc.strerror or str(exc)
        if not usable:
            raise KernelBenchUsageError(f"{option_name(name)} {folder}: cannot make or write it ({why}); pass a writable folder")


def option_name(field: str) -> str:
    """The flag of an EvalConfig field, as kbagent spells it and (where it differs) pytest: ``--max-memory/--kb-max-memory``."""
    opt = next((o for o in JUDGE_OPTIONS if o.field == field), None)
    if opt is None:
        return field
    return "/".join(dict.fromkeys((opt.flag, *opt.pytest_flags)))


# ---------------------------------------------------------------- the judge's options, written once


@dataclasses.dataclass(frozen=True)
class JudgeOption:
    """One command-line option of an :class:`EvalConfig` field, for pytest and for ``kbagent``.

    Its default is the dataclass field's, shown in the help; both front ends take ``None`` (not
    given) as "use the default".
    """

    field: str
    flag: str  # kbagent's spelling
    help: str
    pytest_flags: tuple[str, ...] = ()  # pytest's spellings, where pytest or a plugin owns the plain one
    choices: tuple[str, ...] = ()
    env: str = ""  # the environment variable that also sets it

    @property
    def kind(self) -> type:
        return _FIELD_KINDS.get(self.field) or type(_FIELD_DEFAULTS[self.field])

    def help_text(self) -> str:
        default = _FIELD_DEFAULTS[self.field]
        shown = {"device": "cuda if visible", "lock_dir": "a folder in the temp dir", "build_dir": "the user cache folder",
                 "pch_dir": "beside the build cache", "ref_mode": "eval for PIKE's levels 0, 3-metr, 5; train for "
                 "KernelBench's", "tolerance": "by level: kernelbench for KernelBench's levels 1-4 and mini, pike for "
                 "PIKE's 0, 3-metr, 5, backendbench for --suite", "atol": "the tolerance's",
                 "rtol": "the tolerance's", "max_time": "3 on a GPU, 2 on the CPU"}.get(self.field, default)  # fmt: skip
        env = f"; env {self.env}" if self.env else ""
        return f"{self.help} (default: {shown}{env})" if not isinstance(default, bool) else self.help


JUDGE_OPTIONS: tuple[JudgeOption, ...] = (
    JudgeOption("device", "--device", "where to judge; cpu-check: without a GPU, CUDA candidates only compiled (nvcc), "
                "Triton ones run in its interpreter on scaled-down inputs", choices=DEVICES),
    JudgeOption("timeout", "--timeout", "wall-clock seconds charged to the candidate (compile, init, run, compare, time)",
                pytest_flags=("--timeout", "--kb-timeout")),
    JudgeOption("mode", "--mode", "how the reference runs: eager, compile[:INDUCTOR_MODE] (torch.compile: the baseline to "
                "beat), or tensorrt (torch_tensorrt backend)", choices=MODES),
    JudgeOption("ref_mode", "--ref-mode", "model.eval() or model.train() on both sides after construction", choices=REF_MODES),
    JudgeOption("tolerance", "--tolerance", f"the outputs' tolerance: {', '.join(TOLERANCES)} (each project's atol and rtol "
                "by output dtype; kernelbench: 1e-4 for float32, 1e-2 for float16 and bfloat16), or ATOL[,RTOL] for every "
                "dtype; integer and bool outputs are compared exactly"),
    JudgeOption("atol", "--atol", "absolute tolerance for every output dtype, in place of the tolerance's"),
    JudgeOption("rtol", "--rtol", "relative tolerance for every output dtype, in place of the tolerance's"),
    JudgeOption("trials", "--trials", "correctness trials, each on fresh inputs"),
    JudgeOption("seed", "--seed", "seed of the models' weights (every call's inputs come from fresh OS entropy)",
                pytest_flags=("--kb-seed",)),
    JudgeOption("strict", "--strict", "reject candidates whose forward runs PyTorch compute ops", pytest_flags=("--kb-strict",)),
    JudgeOption("inputs_on", "--inputs-on", "make get_inputs() tensors on the judged device, or on the host as KernelBench does",
                choices=("device", "host")),
    JudgeOption("inputs", "--inputs", "the correctness trials' inputs: varied (after the first trial: scaled, shifted, "
                "uniform, special values (zeros, ones, extremes, subnormals), small integers; a variant the reference raises "
                "on or answers with non-finite values is dropped), or standard: get_inputs()'s own distribution only, as "
                "KernelBench and PIKE publish", choices=INPUTS),
    JudgeOption("max_time", "--max-time", "seconds of timing per candidate, once each side has "
                "its least samples", pytest_flags=("--kb-max-time",), env="KB_MAX_TIME"),
    JudgeOption("timer", "--timer", "timing: CUDA events (CPU: perf_counter) around each call (events), around a timing "
                "round's calls back to back (round: small kernels, whose wall clock then resolves microseconds; on the CPU "
                "only with --round-calls N, as CPU rounds are one call otherwise), around one CUDA-graph replay (cuda-graph), "
                f"or round where the reference's call is shorter than {AUTO_ROUND_BELOW_MS:g} ms on a GPU and events elsewhere (auto)",
                pytest_flags=("--kb-timer",), choices=TIMERS),
    JudgeOption("round_calls", "--round-calls", "calls of each side per timing round, each on fresh inputs (0: automatic, "
                "up to 16 on a GPU for small, fast problems, 64 where a round's calls are timed together; 1 on the CPU)",
                pytest_flags=("--kb-round-calls",)),
    JudgeOption("process_pairs", "--process-pairs", "pairs of fresh runner processes to time in (0: automatic, one, and "
                "a second where the first's speedup is outside 0.95-1.05 on the CPU, or on a GPU outside 0.98-1.02 yet within "
                "3 standard deviations of 1.0; a third where those two leave it in doubt, on the CPU up to five; 1: one, the most "
                "judged an hour)",
                pytest_flags=("--kb-process-pairs",), env="KB_PROCESS_PAIRS"),
    JudgeOption("sandbox", "--sandbox", "the candidate's runner: in a bubblewrap sandbox if one starts (auto), "
                "always (required: an error without one), or never (off)", pytest_flags=("--kb-sandbox",),
                choices=("auto", "required", "off")),
    JudgeOption("max_memory_gb", "--max-memory",
                "host memory of the candidate's processes in GB (0: where its cgroup takes a limit, the host's less a reserve "
                "for the judge; else none)",
                pytest_flags=("--kb-max-memory",)),
    JudgeOption("lock_dir", "--lock-dir", "folder of the per-device locks", pytest_flags=("--kb-lock-dir",), env="KB_LOCK_DIR"),
    JudgeOption("build_dir", "--build-cache", "folder of cached extension builds, one per candidate hash", env="KB_BUILD_CACHE"),
    JudgeOption("pch_dir", "--build-pch", "folder of shared precompiled torch/extension.h headers, or off", env="KB_PCH_DIR"),
)
_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(EvalConfig)}
_FIELD_DEFAULTS["device"] = ""
_FIELD_KINDS = {"atol": float, "rtol": float}  # default None: not given


def add_judge_options(addoption: Any, *, pytest: bool, leave_out: frozenset[str] = frozenset()) -> None:
    """Declare every judge option through ``addoption`` (pytest's group or argparse), dest ``kb_<field>``."""
    for opt in JUDGE_OPTIONS:
        flags = [f for f in ((opt.pytest_flags or (opt.flag,)) if pytest else (opt.flag,)) if f not in leave_out]
        kwargs: dict[str, Any] = {"dest": f"kb_{opt.field}", "default": None, "help": opt.help_text()}
        if opt.kind is bool:
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = opt.kind
            if opt.choices:
                kwargs["choices"] = opt.choices
        addoption(*flags, **kwargs)


def judge_values(get: Any) -> dict[str, Any]:
    """The judge options that were given: ``get(dest)`` for each, ``None``/``False`` left out; then those not given
    whose environment variable is set (:func:`env_values`)."""
    values = {opt.field: get(f"kb_{opt.field}") for opt in JUDGE_OPTIONS}
    return env_values({k: v for k, v in values.items() if v is not None and v is not False})


_KIND_WORDS = {int: "a whole number", float: "a number"}


def env_values(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (the judge options given on a command line), with each option not given taken from its environment
    variable where that is set (``KB_PROCESS_PAIRS=1``); the folders' variables EvalConfig reads itself. A value that
    is not of the option's kind is a usage error naming the variable."""
    values = dict(given)
    for opt in JUDGE_OPTIONS:
        raw = os.environ.get(opt.env, "") if opt.env and opt.field not in MACHINE_FOLDERS else ""
        if raw and opt.field not in values:
            try:
                values[opt.field] = opt.kind(raw)
            except ValueError:
                kind = _KIND_WORDS.get(opt.kind, opt.kind.__name__)
                raise KernelBenchUsageError(f"{opt.env}={raw!r}: give what {opt.flag} takes ({kind})") from None
    return values
