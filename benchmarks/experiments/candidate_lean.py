"""Where the candidate side's systematic excess comes from. A problem's reference is judged against itself; the wall
clock's check reads each side's wall beyond its claims, and the candidate's is longer by a steady amount (60-125 us a
call at the median over level 1 on the H200 x2 machine, 2026-11-30; 14-20 us a call in rounds of 16 for
`problems/mini/1_LeakyReluScale.py`, enough there to print the clock's 0.83 for a gain of 2%). Each condition takes one
difference between the two runners away: the candidate's cgroup (frozen between requests; without it, SIGSTOP), its
bwrap sandbox, the one timing core both sides share. Conditions alternate, each judgment in a process of its own (the
judge reads these settings when its fork server starts).

    python benchmarks/experiments/candidate_lean.py --device cuda --problem problems/mini/1_LeakyReluScale.py \
        --repeats 3 --out OUT.json [--timer auto|events|round]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

CONDITIONS = {  # name: (environment, --kb-sandbox)
    "default": ({}, "auto"),
    "no-cgroup": ({"KB_CGROUPS": "0"}, "auto"),
    "no-bwrap": ({"KB_CGROUPS": "0"}, "off"),
    "no-timing-core": ({"KB_TIMING_CORE": "0"}, "auto"),
    "reference-cgroup": ({"KB_REFERENCE_CGROUP": "1"}, "auto"),  # the reference's runner in a cgroup too
    "signal-freeze": ({"KB_FREEZE": "signal"}, "auto"),  # the cgroup kept, the candidate stopped by signals, not its freezer
    # both sides alike: each in a cgroup, each stopped by signals between requests (the reference is otherwise never stopped)
    "both-stopped": ({"KB_FREEZE": "signal", "KB_FREEZE_REFERENCE": "1", "KB_REFERENCE_CGROUP": "1"}, "auto"),
}
WALL = ("excess_ms", "bound_ms", "ref_overhead_ms", "event_speedup", "wall_speedup", "capped")
PARTS = ("time/call.wake", "time/call.inputs", "time/call.request", "time/call.seal", "time/call.drain", "time/call.stop")


def one(args: argparse.Namespace) -> dict:
    """One self-judgment here (the child's side)."""
    from pytest_kernelbench.candidates import baseline_candidate
    from pytest_kernelbench.config import EvalConfig
    from pytest_kernelbench.judge.controller import evaluate
    from pytest_kernelbench.problems import problem_from_path

    problem = problem_from_path(Path(args.problem))
    cfg = EvalConfig(device=args.device, timeout=300, trials=1, process_pairs=1, timer=args.timer, sandbox=CONDITIONS[args.one][1])
    result = evaluate(problem, baseline_candidate(problem), cfg)
    check, split = result.extra.wall_check or {}, result.extra.split_s or {}
    return {"condition": args.one, "outcome": result.outcome.value, "speedup": result.speedup, "timer": result.extra.timer,
            "calls_per_round": result.extra.calls_per_round, "sandbox": result.extra.sandbox, "timing_core": result.extra.timing_core,
            **{k: check.get(k) for k in WALL}, **{k: split.get(k) for k in PARTS}}  # fmt: skip


def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    for repeat in range(args.repeats):
        for name, (env, _) in CONDITIONS.items():
            if args.conditions and name not in args.conditions.split(","):
                continue
            argv = [sys.executable, __file__, "--one", name, "--device", args.device, "--problem", args.problem, "--timer", args.timer]
            done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
            line = done.stdout.strip().splitlines()[-1:] or [""]
            try:
                row = json.loads(line[0])
            except json.JSONDecodeError:
                row = {"condition": name, "error": (done.stderr or done.stdout)[-500:]}
            row["repeat"] = repeat
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def summary(rows: list[dict]) -> None:
    for name in CONDITIONS:
        excess = [r["excess_ms"] * 1e3 for r in rows if r.get("condition") == name and r.get("excess_ms") is not None]
        over = [r["ref_overhead_ms"] * 1e3 for r in rows if r.get("condition") == name and r.get("ref_overhead_ms") is not None]
        if excess:
            print(f"{name:>15}: excess {statistics.median(excess):7.1f} us a call at the median {sorted(round(e, 1) for e in excess)}, "
                  f"reference overhead {statistics.median(over):7.1f} us")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--problem", default=str(REPO / "problems" / "mini" / "1_LeakyReluScale.py"))
    parser.add_argument("--timer", default="auto")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conditions", default="", help="a comma-separated subset of the conditions (default: all)")
    parser.add_argument("--out")
    parser.add_argument("--one", choices=list(CONDITIONS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args)))
        return
    rows = run(args)
    summary(rows)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
