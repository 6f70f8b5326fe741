"""How one evaluation is run: the knobs shared by pytest, ``kbagent eval`` and the worker."""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .errors import KernelBenchUsageError


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
MACHINE_FOLDERS = ("lock_dir", "build_dir", "pch_dir")


@dataclasses.dataclass
class EvalConfig:
    device: str = "cpu"  # "cpu" or "cuda"
    device_index: int = 0
    timeout: float = 300.0  # wall-clock seconds charged to the candidate: compile, init, run, compare, time
    setup_timeout: float = 900.0  # seconds for the harness's own setup: importing torch, building the reference
    mode: str = "eager"  # how the reference runs: "eager" or "compile" (torch.compile)
    atol: float = 1e-2
    rtol: float = 1e-2
    trials: int = 5  # correctness trials, each with fresh seeded inputs
    seed: int = 42
    warmup: int = 3
    min_reps: int = 0  # 0: device default (GPU 30, CPU 10)
    max_reps: int = 0  # 0: device default (GPU 300, CPU 50)
    max_time: float = 0.0  # seconds of timing per candidate; 0: device default (GPU 3, CPU 2)
    rel_err: float = 0.01  # stop timing once the median's standard error is below this fraction of it
    strict: bool = False  # reject candidates whose forward dispatches PyTorch compute ops
    # where get_inputs() makes its tensors: "device" (factory calls run under torch.device, in the
    # locked window: milliseconds) or "host" (KernelBench's way: on the CPU, then copied; a level-1
    # problem's 1.6e9 random numbers take the CPU 10-25 s per input set)
    inputs_on: str = "device"
    lock_dir: str = ""
    lock_timeout: float = 3600.0  # seconds to wait for the device lock before giving up
    build_dir: str = ""  # build cache: one TORCH_EXTENSIONS_DIR per candidate key inside (see buildcache.py)
    pch_dir: str = ""  # shared precompiled torch/extension.h for load_inline binding files (see pch.py); "off": none
    max_memory_gb: float = 0.0  # host memory per candidate: an address-space rlimit on CPU, an RSS watch on CUDA; 0 = none
    log_chars: int = 10_000  # how much of a failing candidate's log a result keeps
    # how a worker process starts: "forkserver" (forked from a server that imported torch once:
    # saves ~2 s per candidate; Linux) or "spawn" (a fresh interpreter each time)
    worker_start: str = ""
    # how each repetition is timed on the GPU: "events" (CUDA events around one call) or
    # "cuda-graph" (each function captured once in a CUDA graph, events around one replay: no
    # host launch cost; falls back to events, saying why, when a capture fails)
    timer: str = "events"
    # where each timed call's inputs and output live: "separate" (each side its own input copy; every
    # call reuses its side's output block) or "shared" (both sides read one input buffer, refilled from
    # a pristine copy before every call, and every call gets the same output block: reference and
    # candidate see the same memory placement). "" (the default): shared with the events timer,
    # separate with the CUDA-graph timer (a graph owns its buffers). On the H100, separate left
    # L1-33_BatchNorm judged against itself at 0.93 (where each side's memory sat); shared kept all
    # 100 level-1 problems within +-2% (docs/timing-fidelity.md).
    placement: str = ""

    def __post_init__(self) -> None:
        gpu = self.device == "cuda"
        self.min_reps = self.min_reps or (30 if gpu else 10)
        self.max_reps = self.max_reps or (300 if gpu else 50)
        self.max_time = self.max_time or (3.0 if gpu else 2.0)
        self.lock_dir = self.lock_dir or str(default_lock_dir())
        self.worker_start = self.worker_start or os.environ.get("KB_WORKER_START") or (
            "forkserver" if sys.platform.startswith("linux") else "spawn")
        if self.worker_start not in ("forkserver", "spawn"):
            raise KernelBenchUsageError(
                f"worker start must be 'forkserver' or 'spawn', not {self.worker_start!r} (KB_WORKER_START)")
        if self.timer not in ("events", "cuda-graph"):
            raise KernelBenchUsageError(f"--kb-timer {self.timer}: choose events or cuda-graph")
        self.placement = self.placement or ("separate" if self.timer == "cuda-graph" else "shared")
        if self.placement not in ("separate", "shared"):
            raise KernelBenchUsageError(f"--kb-placement {self.placement}: choose separate or shared")
        if self.placement == "shared" and self.timer == "cuda-graph":
            raise KernelBenchUsageError("--kb-placement shared needs --kb-timer events (a CUDA graph keeps its own buffers)")
        if self.timer == "cuda-graph" and self.device != "cuda":
            raise KernelBenchUsageError("--kb-timer cuda-graph needs --device cuda (CPU timing has no graphs)")
        self.build_dir = self.build_dir or os.environ.get("KB_BUILD_CACHE") or str(default_cache_dir() / "builds")
        self.pch_dir = self.pch_dir or os.environ.get("KB_PCH_DIR") or str(default_cache_dir() / "pch")

    @property
    def device_label(self) -> str:
        return f"cuda:{self.device_index}" if self.device == "cuda" else "cpu"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def public(self) -> dict[str, Any]:
        """The settings without this machine's folders: what reports and run records keep."""
        return {k: v for k, v in self.to_dict().items() if k not in MACHINE_FOLDERS}
