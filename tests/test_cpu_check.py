"""--device cpu-check (issue 17): checks without a GPU. A CUDA load_inline candidate is compiled by nvcc
(compile_error with nvcc's message, else built); a Triton one runs in Triton's interpreter on the CPU on
the problem's inputs scaled down; the plugin, ``kbagent check`` and the agent's search use it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from helpers import DATA, REPO, SHARED_KB, TINY_PROBLEM, cpu_config, tiny_problem
from kbagent import prompts
from kbagent.cli import app
from kbagent.llm import ScriptedLLM
from kbagent.runfolder import load_tree
from kbagent.search import SearchConfig, run_search
from pytest_kernelbench.candidates import Candidate, load_candidate_file
from pytest_kernelbench.judge.compile_only import cuda_home
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.judge.cuda_headers import INSTALL, OWN_INCLUDE, header_env, missing_header, wheel_include_dirs
from pytest_kernelbench.judge.shrink import scaled
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import load_jsonl, problem_from_path
from pytest_kernelbench.result import EvalResult

CHECK = DATA / "cpu_check"
CANDIDATES = CHECK / "candidates"
BIG_RELU = CHECK / "level1" / "2_BigReLU.py"  # 1 GiB of input, sizes as module-level constants
needs_nvcc = pytest.mark.skipif(not cuda_home(), reason="no CUDA toolkit (nvcc) on this machine")
needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed (pip install -e '.[test]')")


def check(problem, name, **config):
    return evaluate(problem, load_candidate_file(CANDIDATES / f"{name}.py"), cpu_config(device="cpu-check", **config))


# --- CUDA: compiled with nvcc, never run ---------------------------------------------------------


@needs_nvcc
def test_kbagent_check_reports_a_cuda_syntax_error_with_nvccs_message(checks_pch):
    candidate = str(CANDIDATES / "cuda_syntax_error.py")
    run = CliRunner().invoke(app, ["check", str(TINY_PROBLEM), candidate, "--json", "--build-pch", checks_pch])
    assert run.exit_code == 1, run.output
    result = json.loads(run.stdout)
    assert result["outcome"] == "compile_error" and result["stage"] == "compile" and result["reward"] == -5
    assert "error: expected an expression" in result["message"] and "y[i] = = x[i]" in result["message"]  # nvcc's own words
    assert "nvcc" in result["message"] and result["device"] == "cpu-check" and result["extra"]["cpu_check"] == "nvcc"


@needs_nvcc
@pytest.mark.slow
@pytest.mark.full  # CI: the prompts' example is built by nvcc the same way
def test_a_good_cuda_candidate_is_built_by_nvcc_for_the_set_arch_and_never_run(tmp_path):
    result = check(tiny_problem(), "cuda_relu", build_dir=str(tmp_path), pch_dir="off", timeout=600)
    assert result.outcome is Outcome.BUILT, result.message
    assert result.reward is None and result.speedup is None and result.ref is None
    assert "TORCH_CUDA_ARCH_LIST=9.0" in result.message and result.extra.cpu_check == "nvcc"
    objects = {p.name for p in tmp_path.rglob("*.o")}
    assert objects == {"cuda.cuda.o", "main.o"} and not list(tmp_path.rglob("*.so"))  # compiled, linked nothing
    assert "init" not in result.stage_seconds and "run" not in result.stage_seconds  # never constructed, never called


# --- Triton: its interpreter on the CPU, inputs scaled down -------------------------------------


@needs_triton
def test_a_wrong_triton_kernel_is_incorrect_on_the_scaled_down_inputs():
    result = check(problem_from_path(BIG_RELU), "triton_leaky")
    assert result.outcome is Outcome.INCORRECT, result.message
    assert result.extra.scaled == {"batch_size": [4096, 256], "dim": [65536, 4096]}
    assert "values outside" in result.message and "sizes scaled down: batch_size 4096->256, dim 65536->4096" in result.message


@needs_triton
def test_pytest_checks_the_cuda_solutions_on_the_cpu_and_passes_what_is_built(pytester, monkeypatch):
    """One run: a Triton solution of a KernelBench level (train mode) and a PyTorch one of a PIKE level (eval mode)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    solutions = pytester.path / "sols"
    (solutions / "level1").mkdir(parents=True)
    (solutions / "level3-metr").mkdir()
    (solutions / "level1" / "2_BigReLU.cuda.py").write_text((CANDIDATES / "triton_relu.py").read_text())
    (solutions / "level3-metr" / "1_ConvBN.cuda.py").write_text((CANDIDATES / "ConvBN_folded.py").read_text())
    run = pytester.runpytest_subprocess("--level", "1,3-metr", "--dataset", str(CHECK), "--solutions", str(solutions), "--device",
                                        "cpu-check", "--kb-report", "r.json", "-p", "no:cacheprovider")  # fmt: skip
    run.assert_outcomes(passed=2)
    results = {r["problem"]: r for r in json.loads((pytester.path / "r.json").read_text())["results"]}
    relu, conv = results["L1-2_BigReLU"], results["L3-metr-1_ConvBN"]
    assert relu["outcome"] == conv["outcome"] == "built" and relu["reward"] is None
    assert relu["extra"]["cpu_check"] == "triton-interpreter" and relu["extra"]["scaled"]["dim"] == [65536, 4096]
    assert (relu["ref_mode"], conv["ref_mode"]) == ("train", "eval") and conv["extra"]["cpu_check"] == "cpu"
    # the first trial's call was the operator trace: no call more for it (a Triton call in the interpreter is dear)
    assert "trace" not in relu["stage_seconds"] and "trace" not in conv["stage_seconds"]
    assert conv["extra"]["aten_ops"].get("aten.convolution") == 1 and relu["extra"]["aten_ops_all_threads"] is False


def test_shrinking_scales_size_constants_together_and_leaves_small_ones():
    source = BIG_RELU.read_text().replace("dim = 65536", "dim = 65536\nheight = width = 64\nkernel, depth = 3, 256\nshape = (128 * 4, 7)")
    text, changes = scaled(source)
    assert changes["batch_size"] == [4096, 256] and changes["dim"] == [65536, 4096]
    assert changes["height=width"] == [64, 16] and changes["depth"] == [256, 16] and changes["shape[0]"] == [512, 32]
    assert "kernel" not in changes and "kernel, depth = 3, 16" in text and "shape = (32, 7)" in text
    fixed = source.replace("return torch.relu(x)", "return torch.relu(x.view(4096, 65536))")  # only runs at its own sizes
    assert scaled(fixed) == (fixed, {})


# --- the agent: cpu-check when no GPU is free ---------------------------------------------------


def test_the_search_stops_fixing_a_built_candidate_and_ranks_it_above_failures(tmp_path):
    def reply(messages):
        text = messages[-1]["content"]
        if prompts.is_ideas_prompt(text):
            return json.dumps(["write the kernel"])
        marker = "BUILT" if "## What went wrong" in text else "BROKEN"
        return f"```python\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n# {marker}\n```\n"

    def judge(problem, candidate, config):
        assert config.device == "cpu-check"
        outcome = Outcome.BUILT if "BUILT" in candidate.source else Outcome.COMPILE_ERROR
        return EvalResult(problem=problem.id, level=problem.level, problem_id=problem.problem_id, outcome=outcome, stage="compile",
                          message="nvcc: error" if outcome is Outcome.COMPILE_ERROR else "compiled with nvcc")  # fmt: skip

    config = SearchConfig(model="scripted/test", num_samples=1, num_phases=1, max_fix_attempts=3)
    llm = ScriptedLLM(reply, settings=config.llm_settings())
    result = asyncio.run(run_search(tiny_problem(), config, cpu_config(device="cpu-check"), llm, tmp_path / "run", evaluator=judge))
    ids = [n["id"] for n in load_tree(result.run_dir) if n["kind"] != "ideas"]
    assert ids == ["p0-i0", "p0-i0-f1"]  # the fix built: no second fix
    assert result.summary["best"]["outcome"] == "built" and result.summary["failed_samples"] == 0
    assert result.summary["language"] == "cuda"  # written for the GPU it will be judged on later
    code_prompts = [m[-1]["content"] for m in llm.calls if not prompts.is_ideas_prompt(m[-1]["content"])]
    assert len(code_prompts) == 2 and all("There is no GPU here yet" in text for text in code_prompts)


def test_a_gpu_search_without_a_gpu_checks_its_candidates_on_the_cpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the search judges on it")
    out = tmp_path / "run"
    args = ["search", str(TINY_PROBLEM), "--model", "scripted/reference", "--device", "cuda", "--num-samples", "1", "--num-phases", "1",
            "--max-fix-attempts", "0", "--trials", "2", "--out", str(out), "--json"]  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "kbagent.cli", *args], capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["device"] == "cpu-check" and summary["best"]["outcome"] == "built" and summary["language"] == "cuda"


# --- the headers a CPU-only machine lacks (issue 48) --------------------------------------------


def _fake_machine(tmp_path):
    """A toolkit's and torch's include folders: torch has CUDAContextLight.h, the toolkit cuda_runtime.h only."""
    home, torch_include = tmp_path / "cuda", tmp_path / "torch" / "include"
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda_runtime.h").write_text("")
    (torch_include / "ATen" / "cuda").mkdir(parents=True)
    (torch_include / "ATen" / "cuda" / "CUDAContextLight.h").write_text("#include <cusparse.h>\n")
    return str(home), str(torch_include)


def test_a_cuda_or_torch_header_missing_here_is_the_machines_fault_and_names_what_to_install(tmp_path):
    home, torch_include = _fake_machine(tmp_path)
    light = f"{torch_include}/ATen/cuda/CUDAContextLight.h"
    ours = f"{tmp_path}/build/cuda.cu"
    cases = {
        f"{light}:10:10: fatal error: cusparse.h: No such file or directory": "(it has nvidia-cusparse)",
        f"{ours}:3:10: fatal error: cufftXt.h: No such file or directory": "Install it: pip install nvidia-cufft",
        f'{ours}(3): catastrophic error: cannot open source file "curand_kernel.h"': "(it has nvidia-curand)",
        f"{light}:20:10: fatal error: cudss.h: No such file or directory": "or a CUDA build of torch and a whole CUDA toolkit",
    }
    for message, says in cases.items():
        why = missing_header(f"In file included from {ours}:2:\n{message}\ncompilation terminated.", home, torch_include, {})
        assert why.startswith("--device cpu-check: this machine lacks the header") and says in why, (message, why)
        assert INSTALL in why or "nvidia-cufft" in why
    # the candidate's own header, or one that is here after all (a forged message), stays the candidate's compile error
    assert missing_header(f"{ours}:3:10: fatal error: my_kernels.h: No such file or directory", home, torch_include, {}) == ""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "cusparse.h").write_text("")
    here = f"{light}:10:10: fatal error: cusparse.h: No such file or directory"
    assert missing_header(here, home, torch_include, {"CPLUS_INCLUDE_PATH": str(wheels)}) == ""
    # paths the OS cannot take (the message is the candidate's text) are the candidate's compile error, not an exception
    for bad in (f"{ours}\0x:3:10: fatal error: cusparse.h: No such file or directory",
                f"{light}:10:10: fatal error: cusparse\0.h: No such file or directory",
                f"{'x/' * 5000}a:1:1: fatal error: cusparse.h: No such file or directory"):
        assert missing_header(bad, home, torch_include, {}) in ("", missing_header(bad.replace("\0", ""), home, torch_include, {})), bad


def test_the_judges_headers_come_after_the_command_lines_and_never_shadow_torchs(tmp_path):
    """CPLUS_INCLUDE_PATH folders are searched after every -isystem folder: torch's own generated header (a CUDA
    build's) wins over the judge's stand-in; where torch has none, the stand-in is found."""
    env = header_env()
    dirs = env["CPLUS_INCLUDE_PATH"].split(os.pathsep)
    assert dirs[0] == str(OWN_INCLUDE) and (OWN_INCLUDE / "c10/cuda/impl/cuda_cmake_macros.h").is_file()
    assert (OWN_INCLUDE / "ATen/cuda/CUDAConfig.h").is_file() and dirs[1:] == wheel_include_dirs()
    torch_like = tmp_path / "torch_include" / "ATen" / "cuda"
    torch_like.mkdir(parents=True)
    (torch_like / "CUDAConfig.h").write_text("#define AT_CUDNN_ENABLED() 7\n")
    probe = tmp_path / "probe.cpp"
    probe.write_text("#include <ATen/cuda/CUDAConfig.h>\n#include <c10/cuda/impl/cuda_cmake_macros.h>\nint cudnn = AT_CUDNN_ENABLED();\n"
                     "#ifdef C10_CUDA_BUILD_SHARED_LIBS\nint shared = 1;\n#endif\n")  # fmt: skip
    out = subprocess.run(["c++", "-E", "-P", "-isystem", str(tmp_path / "torch_include"), str(probe)], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    code = "".join(out.stdout.split())
    assert "intcudnn=7;" in code and "intshared=1;" in code  # torch's CUDAConfig.h, the judge's cuda_cmake_macros.h


@needs_nvcc
def test_nvcc_finds_every_header_of_torchs_cuda_context_with_the_judges_paths(tmp_path):
    """What ATen/cuda/CUDAContext.h and c10/cuda/CUDAStream.h include (cusparse.h, cublas_v2.h, cublasLt.h,
    cusolverDn.h, the generated cuda_cmake_macros.h) and curand_kernel.h preprocess; without the paths, a minimal
    toolkit and a CPU wheel of torch stop at the first."""
    dirs = header_env()["CPLUS_INCLUDE_PATH"].split(os.pathsep)
    if not any(os.path.isfile(os.path.join(d, "cusparse.h")) for d in [*dirs, os.path.join(cuda_home(), "include")]):
        pytest.skip(f"the CUDA libraries' headers are not installed ({INSTALL})")
    from torch.utils.cpp_extension import include_paths

    source = tmp_path / "probe.cu"
    source.write_text("#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAStream.h>\n#include <ATen/cuda/cub.h>\n"
                      "#include <curand_kernel.h>\n__global__ void k(float* x) { x[0] = 1.f; }\n")  # fmt: skip
    flags = [f for p in [*include_paths(), os.path.join(cuda_home(), "include")] for f in ("-isystem", p)]
    nvcc = [os.path.join(cuda_home(), "bin", "nvcc"), "-E", "-std=c++17", *flags, str(source), "-o", os.devnull]
    done = subprocess.run(nvcc, capture_output=True, text=True, env={**os.environ, **header_env()}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@needs_nvcc
def test_a_candidate_including_a_cuda_header_this_machine_lacks_is_a_harness_error(tmp_path, checks_pch):
    if any(os.path.isfile(os.path.join(d, "cufftXt.h")) for d in [*wheel_include_dirs(), os.path.join(cuda_home(), "include")]):
        pytest.skip("cuFFT's headers are installed here")
    result = check(tiny_problem(), "cuda_cufft", build_dir=str(tmp_path), pch_dir=checks_pch, timeout=600)
    assert result.outcome is Outcome.HARNESS_ERROR, result.message
    assert result.message.startswith("--device cpu-check: this machine lacks the header cufftXt.h (the candidate includes it)")
    assert "pip install nvidia-cufft" in result.message and "fatal error: cufftXt.h" in result.message  # nvcc's words kept


# --- every bundled CUDA solution, and the prompts' example, as a GPU machine would build them ------


SOLUTIONS = sorted((REPO / "solutions").glob("*/*.cuda.py"))
# Checked with --full only: seven Triton ones slow in Triton's interpreter (52-121 s each for three at -n 2 on this 2-core
# machine, 2026-11-30, their first trial's call being the operator trace: 109-245 s before; 16-39 s for four more, taken
# out of CI again when its run of stop 63 took 841 s of its 900). Every load_inline CUDA one is checked in CI (issue 48):
# their .cu files include no torch header (about 1 s of nvcc), but each binding file costs 5-9 s of CPU even on the
# shared precompiled header (an empty file that includes torch/extension.h: 5.1 s on it, 14.3 s without, on a quiet
# 2-core machine, 2026-12-01): g++ instantiates the header's templates again in every file ("phase lang. deferred", 73%
# of it; -fsyntax-only saves only the code generation). The ten cost CI's 2-core machine 82 s at -n 2 (575 s against
# 493 s, the CPU busy 85% of the time) and nothing at -n 3 (509 s, 94%): CI runs three workers (.ci/run).
FULL_ONLY = ("level3-metr/17_SqueezeNetFireModule.cuda.py", "level1/82_conv_depthwise_2D_square_input_square_kernel.cuda.py",
             "level3-metr/31_VisionAttention.cuda.py", "level3-metr/43_MinGPTCausalAttention.cuda.py",
             "level1/99_TripletMarginLoss.cuda.py", "level1/92_cumsum_exclusive.cuda.py", "level3-metr/50_ReLUSelfAttention.cuda.py")


def _problem_of(path):
    """The problem a bundled solution solves: the bundled folder's, or the KernelBench data's (skipped without it)."""
    level = path.parent.name.removeprefix("level")
    name = path.name.removesuffix(".cuda.py")
    if level == "mini":
        return problem_from_path(REPO / "problems" / "mini" / f"{name}.py")
    files = [SHARED_KB / "problems.jsonl", SHARED_KB / "pike-levels.jsonl"]
    if not all(f.is_file() for f in files):
        pytest.skip(f"level {level} needs the KernelBench data ({SHARED_KB})")
    found = [p for f in files for p in load_jsonl(f) if p.level == level and p.name == name]
    assert len(found) == 1, f"{path}: no problem {level}/{name} in the data"
    return found[0]


@pytest.fixture(scope="session")
def checks_pch(tmp_path_factory) -> str:
    """One shared precompiled torch/extension.h for the session's nvcc checks (the bundled solutions and the prompts'
    example: the same binding flags), in the session's temporary root, which xdist's workers share (conftest.py turns
    the shared header off for every other test)."""
    root = tmp_path_factory.getbasetemp()
    return str((root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "cpu-check-pch")


def _marks(path) -> tuple:
    name, built = f"{path.parent.name}/{path.name}", "load_inline" in path.read_text()
    if name in FULL_ONLY:
        return (pytest.mark.full,)
    return (pytest.mark.slow,) if built else ()  # slow: started first (conftest.py)


@pytest.mark.parametrize("path", [pytest.param(p, id=f"{p.parent.name}/{p.name}", marks=_marks(p)) for p in SOLUTIONS])
def test_every_bundled_gpu_solution_passes_the_cpu_check(path, tmp_path, checks_pch):
    """A CUDA load_inline solution compiles as on a GPU machine (nvcc, every header found); a Triton one matches the
    reference in Triton's interpreter. Either is ``built``."""
    source = path.read_text()
    if "load_inline" in source:  # a bundled .cu includes no torch header: about 1 s of nvcc instead of 30 (CI's time)
        name = re.search(r"cuda_sources=(\w+)", source)
        cuda = name and re.search(rf'^{name.group(1)} = r"""(.*?)"""', source, re.S | re.M)
        assert cuda and not re.search(r'#include\s*[<"](torch|ATen|c10)/', cuda.group(1)), "a torch header in its .cu"
    if "load_inline" in source and not cuda_home():
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    if "triton" in source and importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install -e '.[test]')")
    config = cpu_config(device="cpu-check", build_dir=str(tmp_path), timeout=1200, trials=1, pch_dir=checks_pch)
    result = evaluate(_problem_of(path), load_candidate_file(path), config)
    assert result.outcome is Outcome.BUILT, result.message


@needs_nvcc
@pytest.mark.slow
def test_the_prompts_cuda_example_is_built(tmp_path, checks_pch):
    """The worked example every CUDA prompt shows compiles as on a GPU machine (its headers: c10/cuda/CUDAStream.h)."""
    folder = tmp_path / "level9"
    folder.mkdir()
    (folder / "1_Add.py").write_text(prompts.EXAMPLE_REFERENCE["cuda"] + "\n")
    candidate = Candidate(prompts.EXAMPLE_SOLUTION["cuda"] + "\n", "", "the prompts' example")
    config = cpu_config(device="cpu-check", build_dir=str(tmp_path), timeout=1200, pch_dir=checks_pch)
    result = evaluate(problem_from_path(folder / "1_Add.py"), candidate, config)
    assert result.outcome is Outcome.BUILT, result.message
    # its .cu compiled without the torch/types.h load_inline puts in front (build/light.py): about 30 s less here
    assert result.extra.light_headers == {"light": 1, "fallback": 0}, result.extra.light_headers
    # its binding file on the judge's shared header, whose flags name the toolkit's include folder (CUDA_HOME unset here)
    assert set(result.extra.pch or {}) <= {"built", "used"} and result.extra.pch, result.extra.pch
