"""The build pool and the keyed build cache, end to end through pytest (C++ extensions on CPU)."""

import json
import shutil

import pytest
import torch  # noqa: F401  imported before pytester snapshots sys.modules

from helpers import TINY_PROBLEM, small_build

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]


def samename(op: str) -> str:
    """A candidate whose build step compiles a library into the extension folder ``kb_samename`` (where load_inline
    puts an extension of that name) and whose model applies the library's ``kb_act`` (``op`` of each value) to the
    linear layer's output: relu is the right answer, anything else a wrong one. A plain C function through ctypes,
    built as a torch extension is: the claim is the judge's build keying, not what is compiled (a torch extension
    costs half a minute and more of 2 cores' time)."""
    code = f'extern "C" void kb_act(float* x, long n) {{ for (long i = 0; i < n; ++i) x[i] = {op}; }}'
    header = "import ctypes\n\nimport torch\nimport torch.nn as nn\n"
    return header + small_build("kb_samename", code) + '''_act = ctypes.CDLL(str(_lib)).kb_act


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        y = self.linear(x).contiguous()
        _act(ctypes.c_void_p(y.data_ptr()), ctypes.c_long(y.numel()))
        return y
'''


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "KERNELBENCH_DATASET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")


def _results(path):
    return {r["problem"]: r for r in json.loads(path.read_text())["results"]}


def test_same_extension_name_never_shares_a_build_and_a_rejudge_does_not_compile(pytester):
    problems = pytester.path / "problems" / "level9"
    sols = pytester.path / "sols" / "level9"
    problems.mkdir(parents=True)
    sols.mkdir(parents=True)
    for name, op in (("1_TinyA", "x[i] > 0.f ? x[i] : 0.f"), ("2_TinyB", "x[i] > 0.f ? x[i] : -x[i]")):
        shutil.copy(TINY_PROBLEM, problems / f"{name}.py")
        (sols / f"{name}.py").write_text(samename(op))
    report = pytester.path / "report.json"
    args = [
        "--level", "9", "--dataset", str(problems.parent), "--solutions", str(sols.parent), "--device", "cpu",
        "--trials", "2", "--build-jobs", "2", "--build-cache", str(pytester.path / "cache"),
        "--kb-report", str(report), "-p", "no:cacheprovider", "-p", "no:randomly",
    ]  # fmt: skip

    first = pytester.runpytest_subprocess(*args, timeout=600)
    first.assert_outcomes(passed=1, failed=1)
    results = _results(report)
    # Both call their extension kb_samename: B must be judged on its own (wrong) library, not A's.
    assert results["L9-1_TinyA"]["outcome"] == "correct"
    assert results["L9-2_TinyB"]["outcome"] == "incorrect"
    # B's judge started after A's was done: the pool had built B ahead of it.
    assert results["L9-2_TinyB"]["extra"]["build_cached"] is True
    assert len([p for p in (pytester.path / "cache").iterdir() if p.is_dir() and not p.name.startswith("jit-")]) == 2

    second = pytester.runpytest_subprocess(*args, timeout=600)
    second.assert_outcomes(passed=1, failed=1)
    for result in _results(report).values():
        # cached before the judge began: its runner started beside the reference's (on its own library, as B's verdict shows)
        assert result["extra"]["build_cached"] is True and result["extra"]["runner_early"] is True
