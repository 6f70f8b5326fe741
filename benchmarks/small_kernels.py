"""Small kernels resolved (issue 48): for honest candidates from a few microseconds a call up, is the printed speedup
within 5% of the event speedup (the runners' own claims, which the supervisor's clock vouches for)?

    TORCH_CUDA_ARCH_LIST=9.0 python benchmarks/small_kernels.py --out OUT/small-kernels.json

One problem, ``y = x * 2 + 1`` (PyTorch: two elementwise kernels), at sizes from 2**12 to 2**26 float32 values; one
honest candidate, a fused CUDA kernel built once with ``load_inline`` (one read and one write, about twice as fast
where memory binds, one launch instead of two where launches do). Each size is judged with the judge's defaults
(timing rounds of several calls where a call is small); the table gives per size the reference's and the candidate's
time per call, the event speedup, the printed speedup, whether it was capped, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_kernelbench.candidates import Candidate  # noqa: E402
from pytest_kernelbench.config import TIMERS, EvalConfig  # noqa: E402
from pytest_kernelbench.judge.controller import evaluate  # noqa: E402
from pytest_kernelbench.problems import Problem  # noqa: E402

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(SIZE)]


def get_init_inputs():
    return []
"""

FUSED = r"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda = '''
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void scale_shift(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) y[i] = fmaf(x[i], 2.0f, 1.0f);
}

torch::Tensor fused(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    if (blocks > 65535L * 8) blocks = 65535L * 8;
    scale_shift<<<(unsigned)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
'''

_ext = load_inline("kb_small_scale_shift", cpp_sources="torch::Tensor fused(torch::Tensor x);", cuda_sources=_cuda,
                   functions=["fused"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.fused(x.contiguous())
"""

# The control: the reference's own code as the candidate, whose wall-clock overhead should be the reference's.
SAME = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0
"""

SIZES = [2**k for k in range(12, 27, 2)]
CANDIDATES = {"fused": FUSED, "same": SAME}


def judge(size: int, build_dir: str, name: str = "fused", sandbox: str = "auto", timer: str = EvalConfig.timer) -> dict:
    problem = Problem("mini", 90, f"90_ScaleShift_{size}", PROBLEM.replace("SIZE", str(size)), "benchmarks/small_kernels.py")
    cfg = EvalConfig(device="cuda", timeout=600, build_dir=build_dir, sandbox=sandbox, timer=timer)
    result = evaluate(problem, Candidate(CANDIDATES[name], "", name), cfg)
    wall = result.extra.wall_check or {}
    event = wall.get("event_speedup")
    parts = {k: v for k, v in (result.extra.split_s or {}).items() if k.startswith("time")}
    row = {"size": size, "candidate": name, "sandbox": sandbox, "timer_asked": timer, "outcome": result.outcome.value,
           "ref_us": _us(result.ref_ms), "new_us": _us(result.new_ms),
           "event_speedup": event, "printed_speedup": result.speedup, "capped": bool(result.extra.speedup_capped),
           "noisy": bool(result.extra.speedup_noisy), "calls_per_round": result.extra.calls_per_round,
           "timer": result.extra.timer, "message": result.message[:300], "wall_check": wall,
           "timed_calls": result.extra.timed_calls, "time_split_s": parts}  # fmt: skip
    if event and result.speedup:
        row["printed_over_event"] = round(result.speedup / event, 4)
    return row


def _us(ms: float | None) -> float | None:
    return None if ms is None else round(ms * 1e3, 2)


def table(rows: list[dict]) -> str:
    lines = ["| values | candidate | outcome | ref us | new us | event speedup | printed | capped | printed / event | within 5% "
             "| excess us | bound us |", "| ---: | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: |"]  # fmt: skip
    for r in rows:
        ratio = r.get("printed_over_event")
        within = "-" if ratio is None else ("yes" if abs(ratio - 1) <= 0.05 else "no")
        event = "-" if r["event_speedup"] is None else f"{r['event_speedup']:.3f}"
        printed = "-" if r["printed_speedup"] is None else f"{r['printed_speedup']:.3f}"
        wall = r.get("wall_check") or {}
        excess, bound = (_us(wall.get(k)) if wall.get(k) is not None else "-" for k in ("excess_ms", "bound_ms"))
        who = r.get("candidate", "fused") + ("" if r.get("sandbox", "auto") == "auto" else f" (sandbox {r['sandbox']})")
        who += f", timer {r['timer_asked']}" if r.get("timer_asked", EvalConfig.timer) != EvalConfig.timer else ""
        lines.append(f"| {r['size']} | {who} | {r['outcome']} | {r['ref_us']} | {r['new_us']} | {event} | {printed} | "
                     f"{r['capped']} | {ratio if ratio is not None else '-'} | {within} | {excess} | {bound} |")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON rows; the Markdown table beside it (.md)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="float32 values per input, comma-separated")
    parser.add_argument("--candidates", default="fused", help="comma-separated: fused (the honest fused kernel), same "
                        "(the reference's own code, the control)")
    parser.add_argument("--sandbox", default="auto", choices=["auto", "off"], help="the candidate's runner (--kb-sandbox)")
    parser.add_argument("--timer", default=EvalConfig.timer, choices=TIMERS[:3], help="--kb-timer (round: a round's calls together)")
    args = parser.parse_args()
    names = args.candidates.split(",")
    if unknown := sorted(set(names) - set(CANDIDATES)):
        parser.error(f"--candidates {','.join(unknown)}: choose from {', '.join(CANDIDATES)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kb-small-") as build_dir:  # one build, then found in the cache
        for size in (int(s) for s in args.sizes.split(",")):
            for name in names:
                rows.append(judge(size, build_dir, name, args.sandbox, args.timer))
                print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    args.out.with_suffix(".md").write_text(table(rows) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
