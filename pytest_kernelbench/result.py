"""Plain-data results: what one evaluation found, with JSON in and out."""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any

from .extra import Extra
from .outcome import Outcome, reward


def is_noisy(result: Any) -> bool:
    """Whether a correct result's speedup is noisy: the judge's ``speedup_noisy`` (its 95% interval reaches 1.0 or is
    too wide to mean anything, :func:`pytest_kernelbench.judge.stats.speedup_interval`). Takes bare records too."""
    return bool(getattr(result, "correct", False) and _fact(result, "speedup_noisy"))


def _fact(result: Any, name: str) -> Any:
    """A field of a result's extra: a typed :class:`Extra`, or a bare record's dict."""
    extra = getattr(result, "extra", None)
    return extra.get(name) if isinstance(extra, dict) else getattr(extra, name, None)


def claimable_speedup(result: Any) -> float:
    """The speedup a claim of "faster than p" may rest on (fast_p, perf@p): a noisy one's interval's low end, else the
    speedup (0 without one)."""
    speedup = getattr(result, "speedup", None) or 0.0
    if is_noisy(result):
        low = (_fact(result, "speedup_interval") or [0.0])[0]
        return min(speedup, low or 0.0)
    return speedup


def rewarded_speedup(result: Any) -> float | None:
    """The speedup a reward takes (:func:`pytest_kernelbench.outcome.reward`): the printed one, except that a noisy gain
    counts as none (1.0). Noise the judge cannot tell from a gain pays nothing, as a gain its clock cannot resolve is not
    printed: on a loaded CPU a candidate's own helper processes widened the noise of a copy of the reference to 1.47x
    (docs/timing-fidelity.md, "A verdict on a busy machine"). A noisy loss counts in full."""
    speedup = getattr(result, "speedup", None)
    if speedup is not None and speedup > 1.0 and is_noisy(result):
        return 1.0
    return speedup


@dataclasses.dataclass
class TimingStats:
    """Summary of repeated timings, in milliseconds, with the raw samples kept."""

    median: float
    mean: float
    std: float
    min: float
    max: float
    iqr: float
    rounds: int
    samples: list[float]

    @classmethod
    def from_samples(cls, samples_ms: list[float]) -> TimingStats:
        if not samples_ms:
            raise ValueError("no timing samples")
        ordered = sorted(samples_ms)
        if len(ordered) >= 4:
            q = statistics.quantiles(ordered, n=4)
            iqr = q[2] - q[0]
        else:
            iqr = ordered[-1] - ordered[0]
        return cls(
            median=statistics.median(ordered),
            mean=statistics.fmean(ordered),
            std=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
            min=ordered[0],
            max=ordered[-1],
            iqr=iqr,
            rounds=len(ordered),
            samples=list(samples_ms),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> TimingStats | None:
        return cls(**data) if data else None


@dataclasses.dataclass
class EvalResult:
    """Everything a report needs about one (problem, candidate) evaluation."""

    problem: str  # the item id, e.g. "L1-19_ReLU"
    level: str
    problem_id: int
    outcome: Outcome
    message: str = ""
    stage: str = ""  # the stage that decided the outcome
    speedup: float | None = None
    ref: TimingStats | None = None
    new: TimingStats | None = None
    max_abs_diff: float | None = None
    trials: int = 0
    device: str = ""
    device_name: str = ""
    mode: str = "eager"
    ref_mode: str = ""  # "eval" or "train": the mode both models were put in after construction
    # the outputs' tolerance: {"name": "kernelbench", "float32": [atol, rtol], ..., "other": [...]} (tolerance.py)
    tolerance: dict[str, Any] = dataclasses.field(default_factory=dict)
    source_hash: str = ""
    candidate_path: str = ""
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    stage_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    wall_seconds: float = 0.0
    extra: Extra = dataclasses.field(default_factory=Extra)  # how it was judged (typed; a dict is taken too)

    def __post_init__(self) -> None:
        self.extra = Extra.from_dict(self.extra)

    @property
    def reward(self) -> float | None:
        return reward(self.outcome, rewarded_speedup(self))

    @property
    def correct(self) -> bool:
        return self.outcome is Outcome.CORRECT

    @property
    def ref_ms(self) -> float | None:
        return self.ref.median if self.ref else None

    @property
    def new_ms(self) -> float | None:
        return self.new.median if self.new else None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update(ref=self.ref and self.ref.to_dict(), new=self.new and self.new.to_dict(), extra=self.extra.to_dict())
        data["versions"], data["stage_seconds"] = dict(self.versions), dict(self.stage_seconds)
        data["outcome"] = self.outcome.value
        data["reward"] = self.reward
        data["ref_ms"] = self.ref_ms
        data["new_ms"] = self.new_ms
        for key in ("speedup", "max_abs_diff"):
            value = data[key]
            if isinstance(value, float) and not math.isfinite(value):
                data[key] = None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in fields}
        kwargs["outcome"] = Outcome(kwargs["outcome"])
        kwargs["ref"] = TimingStats.from_dict(kwargs.get("ref"))
        kwargs["new"] = TimingStats.from_dict(kwargs.get("new"))
        return cls(**kwargs)
