"""What the quiet-GPU probe (Device.probe_floor, Device.until_quiet) reads beside another process's GPU work. The judge
takes a probe's round trip on a quiet GPU as its floor (3x the median of 21 probes, at least the median + 100 us), and
calls the GPU quiet when one probe comes back within it. This measures, on one GPU, the probes of this process:

* quiet;
* beside another process's single long kernel (``torch.cuda._sleep``: one block, the rest of the GPU idle), as a
  candidate stepped aside in the middle of a long call leaves it;
* beside another process's stream of short matmuls (a candidate's trials in a shared phase);

and for each, the floor the judge would compute there, and the share of probes within the quiet floor (a busy GPU
taken for quiet).

    python benchmarks/experiments/probe_beside_kernel.py --seconds 6 --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from pytest_kernelbench.judge.supervisor.plan import quiet_floor  # noqa: E402

BUSY = {
    "long_kernel": (
        "import torch, time\ntorch.cuda.init()\nprint('go', flush=True)\ntorch.cuda._sleep(int({cycles}))\ntorch.cuda.synchronize()\n"
    ),
    "matmuls": (
        "import torch, time\nx = torch.randn(4096, 4096, device='cuda')\ntorch.cuda.synchronize()\nprint('go', flush=True)\n"
        "end = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    y = x @ x\n    torch.cuda.synchronize()\n"
    ),
}


def probes(buf: torch.Tensor, count: int) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        buf.add_(1)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def floor_us(times: list[float]) -> float:
    """Device.probe_floor's rule (plan.quiet_floor), uncapped, on the first 21 probes (us)."""
    return quiet_floor([t * 1e-6 for t in times[:21]], cap=math.inf) * 1e6


def describe(times: list[float], quiet_floor: float) -> dict:
    ordered = sorted(times)
    return {"probes": len(times), "min_us": round(ordered[0], 1), "median_us": round(statistics.median(ordered), 1),
            "p90_us": round(ordered[int(0.9 * (len(ordered) - 1))], 1), "max_us": round(ordered[-1], 1),
            "floor_here_us": round(floor_us(times), 1),
            "within_quiet_floor": round(sum(t <= quiet_floor for t in times) / len(times), 3)}  # fmt: skip


def beside(kind: str, seconds: float, buf: torch.Tensor, quiet_floor: float) -> dict:
    clock_khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 1_980_000
    script = BUSY[kind].format(cycles=clock_khz * 1e3 * seconds, seconds=seconds)
    other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "go"
        time.sleep(0.5)
        times, end = [], time.monotonic() + seconds * 0.6
        while time.monotonic() < end:
            times += probes(buf, 20)
            time.sleep(0.01)
    finally:
        other.wait(seconds * 4 + 60)
    return {"kind": kind, **describe(times, quiet_floor)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--out")
    args = parser.parse_args()
    buf = torch.zeros(1, device="cuda")
    probes(buf, 50)
    quiet = probes(buf, 400)
    quiet_floor = floor_us(quiet)
    rows = [{"kind": "quiet", **describe(quiet, quiet_floor)}]
    rows += [beside(kind, args.seconds, buf, quiet_floor) for kind in BUSY]
    rows.append({"kind": "quiet_after", **describe(probes(buf, 400), quiet_floor)})
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
