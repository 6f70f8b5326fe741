"""Where one evaluation's time goes: the supervisor and the reference's runner under cProfile.

    python benchmarks/call_overhead.py --device cuda --out OUTDIR [--problem problems/mini/1_LeakyReluScale.py]

Judges the problem's reference against itself (a plain PyTorch ``ModelNew``: no build), with
``KB_PROFILE_DIR`` set so that the supervisor and the reference's runner write cProfile stats.
Prints the stage times, the per-call wall overhead of each side, and the top functions of each
profile by cumulative and own time; writes OUTDIR/call-overhead.txt.
"""

from __future__ import annotations

import argparse
import io
import pstats
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_kernelbench.candidates import Candidate  # noqa: E402
from pytest_kernelbench.config import EvalConfig  # noqa: E402
from pytest_kernelbench.judge.controller import evaluate  # noqa: E402
from pytest_kernelbench.judge.runner import PROFILE_ENV  # noqa: E402
from pytest_kernelbench.problems import problem_from_path  # noqa: E402


def self_candidate(source: str) -> str:
    return source + "\n\nModelNew = Model\n"  # the reference itself (super(Model, self) still resolves)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--problem", default=str(REPO / "problems" / "mini" / "1_LeakyReluScale.py"))
    ap.add_argument("--out", default="call-overhead")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prof = Path(tempfile.mkdtemp(prefix="kbprof-"))
    import os

    os.environ[PROFILE_ENV] = str(prof)
    problem = problem_from_path(Path(args.problem))
    config = EvalConfig(device=args.device, lock_dir=str(prof / "locks"), build_dir=str(prof / "build"))
    result = evaluate(problem, Candidate(self_candidate(problem.source), "", "self"), config)
    lines = [
        f"outcome {result.outcome.value} speedup {result.speedup} message {result.message[:300]!r}",
        f"stage seconds {result.stage_seconds}",
        f"wall check {result.extra.wall_check}",
        f"checked calls {result.extra.checked_calls}",
    ]
    for path in sorted(prof.glob("*.prof")):
        for key in ("cumulative", "tottime"):
            buf = io.StringIO()
            try:
                pstats.Stats(str(path), stream=buf).sort_stats(key).print_stats(args.top)
            except TypeError:  # a process that profiled nothing (pstats refuses empty stats)
                buf.write("(empty profile)\n")
            lines += [f"===== {path.name} by {key}", buf.getvalue()]
    text = "\n".join(lines)
    (out / "call-overhead.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
