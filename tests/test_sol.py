"""Speed of light (issue 48): a GPU result carries the problem's bound on that GPU and the share of it reached."""

from __future__ import annotations

import pytest

from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.extra import Extra
from pytest_kernelbench.judge import sol
from pytest_kernelbench.judge.footprint import Footprint, measure_here
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.report.summary import summarize
from pytest_kernelbench.report.terminal import render_summary
from pytest_kernelbench.result import EvalResult

LINEAR = """
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(1024, 512)
    def forward(self, x):
        return torch.relu(self.l(x))
def get_inputs():
    return [torch.randn(256, 1024, dtype=DTYPE)]
def get_init_inputs():
    return []
"""
CONV = """
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 16, 3)
    def forward(self, x):
        return self.c(x)
def get_inputs():
    return [torch.randn(8, 3, 34, 34)]
def get_init_inputs():
    return []
"""


def test_the_footprint_child_counts_the_references_flops_and_its_dtype_on_the_meta_device():
    linear = measure_here(LINEAR.replace("DTYPE", "torch.float32"))
    assert linear.flops == 2 * 256 * 1024 * 512 and linear.dtype == "float32"  # the matmul; the bias and relu count none
    assert (linear.inputs, linear.outputs, linear.params) == (256 * 1024 * 4, 256 * 512 * 4, (1024 * 512 + 512) * 4)
    conv = measure_here(CONV)
    assert conv.flops == 2 * (8 * 16 * 32 * 32) * (3 * 3 * 3)  # each output value: 27 multiply-adds
    half = measure_here(LINEAR.replace("DTYPE", "torch.float16").replace("nn.Linear(1024, 512)", "nn.Linear(8, 8)")
                        .replace("256, 1024", "4096, 8"))  # fmt: skip
    assert half.dtype == "float16"  # the largest floating-point tensor's


def test_peaks_come_from_the_table_by_the_name_cuda_reports_or_from_kb_peak():
    h200 = sol.peak_for("NVIDIA H200", "float32", env={})
    assert (h200.gbps, h200.tflops, h200.source) == (4800, 67, "table: H200")
    assert sol.peak_for("NVIDIA H100 PCIe", "bfloat16", env={}).gbps == 2000  # not the SXM part's 3350
    assert sol.peak_for("NVIDIA H100 80GB HBM3", "float32", env={}).gbps == 3350
    unknown = sol.peak_for("NVIDIA GeForce GTX 1080", "float32", env={})
    assert unknown == "no peak known for NVIDIA GeForce GTX 1080; set KB_PEAK=GBPS,TFLOPS"
    assert sol.peak_for("NVIDIA H200", "int8", env={}) == "no int8 peak for NVIDIA H200; set KB_PEAK=GBPS,TFLOPS"
    assert sol.peak_for("anything", "float32", env={"KB_PEAK": "1000,50"}) == sol.Peak(1000.0, 50.0, "KB_PEAK")
    for bad in ("fast", "1000", "0,50", "1000,-1", "inf,5"):
        with pytest.raises(KernelBenchUsageError, match=f"KB_PEAK='{bad}': give GBPS,TFLOPS, two positive numbers"):
            sol.peak_for("anything", "float32", env={"KB_PEAK": bad})


def test_a_malformed_kb_peak_is_a_usage_error_before_any_gpu_work(monkeypatch):
    monkeypatch.setenv("KB_PEAK", "fast")
    with pytest.raises(KernelBenchUsageError, match="KB_PEAK='fast': give GBPS,TFLOPS"):
        EvalConfig(device="cuda")
    EvalConfig(device="cpu")  # no speed of light on the CPU: not read there


def test_the_bound_is_the_longer_of_compute_and_memory_and_the_share_is_the_bound_over_the_time():
    peak = sol.Peak(gbps=1000, tflops=10, source="test")
    memory = sol.bound(flops=0, nbytes=10**9, peak=peak)  # 1 GB at 1000 GB/s
    assert memory.ms == pytest.approx(1.0) and memory.limit == "memory"
    compute = sol.bound(flops=10**11, nbytes=10**6, peak=peak)  # 1e11 FLOPs at 1e13 a second
    assert compute.ms == pytest.approx(10.0) and compute.limit == "compute"
    fp = Footprint(inputs=4 * 10**8, outputs=4 * 10**8, params=0, flops=0, dtype="float32")
    light = sol.speed_of_light(fp, "NVIDIA H200", ref_ms=0.5, new_ms=0.25)
    assert light["bound_ms"] == pytest.approx(8e8 / 4.8e12 * 1e3, rel=1e-3) and light["limit"] == "memory"
    assert light["share"] == pytest.approx(light["bound_ms"] / 0.25, rel=1e-3)
    assert light["ref_share"] == pytest.approx(light["bound_ms"] / 0.5, rel=1e-3)
    tiny = sol.speed_of_light(Footprint(4096, 4096, 0, flops=0), "NVIDIA H200", ref_ms=0.01, new_ms=0.0066)
    assert tiny["share"] == pytest.approx(tiny["bound_ms"] / 0.0066, rel=1e-3)  # four significant figures, however small
    assert sol.speed_of_light(Footprint(1, 1, 1, flops=-1), "NVIDIA H200", 1.0, 1.0) is None  # FLOPs not counted
    missing = sol.speed_of_light(fp, "NVIDIA GeForce GTX 1080", 1.0, 1.0)
    assert missing["missing"].startswith("no peak known") and "share" not in missing


def _result(name: str, share: float | None) -> EvalResult:
    extra = Extra(speed_of_light={"share": share, "bound_ms": 0.1} if share is not None else None)
    return EvalResult(problem=name, level="1", problem_id=1, outcome=Outcome.CORRECT, speedup=1.5, extra=extra)


def test_the_summary_and_the_terminal_table_give_the_median_share():
    results = [_result("a", 0.1), _result("b", 0.4), _result("c", 0.3), _result("d", None)]
    assert summarize(results)["speed_of_light"] == {"median_share": 0.3, "results": 3}
    assert "speed of light, median share (3 on a GPU)" in render_summary(results, verbose=False, width=120)
    assert "30.0%" in render_summary(results, verbose=False, width=120)
    assert "speed_of_light" not in summarize([_result("d", None)])
    assert "speed of light" not in render_summary([_result("d", None)], verbose=False, width=120)
