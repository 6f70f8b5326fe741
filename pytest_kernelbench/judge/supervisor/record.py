"""What one evaluation found and where it stands: the stage clock the controller reads (:class:`Status`), the findings
written to ``result.json`` at the end (:class:`Findings`), and the :class:`Context` every part of the supervisor shares
(the assignment, the device, the clock, the findings, the problem's footprint).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ...config import EvalConfig
from ...extra import Extra
from .. import gpus
from .. import protocol as p
from ..assignment import Assignment
from ..stages import STAGES, TIMELINE_ENTRIES, charged
from .plan import Footprint

_perf_counter = time.perf_counter


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
        self.timeline: list[list[Any]] = []  # [stage, seconds since the start] at each entry (extra.stages_at)
        self.charged_apart = 0.0  # seconds charged outside the charged stages (charge)

    def enter(self, stage: str) -> None:
        assert stage in STAGES, f"stage {stage!r} is not in judge/stages.py"
        now = _perf_counter()
        self.stage_seconds[self.stage] = self.stage_seconds.get(self.stage, 0.0) + now - self._entered
        self.stage, self._entered = stage, now
        if len(self.timeline) < TIMELINE_ENTRIES:
            self.timeline.append([stage, round(now - self._t0, 3)])
        self._fh.write(f"{stage} {now - self._t0:.3f}\n")
        self._fh.flush()

    def charged(self) -> float:
        """The candidate's seconds so far (:data:`stages.CHARGED`, and what :meth:`charge` added)."""
        spent = sum(v for k, v in self.stage_seconds.items() if charged(k)) + self.charged_apart
        return spent + (_perf_counter() - self._entered if charged(self.stage) else 0.0)

    def charge(self, seconds: float) -> None:
        """Seconds of an uncharged stage that were the candidate's after all (its kernels, running while it was
        stopped: Runners.step_aside); its time limit counts them."""
        self.charged_apart += seconds


class Findings:
    """What the evaluation found so far: the top-level fields of ``result.json`` (outcome, samples, speedup, ...) and
    its ``extra`` (how it was judged), with the tallies of seconds that benchmarks/throughput.py sums."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.extra = Extra()

    def to_dict(self) -> dict[str, Any]:
        return {**self.data, "extra": self.extra.to_dict()}

    def update(self, **fields: Any) -> None:
        self.data.update(fields)

    @contextlib.contextmanager
    def split(self, part: str) -> Iterator[None]:
        """Seconds spent in one part of a phase (``extra.split_s``): ``time.batch`` is a part of the time phase
        (``time.second_batch`` its second batch, where one is timed), and a name with a '/' a detail within the parts
        (``time/call.seal``: sealing outputs, wherever in that phase, either batch included)."""
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
        """The seconds since ``since`` added to ``extra[key][name]``: ``lock_held_s`` (the device lock held, per
        phase) and ``split_s`` (parts of the exclusive phases)."""
        self.tally(key, name, _perf_counter() - since)

    def tally(self, key: str, name: str, seconds: float) -> None:
        self.extra.tally(key, name, seconds)

    def count(self, key: str, by: int = 1) -> None:
        self.extra.count(key, by)


@dataclasses.dataclass
class Context:
    """What every part of one evaluation shares."""

    spec: Assignment
    status: Status
    found: Findings = dataclasses.field(default_factory=Findings)

    def __post_init__(self) -> None:
        self.cfg: EvalConfig = self.spec.config
        self.work = Path(self.spec.work)
        self.pin = _pin(self.cfg)
        self.found.extra.gpu_pin = self.pin.label or None
        self.device = torch.device("cuda", self.pin.index) if self.cfg.device == "cuda" else torch.device("cpu")
        self.on_gpu = self.device.type == "cuda"
        self.source = Path(self.spec.candidate_path).read_text()
        self.cpu_check = self.cfg.device == "cpu-check"  # no GPU: CUDA candidates compiled only, others run on the CPU, untimed
        self.fp = Footprint(on_gpu=self.on_gpu)
        self.problem: Any = None  # the problem's module, loaded here (trusted): it makes every input
        self.out_spec: Any = None  # the reference output's structure (its first call)

    @property
    def threads(self) -> int:
        """Intra-op threads of both runners. A CPU judge times with one each (``KB_CPU_THREADS`` to change it): with two,
        a busy machine (a CPU hog per core) split the same code's speed in two, 10 ms or 50 ms a call by how the kernel
        placed a process's OpenMP threads, and a reference judged against itself printed 0.9-4.9x; with one, 0.88-1.00."""
        if self.device.type == "cpu" and not self.cpu_check:
            value = os.environ.get("KB_CPU_THREADS", "1")
            return int(value) if value.isdigit() and int(value) > 0 else 1
        return torch.get_num_threads()

    def remaining(self) -> float:
        """The candidate's time left (``--timeout`` less its charged stages)."""
        return self.cfg.timeout - self.status.charged()

    def sync(self) -> None:
        if self.on_gpu:
            torch.cuda.synchronize(self.device)


def _pin(cfg: EvalConfig) -> gpus.Pin:
    """On a GPU, this process and its runners see the judged GPU alone (judge/gpus.py), as cuda:0, from before CUDA
    starts here."""
    if cfg.device != "cuda" or torch.cuda.is_initialized():
        return gpus.Pin(cfg.device_index)
    return gpus.pin(cfg.device_index)


class Record:
    """One side's calls of a round as the supervisor saw them: a reply and its seals per call (none for a call not
    checked), and the wall time of all of them together."""

    def __init__(self, replies: list[p.Called], wall_ms: float, seals: list[list[torch.Tensor]]):
        self.replies, self.wall_ms, self.seals = replies, wall_ms, seals
