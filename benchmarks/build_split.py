"""Where a CUDA candidate's build time goes: the binding file, with and without the shared PCH, and the
``.cu`` by the headers it includes (issue 5: the cold judge rate is compile-bound).

    python benchmarks/build_split.py --out OUT                       # a CUDA machine
    CPATH=HEADERS python benchmarks/build_split.py --cuda-home /usr/local/cuda --out OUT   # CPU-only torch

Every build is a real ``load_inline`` with torch's own flags (``TORCH_CUDA_ARCH_LIST``, default 9.0)
and ``MAX_JOBS=--jobs`` (default 1: one translation unit at a time, so that each is timed alone; the
core-seconds per candidate are what bound a build pool); the time of each translation unit comes
from ninja's log, nvcc's phases from ``nvcc --time``. With a CPU-only torch,
``--cuda-home`` points torch at nvcc's toolkit and the objects compile but the link fails (no
``libtorch_cuda``), which does not matter here; CPATH must then supply the CUDA library headers
torch's CUDA headers include (cuBLAS, cuSPARSE, cuSOLVER) and ``c10/cuda/impl/cuda_cmake_macros.h``.

Pass 1 builds one ``.cu`` per header set without the PCH; pass 2 builds the lightest one three times
with a fresh PCH root (the first build notes the flags, the second builds the ``.gch``, the third
finds it ready). Writes OUT/build_split.json and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kbagent.prompts import EXAMPLE_SOLUTION  # noqa: E402

KERNEL = r"""
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

at::Tensor add_cuda(at::Tensor a, at::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "add_cuda: expected CUDA tensors");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto out = at::empty_like(ac);
    int64_t n = ac.numel();
    add_kernel<<<(n + 255) / 256, 256, 0, STREAM>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
HEADER_SETS = {
    "torch/extension.h + ATen/cuda/CUDAContext.h": (
        "#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>", "at::cuda::getCurrentCUDAStream()"),
    "ATen/ATen.h + ATen/cuda/CUDAContext.h": (
        "#include <ATen/ATen.h>\n#include <ATen/cuda/CUDAContext.h>", "at::cuda::getCurrentCUDAStream()"),
    "torch/types.h": ("#include <torch/types.h>\n#include <c10/cuda/CUDAStream.h>", "c10::cuda::getCurrentCUDAStream()"),
    "ATen/core/Tensor.h + ATen/cuda/CUDAContext.h": (
        "#include <ATen/core/Tensor.h>\n#include <ATen/ops/empty_like.h>\n#include <ATen/cuda/CUDAContext.h>",
        "at::cuda::getCurrentCUDAStream()",
    ),
    "ATen/core/Tensor.h + c10/cuda/CUDAStream.h": (
        "#include <ATen/core/Tensor.h>\n#include <ATen/ops/empty_like.h>\n#include <c10/cuda/CUDAStream.h>",
        "c10::cuda::getCurrentCUDAStream()",
    ),
}
DECLARATION = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"


NO_IMPLICIT = "ATen/core/Tensor.h + c10/cuda/CUDAStream.h, no_implicit_headers=True"


def sources() -> dict[str, str]:
    """``.cu`` sources by label. load_inline puts ``torch/types.h`` (and cuda.h) in front of each
    unless ``no_implicit_headers=True`` (torch >= 2.7), the last entry."""
    out = {name: f"{includes}\n{KERNEL.replace('STREAM', stream)}" for name, (includes, stream) in HEADER_SETS.items()}
    example = re.search(r'cuda_source = r"""(.*?)"""', EXAMPLE_SOLUTION["cuda"], re.S)
    assert example, "kbagent/prompts.py: the CUDA example has no cuda_source"
    out["the agent prompt's example (kbagent/prompts.py)"] = example.group(1)
    out[NO_IMPLICIT] = "#include <cuda_runtime.h>\n" + out["ATen/core/Tensor.h + c10/cuda/CUDAStream.h"]
    return out


def ninja_times(folder: Path) -> dict[str, float]:
    """Seconds per target from ``.ninja_log`` (v5+: start ms, end ms, mtime, target, hash)."""
    times = {}
    for line in (folder / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, target, _ = line.split("\t")
        times[target] = (int(end) - int(start)) / 1000
    return times


def nvcc_phases(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    phases: dict[str, float] = {}
    with path.open() as fh:
        for row in csv.reader(fh):
            if len(row) >= 8 and row[-1].strip() == "ms":
                name = row[1].strip()
                phases[name] = phases.get(name, 0.0) + float(row[-2]) / 1000
    return phases


def build(name: str, cuda_source: str, scratch: Path, cxx: str | None, no_implicit_headers: bool = False) -> dict:
    from torch.utils.cpp_extension import load_inline

    ext_dir = scratch / name
    os.environ["TORCH_EXTENSIONS_DIR"] = str(ext_dir)
    if cxx:
        os.environ["CXX"] = cxx
    else:
        os.environ.pop("CXX", None)
    timing_csv = scratch / f"{name}.nvcc.csv"
    started = time.monotonic()
    error = ""
    extra = {"no_implicit_headers": True} if no_implicit_headers else {}
    declaration = f"#include <torch/extension.h>\n{DECLARATION}" if no_implicit_headers else DECLARATION
    try:
        load_inline(name=name, cpp_sources=declaration, cuda_sources=cuda_source, functions=["add_cuda"],
                    extra_cuda_cflags=["-O3", "--time", str(timing_csv)], verbose=False, **extra)  # fmt: skip
    except Exception as exc:  # noqa: BLE001  the link fails on a CPU-only torch; the objects are what we time
        error = str(exc)[-600:]
    wall = time.monotonic() - started
    folder = ext_dir / name
    times = ninja_times(folder) if (folder / ".ninja_log").exists() else {}
    row = {"name": name, "wall_s": round(wall, 1), "binding_s": times.get("main.o"), "cu_s": times.get("cuda.cuda.o"),
           "nvcc_phases_s": {k: round(v, 1) for k, v in nvcc_phases(timing_csv).items()},
           "linked": not error}  # fmt: skip
    if row["binding_s"] is None or row["cu_s"] is None:
        row["error"] = error
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build-split-out"))
    parser.add_argument("--cuda-home", help="nvcc's toolkit, for a CPU-only torch (compile only)")
    parser.add_argument("--jobs", type=int, default=1, help="ninja jobs per build (MAX_JOBS)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    os.environ["MAX_JOBS"] = str(args.jobs)
    import torch
    import torch.utils.cpp_extension as cpp_extension

    if args.cuda_home:
        cpp_extension.CUDA_HOME = args.cuda_home
    from pytest_kernelbench.build.pch import compiler_wrapper

    scratch = Path(tempfile.mkdtemp(prefix="kb-build-split-"))
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"), "torch": torch.__version__,
           "cpus": os.cpu_count(), "jobs": args.jobs, "arch": os.environ["TORCH_CUDA_ARCH_LIST"], "headers": [], "pch": []}  # fmt: skip
    for i, (label, source) in enumerate(sources().items()):
        row = build(f"kb_split_h{i}", source, scratch, None, no_implicit_headers=label == NO_IMPLICIT)
        doc["headers"].append({"headers": label, **row})
        (args.out / "build_split.json").write_text(json.dumps(doc, indent=1))
    wrapper = compiler_wrapper(scratch / "pch")
    lightest = sources()["ATen/core/Tensor.h + c10/cuda/CUDAStream.h"]
    for rep in range(3 if wrapper else 0):
        row = build(f"kb_split_pch{rep}", lightest, scratch, wrapper)
        events = [json.loads(line) for line in (scratch / "pch" / "events.jsonl").read_text().splitlines()]
        row["pch_events"] = [e["event"] for e in events if f"kb_split_pch{rep}/" in e.get("source", "")]
        doc["pch"].append(row)
        (args.out / "build_split.json").write_text(json.dumps(doc, indent=1))

    print("\n| `.cu` includes | binding file s | `.cu` s | nvcc phases s |\n| --- | --- | --- | --- |")
    for r in doc["headers"]:
        phases = ", ".join(f"{k} {v}" for k, v in r["nvcc_phases_s"].items() if v >= 0.5)
        print(f"| {r['headers']} | {r['binding_s']} | {r['cu_s']} | {phases} |")
    print("\n| build with the shared PCH | PCH events | binding file s | `.cu` s |\n| --- | --- | --- | --- |")
    for rep, r in enumerate(doc["pch"], 1):
        print(f"| {rep} | {', '.join(r['pch_events'])} | {r['binding_s']} | {r['cu_s']} |")


if __name__ == "__main__":
    main()
