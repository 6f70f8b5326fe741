"""``kbagent report``: a table and the plots of search runs (matplotlib, Agg, imported lazily).

Plots (PNG), for one run folder or a folder of them (a pytest ``--model`` run's ``--out``):

* ``speedup_per_phase.png`` - best speedup so far after each phase, one line per task;
* ``geomean_vs_phase.png`` - geometric mean over tasks of that best speedup so far;
* ``speedup_vs_calls.png`` - best speedup so far against LLM calls made (per task, and the geomean);
* ``speedup_vs_cost.png`` - best speedup so far against dollars spent, per task (when no call had a
  price, the plot says so instead of drawing every line at $0);
* ``fast_p.png`` - KernelBench's fast_p against p: the fraction of all tasks whose best correct
  candidate is more than p times as fast as the reference (fast_0: the fraction with a correct one); a
  noisy speedup counts only as far as its interval goes, as in the judge's own fast_p.

Tasks are named as pytest names their items (``L1-19_ReLU``). A task with no correct candidate yet
counts as speedup 1.0 in the geometric means (the reference itself is always available); in
per-task lines it has no point until its first correct candidate.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kbagent.runfolder import load_summary, load_tree
from pytest_kernelbench.report.text import printable
from pytest_kernelbench.result import claimable_speedup


@dataclasses.dataclass
class Run:
    path: Path
    summary: dict[str, Any]
    tree: list[dict[str, Any]]

    @property
    def task(self) -> str:
        """The task's pytest id, ``L<level>-<name>`` (``L1-19_ReLU``), as the pytest plugin names its items."""
        problem = self.summary.get("problem") or {}
        level, name = problem.get("level"), problem.get("name")
        if level not in (None, "") and name:
            return f"L{level}-{name}"
        return str(problem.get("id") or name or self.path.name)

    @property
    def best_speedup(self) -> float | None:
        """The speedup of the best correct candidate, None without one."""
        best = self.summary.get("best") or {}
        speedup = best.get("speedup")
        return float(speedup) if best.get("outcome") == "correct" and speedup is not None else None

    @property
    def best_claim(self) -> float | None:
        """What the best correct candidate's speedup may claim (fast_p): a noisy one's interval's low end
        (:func:`pytest_kernelbench.result.claimable_speedup`); None without a correct candidate."""
        best = self.summary.get("best") or {}
        if self.best_speedup is None:
            return None
        record = SimpleNamespace(correct=True, speedup=self.best_speedup,
                                 extra={k: best.get(k) for k in ("speedup_noisy", "speedup_interval")})  # fmt: skip
        return claimable_speedup(record)

    @property
    def priced(self) -> bool:
        """Whether any LLM call of the run had a price (a cost above $0)."""
        return float(self.summary.get("cost_usd") or 0.0) > 0 or any(float(n.get("cost_usd") or 0.0) > 0 for n in self.tree)

    def phase_series(self) -> list[tuple[int, float | None]]:
        return [(int(row["phase"]), row.get("best_so_far")) for row in self.summary.get("phases", [])]

    def timeline(self) -> list[tuple[int, float, float | None]]:
        """(LLM calls so far, dollars so far, best speedup so far) after each call, in reply order."""
        calls = sorted((n for n in self.tree if n.get("seq")), key=lambda n: n["seq"])
        points = []
        cost = 0.0
        best: float | None = None
        for i, node in enumerate(calls, start=1):
            cost += float(node.get("cost_usd") or 0.0)
            if node.get("outcome") == "correct" and node.get("speedup") is not None:
                best = node["speedup"] if best is None else max(best, node["speedup"])
            points.append((i, cost, best))
        return points


def load_run(path: Path) -> Run:
    return Run(Path(path), load_summary(path) or {}, load_tree(path))


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def fast_p_curve(runs: list[Run], ps: list[float] | None = None) -> list[tuple[float, float]]:
    """(p, fast_p) pairs: the fraction of all tasks whose best correct candidate's speedup is above p
    (KernelBench's fast_p; a task without a correct candidate never counts; a noisy speedup as far as its
    interval goes, :attr:`Run.best_claim`). Without ``ps``: every
    point where the curve steps (0, 1, each task's speedup) and one beyond the largest, so that a step
    plot (``where="post"``) of the pairs is the exact curve."""
    speedups = [s for s in (run.best_claim for run in runs) if s is not None]
    if ps is None:
        top = max([2.0, *(1.2 * s for s in speedups)])
        ps = sorted({0.0, 1.0, *speedups, top})
    n = len(runs)
    return [(p, sum(1 for s in speedups if s > p) / n if n else 0.0) for p in ps]


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(runs: list[Run]) -> str:
    """A fixed-width table, one row per task, and a totals line."""
    header = ("task", "outcome", "speedup", "best", "phases", "calls", "tokens", "cost $", "stop")
    rows = []
    for run in runs:
        s = run.summary
        best = s.get("best") or {}
        rows.append(
            (
                run.task,
                best.get("outcome") or ("none" if not best else "not evaluated"),
                _fmt(best.get("speedup"), ".3f"),
                best.get("node") or "-",
                str(s.get("phases_done", len(s.get("phases", [])))),
                str(s.get("llm_calls", 0)),
                str((s.get("tokens") or {}).get("total", 0)),
                _fmt(s.get("cost_usd"), ".4f"),
                str(s.get("stop_reason", "")),
            )
        )
    rows = [tuple(printable(cell) for cell in row) for row in rows]  # run folders hold what a search was sent
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    correct = [r for r in runs if (r.summary.get("best") or {}).get("outcome") == "correct"]
    speeds = [(r.summary["best"]["speedup"] if r in correct else 1.0) for r in runs]
    gm = geomean([s for s in speeds if s is not None])
    gm_correct = geomean([r.summary["best"]["speedup"] for r in correct if r.summary["best"].get("speedup") is not None])
    calls = sum(int(r.summary.get("llm_calls", 0)) for r in runs)
    cost = sum(float(r.summary.get("cost_usd") or 0.0) for r in runs)
    lines.append("")
    lines.append(
        f"{_tasks(len(runs))}, {len(correct)} correct; geomean speedup of the best candidates: {_fmt(gm_correct, '.3f')} over the "
        f"correct ones (as pytest's summary), {_fmt(gm, '.3f')} with no correct one counted as 1.0; {calls} LLM calls, ${cost:.4f}"
    )
    return "\n".join(lines)


def _tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


# A speedup axis spans this factor at least, 1.0 inside it: drawn tighter, a 2.6% move that the timing cannot resolve
# (noisy) looked like a steep rise
MIN_SPEEDUP_SPAN = 1.5


def _speedup_axis(ax: Any, values: list[float | None]) -> None:
    """The y axis of a speedup plot: every value and 1.0, and a factor of MIN_SPEEDUP_SPAN at least, about their middle."""
    found = [v for v in values if v is not None and v == v and v > 0]
    lo, hi = min([1.0, *found]), max([1.0, *found])
    if hi / lo < MIN_SPEEDUP_SPAN:
        middle = (lo * hi) ** 0.5
        lo, hi = min(lo, middle / MIN_SPEEDUP_SPAN**0.5), max(hi, middle * MIN_SPEEDUP_SPAN**0.5)
    ax.set_ylim(lo / 1.03, hi * 1.03)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _legend(ax: Any, n: int) -> None:
    if 0 < n <= 12:
        ax.legend(fontsize="small")


def _integer_ticks(ax: Any, xs: list[int]) -> None:
    """Whole-number ticks on the x axis (phases, calls): each one up to 20 of them, else as many as fit."""
    from matplotlib.ticker import MaxNLocator

    if not xs:
        return
    lo, hi = min(xs), max(xs)
    if hi - lo <= 20:
        ax.set_xticks(range(lo, hi + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    pad = 0.5 if hi == lo else 0.02 * (hi - lo)
    ax.set_xlim(lo - pad, hi + pad)


def figures(runs: list[Run]) -> dict[str, Any]:
    """The plots as matplotlib figures, by file name (the caller closes them). ImportError without matplotlib."""
    plt = _pyplot()
    figs: dict[str, Any] = {}

    # speedup per phase per task
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for run in runs:
        series = run.phase_series()
        xs = [p for p, _ in series]
        ys = [v if v is not None else float("nan") for _, v in series]
        ax.plot(xs, ys, marker="o", label=run.task)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set(xlabel="phase", ylabel="best speedup so far (x)", title="Speedup per phase, per task")
    _integer_ticks(ax, [p for run in runs for p, _ in run.phase_series()])
    _speedup_axis(ax, [v for run in runs for _, v in run.phase_series()])
    _legend(ax, len(runs))
    figs["speedup_per_phase.png"] = fig

    # geomean vs phase
    n_phases = max((len(r.phase_series()) for r in runs), default=0)
    xs, ys = [], []
    for phase in range(n_phases):
        values = []
        for run in runs:
            series = run.phase_series()
            value = series[min(phase, len(series) - 1)][1] if series else None
            values.append(value if value is not None else 1.0)
        xs.append(phase)
        ys.append(geomean(values) or 1.0)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(xs, ys, marker="o", color="tab:blue")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set(xlabel="phase", ylabel="geomean of best speedup (x)", title=f"Geomean speedup vs phase ({_tasks(len(runs))})")
    _integer_ticks(ax, xs)
    _speedup_axis(ax, ys)
    figs["geomean_vs_phase.png"] = fig

    # speedup vs LLM calls, and vs dollars
    timelines = [(run, run.timeline()) for run in runs]
    priced = any(run.priced for run in runs)
    for name, axis, xlabel in (("speedup_vs_calls.png", 0, "LLM calls"), ("speedup_vs_cost.png", 1, "dollars spent")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        title = f"Speedup vs {xlabel}"
        if axis == 1 and not priced:  # every call cost $0: a line at $0 would say nothing true
            title += ": no LLM call had a price"
            ax.text(0.5, 0.5, "no LLM call had a price (every cost is $0):\nlitellm knows no price for the model;\n"
                    "give one with --price-in/--price-out", ha="center", va="center", transform=ax.transAxes)  # fmt: skip
            ax.set(xlabel=xlabel, ylabel="best speedup so far (x)", title=title, xticks=[], yticks=[])
            figs[name] = fig
            continue
        for run, points in timelines:
            xs = [p[axis] for p in points]
            ys = [p[2] if p[2] is not None else float("nan") for p in points]
            ax.step(xs, ys, where="post", label=run.task)
        if axis == 0 and len(runs) > 1:
            longest = max((len(points) for _, points in timelines), default=0)
            gm = []
            for k in range(1, longest + 1):
                values = []
                for _, points in timelines:
                    if points:
                        value = points[min(k, len(points)) - 1][2]
                        values.append(value if value is not None else 1.0)
                gm.append(geomean(values) or 1.0)
            ax.step(range(1, longest + 1), gm, where="post", color="black", linewidth=2, label="geomean")
        if axis == 0:
            _integer_ticks(ax, [p[0] for _, points in timelines for p in points])
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set(xlabel=xlabel, ylabel="best speedup so far (x)", title=title)
        _speedup_axis(ax, [p[2] for _, points in timelines for p in points])
        _legend(ax, len(runs) + (1 if axis == 0 and len(runs) > 1 else 0))
        figs[name] = fig

    # fast_p vs p
    curve = fast_p_curve(runs)
    fast_1 = fast_p_curve(runs, [1.0])[0][1]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.step([p for p, _ in curve], [f for _, f in curve], where="post", color="tab:green", label="fast_p")
    ax.axvline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set(xlabel="p (speedup threshold, x)", ylabel="fraction of tasks faster than p", ylim=(-0.02, 1.02),
           xlim=(0, curve[-1][0]), title=f"fast_p vs p ({_tasks(len(runs))}; fast_0 {curve[0][1]:.2f}, fast_1 {fast_1:.2f})")  # fmt: skip
    figs["fast_p.png"] = fig
    return figs


def draw(runs: list[Run], out_dir: Path) -> list[Path]:
    """Write the PNGs of ``figures`` into ``out_dir``; returns their paths. ImportError without matplotlib."""
    plt = _pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures(runs).items():
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
