"""How long stopping a candidate's runner takes (its cgroup frozen) on a GPU that other judges use: one judge alone,
then JUDGES at once on one lock folder (as a machine's judges are), then JUDGES at once each on its own lock folder (as
tests/test_gpu.py's parallel tests are: their exclusive phases overlap). Prints each judge's outcome, wall, and the
split_s parts of stopping (freeze, freeze.slow: stops over 0.25 s; time/call.stop: the stop and the drain after it).

    python benchmarks/experiments/freeze_contention.py --judges 4 --out OUT.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pytest_kernelbench.candidates import Candidate  # noqa: E402
from pytest_kernelbench.config import EvalConfig  # noqa: E402
from pytest_kernelbench.judge.controller import evaluate  # noqa: E402
from pytest_kernelbench.problems import problem_from_path  # noqa: E402

PROBLEM = REPO / "tests" / "data" / "timing" / "level9" / "2_BigMatmul.py"
HONEST = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n\n" \
         "    def forward(self, a, b):\n        return a @ b\n"
PARTS = ("freeze", "freeze.slow", "time/call.stop", "time/call.drain", "time/call.request")


def judge(lock_dir: str) -> dict:
    started = time.monotonic()
    result = evaluate(problem_from_path(PROBLEM), Candidate(HONEST, "", "honest"),
                      EvalConfig(device="cuda", timeout=300, lock_dir=lock_dir))
    split = result.extra.split_s or {}
    return {"outcome": result.outcome.value, "speedup": result.speedup, "wall_s": round(time.monotonic() - started, 1),
            "capped": result.extra.speedup_capped, **{k: split.get(k, 0.0) for k in PARTS}, "message": result.message[:300]}


def scene(name: str, judges: int, shared: bool) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [str(Path(tmp) / ("locks" if shared else f"locks-{i}")) for i in range(judges)]
        with concurrent.futures.ThreadPoolExecutor(judges) as pool:
            rows = list(pool.map(judge, dirs))
    for row in rows:
        print(name, json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=4)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    found = {"alone": scene("alone", 1, True), "one lock folder": scene("one lock folder", args.judges, True),
             "a lock folder each": scene("a lock folder each", args.judges, False)}
    Path(args.out).write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
