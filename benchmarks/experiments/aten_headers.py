"""What nvcc costs a corpus's ``.cu`` by the headers it is compiled with (build/light.py's tiers): ``light`` (each
``torch/extension.h`` made ``torch/types.h``: the judge's default) against ``aten`` (``KB_LIGHT_HEADERS=aten``: every
torch header made ``aten_prelude.h``), and whether each compiles. Each file's first ``load_inline`` CUDA source is
taken by running its module with ``load_inline`` stood in for (a call made later, in ``forward``, is not seen), put
behind ``load_inline``'s own header lines, and compiled as torch's build compiles a ``.cu`` (its flags, the file's own
``extra_cuda_cflags``, ``TORCH_CUDA_ARCH_LIST`` or 9.0), one compile at a time per job, CPU-seconds from ``rusage``.

    python benchmarks/experiments/aten_headers.py --corpus ../shared/pike-corpus --jobs 2 --out OUT.json

Runs where nvcc is (a CPU-only torch compiles against cpu-check's headers, judge/cuda_headers.py). It runs the corpus's
module code in this process to find the sources: only for a corpus you trust as you trust its authors.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import resource
import runpy
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pytest_kernelbench.build.light import aten_source, light_source  # noqa: E402
from pytest_kernelbench.judge.compile_only import cuda_home  # noqa: E402
from pytest_kernelbench.judge.cuda_headers import header_env  # noqa: E402

IMPLICIT = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"  # what load_inline puts in front
TIERS = {"light": light_source, "aten": aten_source}


class _Found(BaseException):  # past a candidate's own ``except Exception``
    pass


def cuda_sources(corpus: Path) -> dict[str, tuple[str, list[str]]]:
    """Each file's first load_inline CUDA source (with load_inline's header lines) and its extra_cuda_cflags."""
    import torch
    from torch.utils import cpp_extension

    def found(name, cpp_sources=None, cuda_sources=None, extra_cuda_cflags=None, **kwargs):
        raise _Found(cuda_sources if isinstance(cuda_sources, str) else "\n".join(cuda_sources or []), list(extra_cuda_cflags or []))

    cpp_extension.load_inline, torch.cuda.is_available = found, lambda: True
    out = {}
    for path in sorted(corpus.rglob("*.py")):
        try:
            runpy.run_path(str(path), run_name="kb_candidate")
        except _Found as call:
            if call.args[0].strip():
                out[str(path.relative_to(corpus))] = (IMPLICIT + call.args[0], call.args[1])
        except BaseException:  # noqa: BLE001  (a module that fails here has no source to compile)
            pass
    return out


def nvcc_flags() -> list[str]:
    """torch's flags for a .cu (cpp_extension's COMMON_NVCC_FLAGS and include folders), for this machine's torch."""
    import torch

    include = Path(torch.__file__).parent / "include"
    arch = (os.environ.get("TORCH_CUDA_ARCH_LIST") or "9.0").split(";")[0].replace(".", "")
    return ["-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=x", "-isystem", str(include), "-isystem",
            str(include / "torch/csrc/api/include"), "-isystem", sysconfig.get_paths()["include"], "-D__CUDA_NO_HALF_OPERATORS__",
            "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
            "--expt-relaxed-constexpr", f"-gencode=arch=compute_{arch},code=sm_{arch}", "--compiler-options", "-fPIC",
            "-std=c++17"]  # fmt: skip


def compile_one(label: str, tier: str, text: str, extra: list[str]) -> dict:
    copy = TIERS[tier](text)
    if copy is None:
        return {"label": label, "tier": tier, "ok": None, "cpu_s": 0.0}
    nvcc = str(Path(cuda_home()) / "bin" / "nvcc")
    with tempfile.TemporaryDirectory(prefix="kb-aten-") as tmp:
        source = Path(tmp) / "cuda.cu"
        source.write_text(copy)
        command = [nvcc, *nvcc_flags(), *extra, "-c", str(source), "-o", str(Path(tmp) / "cuda.o")]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **header_env()}, timeout=900)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)  # this worker process's children so far: differenced by the caller
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "error" in line][:2]
    return {"label": label, "tier": tier, "ok": done.returncode == 0, "children_cpu": used.ru_utime + used.ru_stime, "errors": errors}


def _worker(job: tuple[str, str, str, list[str]]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = compile_one(*job)
    if "children_cpu" in row:
        row["cpu_s"] = round(row.pop("children_cpu") - before.ru_utime - before.ru_stime, 2)
    return row


def summary(rows: list[dict]) -> dict:
    by_label: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_label.setdefault(row["label"], {})[row["tier"]] = row
    out = {}
    for tier in TIERS:
        tried = [r for r in rows if r["tier"] == tier and r["ok"] is not None]
        ok = [r["cpu_s"] for r in tried if r["ok"]]
        failed = [r["cpu_s"] for r in tried if not r["ok"]]
        out[tier] = {"tried": len(tried), "compiled": len(ok), "median_cpu_s": statistics.median(ok) if ok else None,
                     "median_failed_cpu_s": statistics.median(failed) if failed else None}  # fmt: skip
    # what the aten tier costs a file, as the wrapper runs it: aten where it compiles, else its failure and then light
    paid = []
    for tiers in by_label.values():
        aten, light = tiers.get("aten"), tiers.get("light")
        if aten and light and light["ok"]:
            paid.append((aten["cpu_s"] if aten["ok"] else aten["cpu_s"] + light["cpu_s"], light["cpu_s"]))
    out["files_both_tried"] = len(paid)
    out["cpu_s_light_tier_alone"] = round(sum(b for _, b in paid), 1)
    out["cpu_s_aten_first"] = round(sum(a for a, _ in paid), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="a folder of solution files (searched recursively)")
    parser.add_argument("--tiers", default="aten,light", help="which of build/light.py's copies to compile: aten, light")
    parser.add_argument("--jobs", type=int, default=2, help="compiles at once (each nvcc is one process at a time)")
    parser.add_argument("--out", required=True, help="JSON file: a row per compile and the summary")
    args = parser.parse_args()
    tiers = [t for t in args.tiers.split(",") if t]
    if not cuda_home() or not Path(args.corpus).is_dir() or not set(tiers) <= set(TIERS):
        raise SystemExit("error: needs nvcc (a CUDA toolkit), an existing --corpus folder and --tiers from aten,light")
    sources = cuda_sources(Path(args.corpus))
    jobs = [(label, tier, text, extra) for tier in tiers for label, (text, extra) in sources.items()]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        rows = []
        for row in pool.map(_worker, jobs):
            rows.append(row)
            print(json.dumps(row), flush=True)
    found = {"corpus": args.corpus, "files_with_a_cuda_source": len(sources), "summary": summary(rows), "rows": rows}
    Path(args.out).write_text(json.dumps(found, indent=1))
    print(json.dumps(found["summary"], indent=1))


if __name__ == "__main__":
    main()
