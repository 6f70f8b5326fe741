"""BackendBench-style op suites (``--suite smoke|opinfo``): samples, generated sources, scores, and whole runs."""

import importlib.util
import json
import math
import types
import xml.etree.ElementTree as ET

import pytest
import torch  # imported before pytester snapshots sys.modules: torch must not be imported twice

from helpers import small_build
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.report.summary import fast_p
from pytest_kernelbench.result import EvalResult, TimingStats
from pytest_kernelbench.suites import codegen
from pytest_kernelbench.suites.backend_dir import AtenBackend, DirectoryBackend, Implementation, backend_for
from pytest_kernelbench.suites.base import DType, OpSample, OpTask, TensorSpec
from pytest_kernelbench.suites.run import combine, evaluate_op
from pytest_kernelbench.suites.scores import scores, suite_scores
from pytest_kernelbench.suites.smoke import smoke_suite

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

RELU_OK = "import torch\n\n\ndef relu_kernel_impl(x):\n    return torch.where(x > 0, x, torch.zeros_like(x))\n"
ADD_WRONG = "def add__Tensor_kernel_impl(a, b, alpha=1):\n    return a - alpha * b\n"
# Built as a load_inline extension is (the build step compiles it; the judged runner loads the build, read-only), but
# without torch's headers: a plain C++ function through ctypes. What is compiled does not matter to whether it is built once.
RELU_CPP = "import ctypes\n\nimport torch\n" + small_build(
    "kb_test_suite_relu_cpp",
    'extern "C" void relu_cpp(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f; }',
) + '''_relu = ctypes.CDLL(str(_lib)).relu_cpp


def relu_kernel_impl(x):
    xc = x.contiguous()
    out = torch.empty_like(xc)
    _relu(ctypes.c_void_p(xc.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_long(xc.numel()))
    return out
'''


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "KERNELBENCH_DATASET"):
        monkeypatch.delenv(name, raising=False)


def backend_dir(root, files):
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def judged(outcome=Outcome.CORRECT, speedup=None, message=""):
    r = EvalResult(problem="p", level="smoke", problem_id=0, outcome=outcome, message=message, speedup=speedup)
    if speedup is not None:
        r.ref, r.new = TimingStats.from_samples([speedup]), TimingStats.from_samples([1.0])
    return r


# ---------------------------------------------------------------- scores


def test_scores_follow_backendbench_definitions():
    entries = [
        {"suite": "smoke", "correct": True, "performance": 2.0},
        {"suite": "smoke", "correct": True, "performance": 0.5},
        {"suite": "smoke", "correct": False, "performance": 1.0},  # a failed op counts 1.0
        {"suite": "smoke", "correct": True, "performance": 1.2},
    ]
    got = scores(entries)
    assert got["ops"] == 4 and got["correct_ops"] == 3
    assert got["correctness_score"] == 0.75
    assert got["performance_score"] == pytest.approx((2.0 * 0.5 * 1.0 * 1.2) ** 0.25)
    assert got["perf_at_p"] == {"perf@1": 0.5, "perf@1.5": 0.25, "perf@2": 0.0}  # strictly above p, and correct
    assert scores([]) is None
    kernel_result = judged(speedup=3.0)  # a KernelBench item is no op: no scores
    assert suite_scores([kernel_result]) is None


def test_a_failed_performance_sample_counts_one_and_fails_the_item_but_not_correctness():
    task = OpTask("aten.relu.default", (OpSample((TensorSpec((2,)),)),), (OpSample((TensorSpec((8,)),)), OpSample((TensorSpec((9,)),))))
    impl = Implementation(task.op, "/d/relu/relu_implementation.py", "relu_kernel_impl")
    result = combine(task, "smoke", 0, impl, judged(), [judged(speedup=4.0), judged(Outcome.REJECTED, 9.0, "bad")])
    entry = result.extra.op_suite
    assert entry["correct"] is True and entry["performance"] == pytest.approx(2.0)  # sqrt(4.0 * 1.0)
    assert [s["speedup"] for s in entry["samples"]] == [4.0, 1.0]
    assert result.outcome is Outcome.REJECTED and "performance sample 1 (T[9] float32): bad" in result.message
    assert result.speedup is None and result.problem == "relu.default"


def test_perf_at_p_counts_a_noisy_gain_as_fast_p_does():
    """An op whose only timed sample is 1.8x with a 95% interval of 0.9-3.6 counts in perf@1 no more than in fast_1; its
    performance score (a mean, not a claim) keeps 1.8."""
    task = OpTask("aten.relu.default", (OpSample((TensorSpec((2,)),)),), (OpSample((TensorSpec((8,)),)),))
    impl = Implementation(task.op, "/d/relu/relu_implementation.py", "relu_kernel_impl")
    noisy, steady = judged(speedup=1.8), judged(speedup=1.8)
    noisy.extra.speedup_noisy, noisy.extra.speedup_interval = True, [0.9, 3.6]
    steady.extra.speedup_noisy, steady.extra.speedup_interval = False, [1.7, 1.9]
    ops = [combine(task, "smoke", i, impl, judged(), [timed]) for i, timed in enumerate((noisy, steady))]
    entries = [op.extra.op_suite for op in ops]
    assert [e["samples"][0]["noisy"] for e in entries] == [True, False]
    assert [e["claimable_performance"] for e in entries] == [pytest.approx(0.9), pytest.approx(1.8)]
    got = suite_scores(ops)
    assert got["perf_at_p"]["perf@1"] == 0.5 == fast_p([noisy, steady], 1.0)  # the steady one only, in both
    assert got["perf_at_p"]["perf@1.5"] == 0.5 == fast_p([noisy, steady], 1.5)
    assert got["performance_score"] == pytest.approx(1.8)
    two = combine(task, "smoke", 0, impl, judged(), [noisy, judged(speedup=4.0)])  # several samples: each its own claim
    assert two.extra.op_suite["claimable_performance"] == pytest.approx((0.9 * 4.0) ** 0.5)
    assert two.extra.op_suite["performance"] == pytest.approx((1.8 * 4.0) ** 0.5)


def test_an_op_failing_a_correctness_sample_is_not_timed_and_its_message_names_the_sample():
    task = smoke_suite().tasks[1]  # add.Tensor: three correctness samples, one timed
    calls = []

    def judge(problem, candidate, timed):
        calls.append((problem.name, timed, candidate.source))
        return judged(Outcome.INCORRECT, message="trial 2/5: output 2: 6 of 6 values outside atol=0.01 rtol=0.01")

    result = evaluate_op(task, "smoke", 1, AtenBackend().find(task), judge)
    assert [(name, timed) for name, timed, _ in calls] == [("add.Tensor-correctness", False)]
    assert result.extra.op_suite["correct"] is False and result.extra.op_suite["performance"] == 1.0
    listing = result.message.splitlines()
    assert listing[0].startswith("aten.add.Tensor, correctness samples: trial 2/5: output 2")
    assert listing[2] == "  sample 2: (T[2, 3] float32, T[2, 3] float32, alpha=2)"  # the failing sample first


# ---------------------------------------------------------------- generated sources


def _module(source, name):
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def test_generated_problem_and_candidate_call_the_op_on_every_sample(tmp_path):
    cat = [OpSample(([TensorSpec((2, 3)), TensorSpec((1, 3))],), (("dim", 0),))]
    summed = [OpSample((TensorSpec((4, 5), "float32", 0.5, 2.0), [1]), (("keepdim", True), ("dtype", DType("float64"))))]
    problem = _module(codegen.problem_source("aten.cat.default", cat, "correctness", 0), "p_cat")
    inputs = problem.get_inputs()
    assert problem.get_init_inputs() == [0] and [tuple(t.shape) for t in inputs] == [(2, 3), (1, 3)]
    (out,) = problem.Model(0)(*inputs)
    assert torch.equal(out, torch.cat(inputs, dim=0))
    aten = _module(codegen.candidate_source(AtenBackend().find(OpTask("aten.cat.default", (), ())), [cat]), "c_cat")
    assert torch.equal(aten.ModelNew(0)(*inputs)[0], out)

    problem = _module(codegen.problem_source("aten.sum.dim_IntList", summed, "performance sample 0", 1), "p_sum")
    (x,) = problem.get_inputs()
    assert x.min() >= 0.5 and x.max() < 2.0  # the sample's range
    impl = tmp_path / "sum__dim_IntList" / "sum__dim_IntList_implementation.py"
    impl.parent.mkdir()
    impl.write_text("def sum__dim_IntList_kernel_impl(x, dims, keepdim=False, dtype=None):\n    return x.to(dtype).sum(dims, keepdim)\n")
    found = DirectoryBackend(tmp_path).find(OpTask("aten.sum.dim_IntList", (), ()))
    candidate = codegen.candidate_source(found, [[], summed])  # the sample set ModelNew(1) runs
    module_file = tmp_path / "run" / "kb_candidate.py"  # the runner writes the candidate into its scratch folder
    module_file.parent.mkdir()
    module_file.write_text(candidate)
    spec = importlib.util.spec_from_file_location("kb_candidate_sum", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (got,) = module.ModelNew(1)(x)
    assert got.dtype == torch.float64 and torch.allclose(got, problem.Model(1)(x)[0])
    assert (module_file.parent / "sum__dim_IntList_implementation.py").read_text() == impl.read_text()
    assert codegen.literal(float("-inf"), []) == "float('-inf')" and codegen.literal((1,), []) == "(1, )"


def test_the_directory_layout_is_backendbenchs(tmp_path):
    root = backend_dir(tmp_path, {
        "add/add_implementation.py": "def add_kernel_impl(a, b, alpha=1): ...\n",
        "add__Tensor/add__Tensor_implementation_v2.py": "def add__Tensor_kernel_impl(a, b, alpha=1): ...\n",
        "add__Tensor/add__Tensor_implementation_v1.py": "def add__Tensor_kernel_impl(a, b, alpha=1): ...\n",
        "relu/relu_implementation.py": RELU_OK,
        "relu/notes.py": "",
    })
    tasks = {t.name: t for t in smoke_suite().tasks}
    backend = backend_for(str(root))
    add = backend.find(tasks["add.Tensor"])
    assert add.path.endswith("add__Tensor_implementation_v1.py") and add.function == "add__Tensor_kernel_impl"
    relu = backend.find(tasks["relu.default"])
    assert relu.function == "relu_kernel_impl" and relu.source == RELU_OK
    assert backend.find(tasks["mm.default"]) is None
    assert backend.looked_for(tasks["mm.default"]) == [str(root / "mm__default" / "mm__default_implementation*.py"),
                                                       str(root / "mm" / "mm_implementation*.py")]  # fmt: skip
    assert isinstance(backend_for("aten"), AtenBackend) and isinstance(backend_for(None), AtenBackend)
    with pytest.raises(KernelBenchUsageError, match="--backend-dir nowhere: no such folder"):
        backend_for("nowhere")
    with pytest.raises(KernelBenchUsageError, match="--ops nope: not an op of the smoke suite"):
        smoke_suite().select(["relu", "nope"])
    assert [t.name for t in smoke_suite().select(["relu", "aten.add.Tensor", "sum.dim_IntList"])] == [
        "relu.default", "add.Tensor", "sum.dim_IntList"]  # fmt: skip


# ---------------------------------------------------------------- OpInfo samples


class FakeOpInfo:
    """The parts of an OpInfo the suite reads."""

    def __init__(self, name, op, samples, domain=(None, None)):
        self.name, self.op, self._samples, self.domain = name, op, samples, domain

    def supported_dtypes(self, device):
        return {torch.float32}

    def sample_inputs(self, device, dtype):
        return [types.SimpleNamespace(input=s[0], args=s[1], kwargs=s[2]) for s in self._samples]


def test_opinfo_keeps_the_samples_that_dispatch_exactly_one_aten_op():
    from collections import Counter

    from pytest_kernelbench.suites import opinfo

    x = torch.randn(3, 4)
    infos = [
        FakeOpInfo("relu", torch.relu, [(x, (), {}), (x[0], (), {})]),
        FakeOpInfo("relu_plus_one", lambda t: torch.relu(t) + 1, [(x, (), {})]),  # two ATen ops
        FakeOpInfo("gather", torch.gather, [(x, (1, torch.zeros(3, 1, dtype=torch.long)), {})]),  # an index tensor
        FakeOpInfo("ones_like", torch.ones_like, [(x, (), {"device": torch.device("cpu")})]),  # a device argument
        FakeOpInfo("relu_", torch.relu_, [(x.clone(), (), {})]),  # mutates its input
        FakeOpInfo("cholesky", torch.ops.aten.cholesky.default, [(torch.eye(3) * 2, (), {})]),  # raises on random matrices
        FakeOpInfo("log", torch.log, [(x.abs() + 1, (), {})], domain=(0, None)),
    ]
    skipped = Counter()
    found = opinfo.collect(infos, "cpu", "float32", skipped)
    assert sorted(found) == ["aten.log.default", "aten.relu.default"]
    in_range = {"dtype": "float32", "low": -9.0, "high": 9.0}
    assert [s.args for s in found["aten.relu.default"]] == [(TensorSpec((3, 4), **in_range),), (TensorSpec((4,), **in_range),)]
    assert found["aten.log.default"][0].args[0].low == pytest.approx(0.01)  # inside the OpInfo's domain
    assert skipped == {
        "the call dispatches more or fewer than one ATen op": 1,
        "a tensor that is not a strided floating-point one": 1,
        "an argument that is not a tensor or a Python literal": 1,
        "a random, mutating or non-ATen op": 1,
        "the ATen op raised on random values in range": 1,
    }


def test_opinfo_suite_from_pytorchs_database():
    pytest.importorskip("expecttest", reason="PyTorch's OpInfo database imports expecttest")
    from pytest_kernelbench.suites import opinfo

    suite = opinfo.opinfo_suite("cpu", "float32", ["add"])
    (task,) = suite.select(["add.Tensor"])
    assert len(task.correctness) >= 5 and task.performance == (max(task.correctness, key=lambda s: s.numel),)
    for sample in task.correctness:  # each, made afresh and called as torch.add, is one aten.add.Tensor
        args, kwargs = opinfo.materialize(sample.args), {k: opinfo.materialize(v) for k, v in sample.kwargs}
        with opinfo._Tracer() as tracer:
            torch.add(*args, **kwargs)
        assert [str(op) for op in tracer.ops] == ["aten.add.Tensor"]


# ---------------------------------------------------------------- whole runs


def test_smoke_suite_judges_a_backend_dir_from_an_empty_folder(pytester):
    ops = backend_dir(pytester.path / "ops", {"relu/relu_implementation.py": RELU_OK,
                                              "add__Tensor/add__Tensor_implementation.py": ADD_WRONG})  # fmt: skip
    report, junit = pytester.path / "kb.json", pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess("--suite", "smoke", "--ops", "relu,add,mul", f"--backend-dir={ops}", "-rs", "-p",
                                           "no:cacheprovider", f"--kb-report={report}", f"--junitxml={junit}")  # fmt: skip
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "kernelbench: smoke suite, 3 ops (8 correctness samples, float32), implementations: *ops*, tolerance: backendbench",
        "*add.Tensor: incorrect (stage compare)*",
        "*aten.add.Tensor, correctness samples: trial 1/5: output 0:*",
        "*op correctness score*0.50 (1/2 ops)*",
        "*no implementation of aten.mul.Tensor (looked for *mul__Tensor_implementation*.py*",
    ])  # fmt: skip
    data = json.loads(report.read_text())
    rows = {r["problem"]: r for r in data["results"]}
    assert rows["relu.default"]["outcome"] == "correct" and rows["relu.default"]["extra"]["sandbox"]
    assert rows["relu.default"]["tolerance"]["name"] == "backendbench" and rows["relu.default"]["tolerance"]["float32"] == [0.01, 0.01]
    relu = rows["relu.default"]["extra"]["op_suite"]
    assert relu["implementation"].endswith("relu_implementation.py")
    assert relu["performance"] == pytest.approx(rows["relu.default"]["speedup"])
    summary = data["summary"]["op_suite"]
    assert summary["correctness_score"] == 0.5 and summary["performance_score"] == pytest.approx(math.sqrt(relu["performance"]))
    assert data["options"]["suite"] == "smoke" and data["options"]["backend_dir"] == str(ops)
    xml = ET.parse(junit).getroot()
    suite_props = {p.get("name"): p.get("value") for p in xml.find("testsuite").find("properties").iter("property")}
    assert float(suite_props["kb_correctness_score"]) == 0.5 and suite_props["kb_ops"] == "2"
    item_props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in xml.iter("testcase")}
    assert item_props["test_op[add.Tensor]"]["correct"] == "False" and item_props["test_op[add.Tensor]"]["performance"] == "1.0"
    assert item_props["test_op[relu.default]"]["tolerance"] == "backendbench"


def test_opinfo_suite_judges_pytorch_against_itself(pytester):
    pytest.importorskip("expecttest", reason="PyTorch's OpInfo database imports expecttest")
    result = pytester.runpytest_subprocess("--suite", "opinfo", "--ops", "relu", "--backend-dir", "aten", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "kernelbench: opinfo suite, 1 ops (* correctness samples, float32), implementations: aten*",
        "*test_op[[]relu.default[]] PASSED*",
        "*op correctness score*1.00 (1/1 ops)*",
    ])  # fmt: skip


def test_suite_options_that_do_not_fit_are_one_line_errors(pytester):
    result = pytester.runpytest_subprocess("--suite", "smoke", "--level", "mini")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["ERROR: --suite judges ATen ops, not KernelBench problems: leave out --level*"])
    result = pytester.runpytest_subprocess("--ops", "relu")
    result.stderr.fnmatch_lines(["ERROR: --ops, --backend-dir and --op-dtype go with --suite smoke|opinfo*"])


def test_a_cpp_implementation_is_built_once_for_all_of_its_evaluations(pytester):
    ops = backend_dir(pytester.path / "ops", {"relu/relu_implementation.py": RELU_CPP})
    report = pytester.path / "kb.json"
    result = pytester.runpytest_subprocess("--suite", "smoke", f"--backend-dir={ops}", "-p", "no:cacheprovider", f"--kb-report={report}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*5 ops of the suite have no implementation in *ops: left out*"])
    (row,) = json.loads(report.read_text())["results"]
    assert row["extra"]["build_cached"] is True  # the timed evaluation found the correctness evaluation's build
