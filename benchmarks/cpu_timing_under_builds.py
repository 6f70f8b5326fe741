"""CPU timing while the build pool compiles (issue 15): the bundled references judged against
themselves, with C++ candidates building at the same time, builds paused during timed phases or not.

    python benchmarks/cpu_timing_under_builds.py --builds 4 --out docs/data/cpu-timing-under-builds.json

Both conditions run the same judgements (``--solutions baseline`` on the bundled mini problems) while a
build pool compiles ``--builds`` distinct C++ candidates. "paused": the pool shares the judge's lock
folder, so a build stops while a CPU timing phase runs. "not paused": the pool gets a lock folder of
its own, so it never sees the marker (the behaviour before the pause). "idle" (``--conditions idle``):
no pool at all, the machine's own noise. A self-speedup far from 1.00 is timing noise that the
machine's other work put into one side. ``--solutions solutions/mini`` judges the committed CPU candidates instead
(real gains and losses: what a timing rule costs them).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from throughput import variants  # noqa: E402

from pytest_kernelbench.build.pool import Prebuilder  # noqa: E402
from pytest_kernelbench.candidates import find_candidate  # noqa: E402
from pytest_kernelbench.config import EvalConfig  # noqa: E402
from pytest_kernelbench.judge.controller import evaluate  # noqa: E402
from pytest_kernelbench.problems import problem_from_path  # noqa: E402

PROBLEM = REPO / "problems" / "mini" / "1_LeakyReluScale.py"
PROBLEMS = sorted((REPO / "problems" / "mini").glob("*.py"))


@functools.cache
def _idle_builds() -> Path:
    """The build folder the "idle" conditions share (no pool there: ``--solutions DIR`` builds its candidates once)."""
    return Path(tempfile.mkdtemp(prefix="kb-cpu-timing-builds-"))


def _rounded(values: list[float]) -> list[float]:
    return [float(f"{v:.4g}") for v in values]


def condition(paused: bool | None, builds: int, jobs: int, pairs: int = 0, timing: dict | None = None, solutions: str = "baseline") -> dict:
    """paused None: no pool at all (the machine's own noise). ``pairs``: the judge's --process-pairs; ``timing``: other
    EvalConfig settings (max_reps, max_time; unset: the judge's defaults); ``solutions``: what is judged, the references
    against themselves ("baseline") or a solutions folder's CPU candidates (real gains and losses)."""
    root = Path(tempfile.mkdtemp(prefix="kb-cpu-timing-"))
    settings = {"process_pairs": pairs, **(timing or {})}
    builds_dir = root / "builds" if paused is not None else _idle_builds()
    judge = EvalConfig(device="cpu", lock_dir=str(root / "locks"), build_dir=str(builds_dir), pch_dir="off", **settings)
    pool_locks = judge.lock_dir if paused else str(root / "pool-locks")
    pool = Prebuilder(EvalConfig(device="cpu", lock_dir=pool_locks, build_dir=str(builds_dir), pch_dir="off"), jobs)
    for candidate in variants("cpu", builds) if paused is not None else []:
        pool.submit(problem_from_path(PROBLEM), candidate)
    speedups: dict[str, float | None] = {}
    noisy: dict[str, bool] = {}  # the judge's own verdict: its interval reaches 1.0 or is too wide (never printed as a gain)
    calls: dict[str, int] = {}  # timed calls of each side, every pair's
    pair_runs: dict[str, list] = {}  # where the timing ran in more than one pair of runners: each pair's own figures
    samples: dict[str, dict] = {}  # each side's samples in the order taken, every pair's in turn (offline estimators)
    started = time.monotonic()
    for path in PROBLEMS:
        if paused is None or any(not f.done() for f in pool.futures.values()):
            problem = problem_from_path(path)
            result = evaluate(problem, find_candidate(solutions, problem, "cpu"), judge)
            speedups[problem.id] = result.speedup
            noisy[problem.id] = bool(result.extra.speedup_noisy)
            calls[problem.id] = result.extra.timed_calls or 0
            if result.ref and result.new:
                samples[problem.id] = {"ref": _rounded(result.ref.samples), "new": _rounded(result.new.samples)}
            if result.extra.process_pairs:
                pair_runs[problem.id] = result.extra.process_pairs
    pool.close(wait=False)
    values = [s for s in speedups.values() if s]
    outside = [k for k, s in speedups.items() if s and abs(s - 1) > 0.05]
    return {"paused": paused, "judged_while_building": len(speedups), "wall_s": round(time.monotonic() - started, 1),
            "speedups": {k: (round(v, 3) if v else None) for k, v in speedups.items()}, "noisy": noisy,
            "timed_calls": calls, "process_pairs": pair_runs, "samples": samples,
            "min": round(min(values), 3) if values else None, "max": round(max(values), 3) if values else None,
            "within_5pct": sum(1 for s in values if abs(s - 1) <= 0.05),
            "outside_5pct_not_noisy": [k for k in outside if not noisy[k]],
            "median": round(statistics.median(values), 3) if values else None}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="cpu-timing-under-builds.json")
    ap.add_argument("--conditions", default="running,paused",
                    help="running (builds keep running), paused (builds stop in timed phases), idle (no builds at all)")
    ap.add_argument("--process-pairs", type=int, default=0, help="the judge's --process-pairs (0: automatic)")
    ap.add_argument("--max-reps", type=int, default=0, help="EvalConfig.max_reps: timed calls a side at most (0: the judge's default)")
    ap.add_argument("--max-time", type=float, default=0.0, help="EvalConfig.max_time: timing seconds a pair (0: the judge's default)")
    ap.add_argument("--solutions", default="baseline",
                    help="baseline (each reference against itself) or a solutions folder (e.g. solutions/mini: real CPU candidates)")
    args = ap.parse_args()
    missing = [path.stem for path in PROBLEMS if find_candidate(args.solutions, problem_from_path(path), "cpu") is None]
    if missing:
        sys.exit(f"error: no CPU candidate for {', '.join(missing)} in {args.solutions}: pass --solutions baseline or a folder with one")
    timing = {"max_reps": args.max_reps, "max_time": args.max_time}
    rows = []
    for paused in [{"running": False, "paused": True, "idle": None}[c] for c in args.conditions.split(",")]:
        rows.append(condition(paused, args.builds, args.jobs, args.process_pairs, timing, args.solutions))
        print(json.dumps(rows[-1]), flush=True)
        stamp = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
        Path(args.out).write_text(json.dumps({"date": stamp, "args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
