"""Prompts of the four agents (ideas, phase-0 code, improve, fix) for each target language.

Templates are plain text with ``{name}`` fields; code (the reference, examples, candidates) is
only ever inserted as a value, so braces in C++ need no escaping. Every builder returns chat
messages: a system message, then one user message.

Languages: ``cuda`` (load_inline with cuda_sources), ``triton`` (@triton.jit kernels), ``cpp``
(load_inline with cpp_sources only, for CPU runs).
"""

from __future__ import annotations

import dataclasses
import re

from kbagent.llm import Messages
from pytest_kernelbench.tolerance import Tolerance
from pytest_kernelbench.tolerance import parse as parse_tolerance

LANGUAGES = ("cuda", "triton", "cpp")
LOG_CHARS = 10_000  # the fix agent sees at most this much of a failing run's log

REFERENCE_HEADING = "## The reference architecture to optimize"
IDEAS_TASK = "Brainstorm up to"  # what the ideas prompt asks; the scripted reference model keys on it


def default_language(device: str) -> str:
    return "cuda" if device == "cuda" else "cpp"


def normalize_language(name: str | None, device: str) -> str:
    """``None`` -> the device's default; ``c++`` -> ``cpp``; ValueError for others."""
    if name is None or name == "":
        return default_language(device)
    key = name.strip().lower()
    key = {"c++": "cpp", "cxx": "cpp", "cpu": "cpp"}.get(key, key)
    if key not in LANGUAGES:
        raise ValueError(f"unknown language {name!r}: choose one of {', '.join(LANGUAGES)}")
    return key


@dataclasses.dataclass(frozen=True)
class Target:
    """What the candidates are written in and where they run."""

    language: str  # cuda | triton | cpp
    device: str  # cuda | cpu
    # what the outputs are held to: the problem's level's rule (EvalConfig.for_level(level).tol) or the one asked for
    tolerance: Tolerance = dataclasses.field(default_factory=lambda: parse_tolerance("kernelbench"))
    checked: bool = False  # --device cpu-check: judged without a GPU (CUDA compiled only, Triton in its interpreter)
    varied: bool = True  # --inputs varied: trials after the first on other distributions (judge/distributions.py)

    @property
    def language_name(self) -> str:
        return {"cuda": "CUDA", "triton": "Triton", "cpp": "C++ (CPU)"}[self.language]

    @property
    def device_name(self) -> str:
        return "an NVIDIA GPU (CUDA tensors)" if self.device == "cuda" else "the CPU (CPU tensors)"


# ---------------------------------------------------------------------------------------------
# templates

SYSTEM = """\
You are an expert performance engineer. You replace PyTorch operators with custom {language_name} \
kernels that are both correct and faster than PyTorch, and you answer with complete, runnable Python code."""

LANGUAGE_RULES = {
    "cuda": "Write the hot path as CUDA kernels compiled with torch.utils.cpp_extension.load_inline "
    "(cpp_sources holds the C++ declarations, cuda_sources the kernels and their launchers). In cuda_sources "
    "include only the ATen/c10 headers the kernels use (<ATen/core/Tensor.h>, <ATen/ops/<op>.h>, "
    "<c10/cuda/CUDAStream.h>, <ATen/cuda/CUDAContext.h>) and write at:: names: <torch/extension.h> there "
    "makes nvcc parse all of torch, which more than doubles the build time.",
    "triton": "Write the hot path as Triton kernels (@triton.jit) launched from ModelNew.forward.",
    "cpp": "Write the hot path in C++ compiled with torch.utils.cpp_extension.load_inline using cpp_sources only "
    "(no CUDA: this runs on the CPU). ATen's at::parallel_for, OpenMP (-fopenmp) and -O3 are available.",
}

RULES = """\
Rules:
- Define `class ModelNew(nn.Module)` with the same constructor arguments as `Model`, and a `forward` that takes the \
same inputs and returns the same outputs (shapes, dtypes, device), each value within the tolerance the judge holds it to: \
|new - ref| <= atol + rtol * |ref| with {tolerance} (complex values by the modulus of the difference; integer and \
bool outputs must be exact).
- {language_rule}
- The code runs on {device_name}. It is imported as a module and must be self-contained: imports, kernel sources, \
the extension build and ModelNew. Give each extension a unique name. get_inputs and get_init_inputs are not needed.
- Do not read the reference's outputs, cache results between calls, or patch torch, time or the test harness: \
such candidates are rejected.
- Reply with the complete code in a single ```python block."""

IDEAS = """\
{reference_section}

## Task
{ideas_task} {n} distinct ideas for a faster `ModelNew` written with custom {language_name} kernels running on \
{device_name}. Each idea is one or two sentences that name the kernels to write and what makes them fast \
(operator fusion, tiling, shared memory or registers, vectorised loads, fewer passes over memory, algebraic \
rewrites, ...). Do not write code.

Reply with a JSON list of strings: ["first idea", "second idea", ...]"""

CODE = """\
## Example
A reference architecture:
```python
{example_reference}
```
and a `ModelNew` for it with a custom kernel:
```python
{example_solution}
```

{reference_section}

## Idea to implement
{idea}

## Task
Write `ModelNew` for the reference above, implementing the idea.

{rules}"""

IMPROVE = """\
{reference_section}

## {parent_heading}
{parent_facts}
```python
{parent_code}
```
{hints}
## What was tried before in this line
{history}

## Task
{improve_task}

{rules}"""

FIX = """\
{reference_section}

## Your candidate (attempt {attempt} of {max_attempts} to fix it)
```python
{code}
```

## What went wrong
{verdict}
{diffs}
{log_section}
## Task
Fix the candidate so that it compiles, runs and matches the reference, and keep it fast. Find the cause in the \
error above before you change anything.

{rules}"""

REFERENCE_SECTION = """\
{heading}
```python
{source}
```"""

NO_IDEA = "No particular idea: write the fastest correct ModelNew you can."

# ---------------------------------------------------------------------------------------------
# worked examples: a + b

EXAMPLE_REFERENCE = {
    "cuda": """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(4096, 4096).cuda(), torch.randn(4096, 4096).cuda()]


def get_init_inputs():
    return []""",
}
EXAMPLE_REFERENCE["triton"] = EXAMPLE_REFERENCE["cuda"]
EXAMPLE_REFERENCE["cpp"] = EXAMPLE_REFERENCE["cuda"].replace(".cuda()", "")

EXAMPLE_SOLUTION = {
    "cuda": '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
// Only the headers the kernels use (at:: names); <torch/extension.h> here makes nvcc parse all of torch.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAStream.h>

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
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    auto stream = c10::cuda::getCurrentCUDAStream();
    add_kernel<<<blocks, threads, 0, stream>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

add_ext = load_inline(
    name="example_add_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_ext.add_cuda(a, b)''',
    "triton": """\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a + b, mask=mask)


def triton_add(a, b):
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return triton_add(a, b)""",
    "cpp": '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

torch::Tensor add_cpu(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cpu() && b.is_cpu(), "add_cpu: expected CPU tensors");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto out = torch::empty_like(ac);
    const float* pa = ac.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    at::parallel_for(0, ac.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
    });
    return out;
}
"""

add_ext = load_inline(
    name="example_add_cpu",
    cpp_sources=cpp_source,
    functions=["add_cpu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_ext.add_cpu(a, b)''',
}

OUTCOME_MEANING = {
    "compile_error": "importing the module failed (a Python error, or the extension did not build)",
    "init_error": "ModelNew(*get_init_inputs()) raised an error",
    "runtime_error": "ModelNew.forward raised an error or crashed",
    "incorrect": "ModelNew's outputs differ from the reference's",
    "timeout": "the candidate ran past the time limit (a hang, or far too slow)",
    "rejected": "the judge rejected the candidate",
    "unknown_error": "the run ended without a verdict",
    "harness_error": "the judge itself failed (not this candidate's fault); it may be judged again",
    "built": "it passed the check without a GPU (compiled, or matched the reference on the CPU); not timed",
}

# ---------------------------------------------------------------------------------------------
# builders


def _fill(template: str, **values: object) -> str:
    return template.format(**values)


def _messages(target: Target, user: str) -> Messages:
    return [
        {"role": "system", "content": _fill(SYSTEM, language_name=target.language_name)},
        {"role": "user", "content": user.strip() + "\n"},
    ]


CPU_CHECK_RULE = """
- There is no GPU here yet: each candidate is checked without one. CUDA sources are compiled with nvcc and not run; Triton \
kernels run in Triton's interpreter on CPU tensors, at smaller sizes than the reference's constants: size nothing by hand \
and allocate like the inputs (torch.empty_like, device=x.device), never on a named device."""


VARIED_RULE = """
- Correctness is checked on the problem's own inputs and then on other values of the same shapes and dtypes (scaled \
up, shifted, uniform, with special values such as zeros, ties and subnormals, small integers): compute what \
the reference computes for any inputs, not for get_inputs()'s distribution alone."""


IEEE_FLOAT32_RULE = """
- Float32 is held closer than TF32 computes: both the reference and your code run with TF32 off (cuDNN and cuBLAS \
compute float32 at full precision); keep float32 arithmetic in float32 (no TF32, float16 or bfloat16 tensor-core \
shortcuts for float32 data)."""


def _rules(target: Target) -> str:
    rules = _fill(RULES, tolerance=target.tolerance.describe(), language_rule=LANGUAGE_RULES[target.language],
                  device_name=target.device_name)
    ieee = IEEE_FLOAT32_RULE if target.tolerance.wants_ieee_float32 else ""
    return rules + ieee + (VARIED_RULE if target.varied else "") + (CPU_CHECK_RULE if target.checked else "")


def reference_section(source: str) -> str:
    return _fill(REFERENCE_SECTION, heading=REFERENCE_HEADING, source=source.strip("\n"))


def ideas_messages(source: str, n: int, target: Target) -> Messages:
    """The brainstorm: up to ``n`` ideas as a JSON list, no code."""
    user = _fill(
        IDEAS,
        reference_section=reference_section(source),
        ideas_task=IDEAS_TASK,
        n=n,
        language_name=target.language_name,
        device_name=target.device_name,
    )
    return _messages(target, user)


def code_messages(source: str, idea: str | None, target: Target) -> Messages:
    """Phase 0: one candidate for one idea, after a worked load_inline (or Triton) example."""
    user = _fill(
        CODE,
        example_reference=EXAMPLE_REFERENCE[target.language],
        example_solution=EXAMPLE_SOLUTION[target.language],
        reference_section=reference_section(source),
        idea=idea or NO_IDEA,
        rules=_rules(target),
    )
    return _messages(target, user)


@dataclasses.dataclass
class ParentView:
    """What the improve agent is told about its parent."""

    id: str
    code: str
    outcome: str | None  # None: not evaluated (dry run)
    speedup: float | None = None
    ref_ms: float | None = None
    new_ms: float | None = None
    device_name: str = ""
    stage: str = ""
    message: str = ""
    aten_ops: dict[str, int] = dataclasses.field(default_factory=dict)
    kernels: list[tuple[str, float, int]] = dataclasses.field(default_factory=list)  # (name, device us, launches), longest first


def _ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "? ms"


def kernel_table(kernels: list[tuple[str, float, int]], rows: int = 12) -> str:
    """Where one call's device time goes (torch.profiler, GPU runs only), as a Markdown table; "" without a profile."""
    if not kernels:
        return ""
    total = sum(us for _, us, _ in kernels) or 1.0
    lines = ["", "Where one call's GPU time goes (torch.profiler, per kernel):", "", "| kernel | time (us) | share | launches |",
             "| --- | ---: | ---: | ---: |"]  # fmt: skip
    for name, us, launches in kernels[:rows]:
        short = name if len(name) <= 90 else name[:87] + "..."
        lines.append(f"| `{short}` | {us:.1f} | {us / total:.0%} | {launches} |")
    if len(kernels) > rows:
        rest = sum(us for _, us, _ in kernels[rows:])
        lines.append(f"| {len(kernels) - rows} more | {rest:.1f} | {rest / total:.0%} | |")
    return "\n".join(lines) + "\n"


def first_line(text: str, limit: int = 240) -> str:
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not line.startswith("---"):
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def improve_messages(source: str, parent: ParentView, history: list[str], target: Target, ideas: list[str] | None = None) -> Messages:
    """Phases 1..n: a faster version of ``parent``, told its runtime, speedup and what failed before."""
    where = f" on {parent.device_name}" if parent.device_name else ""
    hints = ""
    if parent.outcome == "correct":
        heading = f"Current candidate ({parent.id}): correct"
        facts = (
            f"Measured{where}: reference {_ms(parent.ref_ms)}, this candidate {_ms(parent.new_ms)}, speedup {parent.speedup:.3f}x."
            if parent.speedup is not None
            else "Correct."
        )
        task = (
            "Write a faster ModelNew than this candidate. Keep what makes it correct; attack where the time goes "
            "(fuse more operators, fewer passes over memory, better tiling and memory access, less launch overhead)."
        )
        if parent.aten_ops:
            ops = ", ".join(f"{op} x{count}" for op, count in sorted(parent.aten_ops.items(), key=lambda kv: -kv[1])[:12])
            hints = f"\nPyTorch operators its forward still dispatches (candidates for custom kernels): {ops}\n"
        hints += kernel_table(parent.kernels)
    elif parent.outcome == "built":  # --device cpu-check: compiled, or matched on the CPU; never timed
        heading = f"Current candidate ({parent.id}): passed the check without a GPU"
        facts = f"{first_line(parent.message)} Its speed is not known."
        task = "Write a faster ModelNew than this candidate; keep what makes it build and match the reference."
    elif parent.outcome is None:
        heading = f"Current candidate ({parent.id}): not evaluated (dry run)"
        facts = "Its speed is not known."
        task = "Write a faster ModelNew than this candidate."
    else:
        heading = f"Best candidate so far ({parent.id}): it does not work yet"
        said = first_line(parent.message) or OUTCOME_MEANING.get(parent.outcome, "")
        facts = f"Outcome: {parent.outcome} (stage {parent.stage or '-'}): {said}"
        task = "Make this candidate correct first, then fast: write a ModelNew that matches the reference and beats it."
    if ideas:
        task += "\nIdeas from the brainstorm you may use or combine:\n" + "\n".join(f"- {idea}" for idea in ideas)
    user = _fill(
        IMPROVE,
        reference_section=reference_section(source),
        parent_heading=heading,
        parent_facts=facts,
        parent_code=parent.code.strip("\n"),
        hints=hints,
        history="\n".join(f"- {line}" for line in history) if history else "- nothing yet",
        improve_task=task,
        rules=_rules(target),
    )
    return _messages(target, user)


_DIFF = re.compile(r"(output(?: \d+)?): (.*?)\(max abs diff ([^)]+)\)")


def output_differences(message: str) -> list[str]:
    """``output 1: max abs diff 0.53 (...)`` lines from a judge's message about wrong values."""
    found = []
    for where, what, diff in _DIFF.findall(message or ""):
        found.append(f"{where}: max abs diff {diff.strip()} ({what.strip().rstrip(',')})")
    return found


def split_log(message: str) -> tuple[str, str]:
    """(the judge's verdict, the log tail) of an EvalResult message."""
    verdict, sep, log = (message or "").partition("--- log tail ---")
    return verdict.strip(), log.strip("\n") if sep else ""


def fix_messages(
    source: str,
    code: str,
    *,
    outcome: str,
    stage: str,
    message: str,
    max_abs_diff: float | None,
    attempt: int,
    max_attempts: int,
    target: Target,
    log_chars: int = LOG_CHARS,
) -> Messages:
    """A repair: the failing code, the stage and outcome, the per-output differences or the log's end."""
    verdict, log = split_log(message)
    meaning = OUTCOME_MEANING.get(outcome, "")
    lines = [f"Outcome: {outcome} at stage '{stage or '-'}': {meaning}."]
    if verdict:
        lines.append(f"The judge says: {verdict}")
    diffs = ""
    if outcome == "incorrect":
        found = output_differences(verdict)
        if max_abs_diff is not None and not found:
            found = [f"largest abs difference seen: {max_abs_diff:.4g}"]
        if found:
            diffs = f"Per-output differences (tolerance: {target.tolerance.describe()}):\n"
            diffs += "\n".join(f"- {d}" for d in found) + "\n"
    log_section = ""
    if log.strip():
        tail = log[-log_chars:]
        cut = f"last {len(tail)} of {len(log)} characters" if len(log) > len(tail) else "complete"
        log_section = f"Log of the failing run ({cut}):\n```text\n{tail}\n```\n"
    user = _fill(
        FIX,
        reference_section=reference_section(source),
        attempt=attempt,
        max_attempts=max_attempts,
        code=code.strip("\n"),
        verdict="\n".join(lines),
        diffs=diffs,
        log_section=log_section,
        rules=_rules(target),
    )
    return _messages(target, user)


# ---------------------------------------------------------------------------------------------
# reading prompts back (the scripted models)

_FENCED_AFTER_HEADING = re.compile(re.escape(REFERENCE_HEADING) + r"\s*\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def reference_from_prompt(text: str) -> str | None:
    """The reference source a prompt built here carries, or None."""
    match = _FENCED_AFTER_HEADING.search(text or "")
    return match["code"] + "\n" if match else None


def is_ideas_prompt(text: str) -> bool:
    return IDEAS_TASK in (text or "") and "Reply with a JSON list" in (text or "")
