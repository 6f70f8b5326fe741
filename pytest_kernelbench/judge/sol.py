"""Speed of light: the least time this GPU could take for a problem, and the share of it a candidate reached.

The bound is the problem's, not any kernel's: its reference's floating-point operations at the GPU's dense peak for
the problem's dtype, or its compulsory bytes at the GPU's memory bandwidth, whichever takes longer (a roofline's
corner). The FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode`` while the trusted footprint child calls
the reference on the meta device (:mod:`.footprint`: shapes only, nothing allocated); the compulsory bytes are one
read of an input set and of the parameters and one write of the outputs. Elementwise work counts no FLOPs there, so
such problems are bounded by their bytes, as they are on the hardware.

A candidate's share is the bound over its measured time (1.0: at the speed of light). A share above 1 is possible
where a candidate computes in a cheaper precision than the problem's dtype (float32 on TF32 tensor cores) or moves
fewer bytes than the problem's tensors hold (it leaves an input unread): the bound is for the problem as stated.

Peaks: :data:`PEAKS`, the vendors' dense figures (no sparsity) by the name CUDA reports; ``KB_PEAK=GBPS,TFLOPS``
sets them for any other GPU (TFLOPS for the problem's dtype). Without either, a result carries the FLOPs and bytes and
says which peak is missing.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from ..errors import KernelBenchUsageError

# name fragment (first match wins): memory GB/s, dense TFLOPS by dtype (float32 without TF32: PyTorch's default for
# float32 matmuls and convolutions is full precision on CUDA cores)
PEAKS: tuple[tuple[str, float, dict[str, float]], ...] = (
    ("H200", 4800, {"float64": 34, "float32": 67, "float16": 989.5, "bfloat16": 989.5}),
    ("H100 PCIe", 2000, {"float64": 26, "float32": 51, "float16": 756, "bfloat16": 756}),
    ("H100 NVL", 3900, {"float64": 30, "float32": 60, "float16": 835, "bfloat16": 835}),
    ("H100", 3350, {"float64": 34, "float32": 67, "float16": 989.5, "bfloat16": 989.5}),
    ("A100-SXM4-40GB", 1555, {"float64": 9.7, "float32": 19.5, "float16": 312, "bfloat16": 312}),
    ("A100 80GB PCIe", 1935, {"float64": 9.7, "float32": 19.5, "float16": 312, "bfloat16": 312}),
    ("A100", 2039, {"float64": 9.7, "float32": 19.5, "float16": 312, "bfloat16": 312}),
    ("L40S", 864, {"float64": 1.4, "float32": 91.6, "float16": 362, "bfloat16": 362}),
)
ENV = "KB_PEAK"


@dataclasses.dataclass(frozen=True)
class Peak:
    gbps: float
    tflops: float
    source: str  # "table: <fragment>" or "KB_PEAK"


def env_peak(env: dict[str, str] | os._Environ[str] | None = None) -> Peak | None:
    """The peak ``KB_PEAK`` sets (None where it is unset); a value that is not two positive numbers is a one-line usage
    error (EvalConfig checks it before any work)."""
    env = os.environ if env is None else env
    given = env.get(ENV, "")
    if not given:
        return None
    try:
        gbps, tflops = (float(v) for v in given.split(","))
    except ValueError:
        gbps = tflops = math.nan
    if not (0 < gbps < math.inf and 0 < tflops < math.inf):
        raise KernelBenchUsageError(f"{ENV}={given!r}: give GBPS,TFLOPS, two positive numbers (the GPU's memory bandwidth "
                                    "and its peak for the problem's dtype)")  # fmt: skip
    return Peak(gbps, tflops, ENV)


def peak_for(gpu_name: str, dtype: str, env: dict[str, str] | None = None) -> Peak | str:
    """This GPU's peak for ``dtype``, or one line saying why there is none."""
    given = env_peak(env)
    if given is not None:
        return given
    for fragment, gbps, tflops in PEAKS:
        if fragment in gpu_name:
            if dtype not in tflops:
                return f"no {dtype} peak for {gpu_name}; set {ENV}=GBPS,TFLOPS"
            return Peak(gbps, tflops[dtype], f"table: {fragment}")
    return f"no peak known for {gpu_name or 'this GPU'}; set {ENV}=GBPS,TFLOPS"


@dataclasses.dataclass(frozen=True)
class Bound:
    flops: int
    nbytes: int
    ms: float
    limit: str  # "memory" or "compute"
    peak: Peak


def bound(flops: int, nbytes: int, peak: Peak) -> Bound:
    compute_ms = flops / (peak.tflops * 1e12) * 1e3
    memory_ms = nbytes / (peak.gbps * 1e9) * 1e3
    return Bound(flops, nbytes, max(compute_ms, memory_ms), "compute" if compute_ms > memory_ms else "memory", peak)


def speed_of_light(fp: Any, gpu_name: str, ref_ms: float | None, new_ms: float | None) -> dict[str, Any] | None:
    """What a GPU result carries (``Extra.speed_of_light``) for a problem whose footprint is ``fp``
    (:class:`.footprint.Footprint`); None where the FLOPs were not counted."""
    if fp is None or fp.flops < 0:
        return None
    nbytes = fp.inputs + fp.outputs + fp.params
    found: dict[str, Any] = {"flops": fp.flops, "bytes": nbytes, "dtype": fp.dtype}
    peak = peak_for(gpu_name, fp.dtype)
    if isinstance(peak, str):
        return {**found, "missing": peak}
    b = bound(fp.flops, nbytes, peak)
    found.update(bound_ms=_figures(b.ms), limit=b.limit, peak={"gbps": peak.gbps, "tflops": peak.tflops, "source": peak.source})
    for key, ms in (("share", new_ms), ("ref_share", ref_ms)):
        if ms and ms > 0:
            found[key] = _figures(b.ms / ms)
    return found


def _figures(value: float) -> float:
    """Four significant figures (a tiny problem's share is 0.000258, not 0.0003)."""
    return float(f"{value:.4g}")
