"""build/light.py: a candidate's ``.cu`` that includes ``torch/extension.h`` is compiled with ``torch/types.h`` where
that builds, else as written; every other compiler call passes through. Shown with a stand-in nvcc that records what
it compiled and refuses the sources a test says."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pytest_kernelbench.build import light

# A stand-in nvcc: writes each call's arguments and the text of its .cu (if any) to CALLS, and fails when that text
# holds $KB_FAKE_REFUSE, printing a message of its own.
FAKE_NVCC = """#!{python}
import json, os, sys
cu = [a for a in sys.argv[1:] if a.endswith(".cu")]
text = open(cu[0]).read() if cu else ""
with open(os.environ["CALLS"], "a") as fh:
    fh.write(json.dumps({{"args": sys.argv[1:], "text": text}}) + "\\n")
refuse = os.environ.get("KB_FAKE_REFUSE", "")
if refuse and refuse in text:
    print("error: refused " + os.path.basename(cu[0]), file=sys.stderr)
    sys.exit(2)
print("compiled " + (os.path.basename(cu[0]) if cu else "nothing"))
"""

CU = """#include <torch/extension.h>
#include <cuda_runtime.h>
  # include "torch/extension.h"

__global__ void k(float* x) {{ x[0] = 1; }}
torch::Tensor f(torch::Tensor x) {{ {body} return x; }}
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(FAKE_NVCC.format(python=sys.executable))
    nvcc.chmod(0o755)
    monkeypatch.setenv("CALLS", str(tmp_path / "calls.jsonl"))

    def run(args, refuse="", aten=False):
        env = {**os.environ, "KB_FAKE_REFUSE": refuse}
        wrapper = [sys.executable, light.__file__, *(["--aten"] if aten else []), str(nvcc)]
        done = subprocess.run([*wrapper, *args], capture_output=True, text=True, env=env, timeout=60)
        lines = (tmp_path / "calls.jsonl").read_text().splitlines() if (tmp_path / "calls.jsonl").exists() else []
        (tmp_path / "calls.jsonl").unlink(missing_ok=True)
        return done, [json.loads(line) for line in lines]

    return run


def _compile(source: Path) -> list[str]:
    return ["--generate-dependencies-with-compile", "--dependency-output", "x.o.d", "-O3", "-c", str(source), "-o", "x.o"]


def test_each_extension_include_becomes_types_and_nothing_else_changes():
    text = CU.format(body="")
    light_text = light.light_source(text)
    assert light_text is not None and "torch/extension.h>\n" not in light_text and 'include "torch/extension.h"' not in light_text
    assert light_text.count("#include <torch/types.h>") == 2 and "#include <cuda_runtime.h>" in light_text
    assert light_text.splitlines()[3:] == text.splitlines()[3:]  # the line count kept: nvcc's messages point at the same lines
    assert light.light_source("#include <cuda.h>\n// torch/extension.h in a comment\n") is None
    # load_inline's own torch/types.h in front of a .cu written with light headers: left out, the line numbers kept
    implicit = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n#include <ATen/core/Tensor.h>\n"
    lighter = light.light_source(implicit)
    assert lighter is not None and lighter.splitlines()[0].startswith("//")
    assert lighter.splitlines()[1:] == implicit.splitlines()[1:]


def test_a_cu_that_builds_light_is_compiled_light_once(tmp_path, fake):
    source = tmp_path / "cuda.cu"
    source.write_text(CU.format(body=""))
    os.utime(source, (1_000_000_000, 1_000_000_000))
    done, calls = fake(_compile(source))
    assert done.returncode == 0 and "compiled cuda.kb-light.cu" in done.stdout, done.stderr
    assert len(calls) == 1 and "torch/extension.h>" not in calls[0]["text"] and "torch/types.h" in calls[0]["text"]
    assert str(tmp_path / "cuda.kb-light.cu") in calls[0]["args"] and "x.o" in calls[0]["args"]
    notes = [json.loads(line) for line in (tmp_path / light.EVENTS).read_text().splitlines()]
    assert [n["how"] for n in notes] == ["light"]
    # dated as its source: ninja would find a dependency newer than the object's command start and compile it again
    assert (tmp_path / "cuda.kb-light.cu").stat().st_mtime_ns == source.stat().st_mtime_ns


def test_a_cu_that_needs_the_whole_header_is_compiled_as_written_with_only_its_own_messages(tmp_path, fake):
    source = tmp_path / "cuda.cu"
    source.write_text(CU.format(body="pybind11::object o;"))
    done, calls = fake(_compile(source), refuse="torch/types.h")  # the light copy does not build
    assert done.returncode == 0 and done.stdout.strip() == "compiled cuda.cu" and "refused" not in done.stderr
    assert [Path(c["args"][5]).name for c in calls] == ["cuda.kb-light.cu", "cuda.cu"]
    assert calls[1]["text"] == source.read_text()
    failed, _ = fake(_compile(source), refuse="pybind11")  # both fail: the original's own error and exit status
    assert failed.returncode == 2 and failed.stderr.strip() == "error: refused cuda.cu"
    notes = [json.loads(line)["how"] for line in (tmp_path / light.EVENTS).read_text().splitlines()]
    assert notes == ["fallback", "fallback"]


def test_the_aten_copy_makes_every_torch_header_the_prelude_and_leaves_out_a_cu_naming_requires_grad():
    text = "#include <torch/types.h>\n#include <cuda.h>\n" + CU.format(body="")
    aten = light.aten_source(text)
    assert aten is not None and "torch/types.h>" not in aten and "torch/extension.h" not in aten
    assert aten.count(f'#include "{light.ATEN_PRELUDE}"') == 3 and light.ATEN_PRELUDE.is_file()
    assert len(aten.splitlines()) == len(text.splitlines()) and "#include <cuda_runtime.h>" in aten
    assert light.aten_source(text.replace("return x;", "x.requires_grad_(); return x;")) is None
    assert light.aten_source("#include <cuda.h>\n#include <ATen/core/Tensor.h>\n") is None  # nothing of torch's to replace


def test_with_aten_the_prelude_copy_comes_first_then_the_types_copy_then_the_original(tmp_path, fake):
    source = tmp_path / "cuda.cu"
    source.write_text("#include <torch/types.h>\n" + CU.format(body=""))
    done, calls = fake(_compile(source), aten=True)
    assert done.returncode == 0 and len(calls) == 1 and "aten_prelude.h" in calls[0]["text"], (done.stderr, calls)
    done, calls = fake(_compile(source), refuse="aten_prelude.h", aten=True)  # torch::addmm, say: not in the prelude
    assert done.returncode == 0 and done.stdout.strip() == "compiled cuda.kb-light.cu" and "refused" not in done.stderr
    assert [("aten_prelude.h" in c["text"], "torch/types.h" in c["text"]) for c in calls] == [(True, False), (False, True)]
    done, calls = fake(_compile(source), refuse="torch/", aten=True)  # both copies refused: the original, as written
    assert done.returncode == 2 and len(calls) == 3 and calls[2]["text"] == source.read_text()
    notes = [json.loads(line)["how"] for line in (tmp_path / light.EVENTS).read_text().splitlines()]
    assert notes == ["aten", "light", "fallback"]
    assert (tmp_path / "cuda.kb-light.cu").stat().st_mtime_ns == source.stat().st_mtime_ns
    done, calls = fake(_compile(source))  # without --aten: the types copy alone, as before
    assert done.returncode == 0 and len(calls) == 1 and "aten_prelude.h" not in calls[0]["text"]
    # a .cu with light headers of its own: first without load_inline's torch/types.h, then on the prelude
    own = "#include <torch/types.h>\n#include <cuda.h>\n#include <ATen/core/Tensor.h>\n__global__ void k() {}\n"
    assert [how for how, _ in light.tiers(own, aten=True)] == ["light", "aten"] and light.tiers(own, aten=False)[0][0] == "light"


ATEN_CU = """#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void scale(const float* x, float* y, float a, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
torch::Tensor run(torch::Tensor x, double a) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x: a float CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    auto z = torch::zeros({x.size(0)}, x.options().dtype(torch::kFloat));
    auto stream = c10::cuda::getCurrentCUDAStream();
    int64_t n = x.numel();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "run", [&] {
        scale<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)a, n);
    });
    return y.add_(z.sum());
}
"""


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("nvcc") and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no nvcc here")
def test_a_typical_agent_cu_compiles_with_the_prelude_under_nvcc(tmp_path):
    """The prelude with torch's real headers: what the PIKE corpus's kernels name (the tensor, TORCH_CHECK, empty_like,
    zeros, dtype names, the guard, the stream, AT_DISPATCH) compiles; what it does not declare fails, so the wrapper
    moves on to torch/types.h."""
    from pytest_kernelbench.judge.compile_only import cuda_home
    from pytest_kernelbench.judge.cuda_headers import header_env

    nvcc = str(Path(cuda_home()) / "bin" / "nvcc")
    include = Path(torch.__file__).parent / "include"
    flags = ["-isystem", str(include), "-isystem", str(include / "torch/csrc/api/include"), "-std=c++17",
             "--expt-relaxed-constexpr", "-gencode=arch=compute_90,code=sm_90", "-c"]  # fmt: skip
    env = {**os.environ, **header_env()}
    for body, ok in ((ATEN_CU, True), (ATEN_CU.replace("y.add_(z.sum())", "torch::addmm(y, y, y)"), False)):
        source = tmp_path / "k.cu"
        source.write_text(light.aten_source(body))
        command = [nvcc, *flags, str(source), "-o", str(tmp_path / "k.o")]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        assert (done.returncode == 0) is ok, done.stdout + done.stderr


def test_other_calls_pass_through_unchanged(tmp_path, fake):
    plain = tmp_path / "plain.cu"
    plain.write_text("#include <cuda.h>\n__global__ void k() {}\n")
    for args in (_compile(plain), ["--version"], ["-shared", "a.o", "-o", "x.so"]):
        done, calls = fake(args)
        assert done.returncode == 0 and [c["args"] for c in calls] == [args]
    assert not (tmp_path / light.EVENTS).exists()


def test_the_judge_sets_the_wrapper_for_a_build_only_where_nvcc_is(monkeypatch, tmp_path):
    from pytest_kernelbench.judge.supervisor.building import _real_nvcc, light_counts

    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    assert _real_nvcc(str(home)) == ""
    (home / "bin" / "nvcc").write_text("")
    assert _real_nvcc(str(home)) == str(home / "bin" / "nvcc")
    # without cpu-check's toolkit: the nvcc torch's cpp_extension finds (none for a CPU build of torch)
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setenv("CUDA_HOME", str(home))
    torch_home = cpp_extension._find_cuda_home() if torch.version.cuda else None
    assert _real_nvcc("") == (os.path.join(torch_home, "bin", "nvcc") if torch_home else "")
    command = light.nvcc_command(str(home / "bin" / "nvcc"))
    assert command.split()[1:] == [light.__file__, str(home / "bin" / "nvcc")]
    # the wrapper and its tiers decide the binary: each setting builds in a folder of its own, never another's objects
    from pytest_kernelbench.build.cache import build_key

    keys = {build_key("src", torch, torch.device("cpu"), {"PYTORCH_NVCC": light.nvcc_command("nvcc", aten=aten)}) for aten in (False, True)}
    assert len(keys) == 2 and build_key("src", torch, torch.device("cpu"), {"PYTORCH_NVCC": ""}) not in keys
    ext = tmp_path / "builds" / "my_ext"
    ext.mkdir(parents=True)
    assert light_counts(tmp_path / "builds") is None
    (ext / light.EVENTS).write_text('{"how": "light"}\n{"how": "fallback"}\n{"how": "light"}\n')
    assert light_counts(tmp_path / "builds") == {"light": 2, "fallback": 1}
    (ext / light.EVENTS).write_text('{"how": "aten"}\n{"how": "light"}\n')
    assert light_counts(tmp_path / "builds") == {"aten": 1, "light": 1, "fallback": 0}
