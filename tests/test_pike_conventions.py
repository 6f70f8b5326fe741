"""PIKE's conventions (issue 17): --ref-mode eval|train on both sides, by level unless given; --mode with
inductor modes and tensorrt; baseline files that name the mode."""

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from helpers import DATA, TINY_PROBLEM, cpu_config
from kbagent.cli import app
from pytest_kernelbench.candidates import baseline_candidate, load_candidate_file
from pytest_kernelbench.config import EvalConfig, compile_mode, default_ref_mode
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.judge import runner
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import problem_from_path
from pytest_kernelbench.report.baselines import EAGER_FILE, baseline_file, write_baseline_files
from pytest_kernelbench.report.writer import ReportWriter
from pytest_kernelbench.result import EvalResult, TimingStats

CHECK = DATA / "cpu_check"
CONV_BN = CHECK / "level3-metr" / "1_ConvBN.py"  # a PIKE level: eval mode unless told otherwise
FOLDED = CHECK / "candidates" / "ConvBN_folded.py"  # BatchNorm folded with its running statistics
NO_TENSORRT = importlib.util.find_spec("torch_tensorrt") is None


def test_ref_mode_defaults_to_each_projects_convention_and_an_explicit_one_wins():
    assert [default_ref_mode(level) for level in ("0", "3-metr", "5", "1", "3", "file")] == ["eval"] * 3 + ["train"] * 3
    assert EvalConfig().for_level("3-metr").ref_mode == "eval"
    assert EvalConfig(ref_mode="train").for_level("3-metr").ref_mode == "train"
    with pytest.raises(KernelBenchUsageError, match="--ref-mode"):
        EvalConfig(ref_mode="inference")


def test_a_batchnorm_folding_candidate_is_correct_in_eval_mode_only():
    problem, folded = problem_from_path(CONV_BN), load_candidate_file(FOLDED)
    assert problem.level == "3-metr"
    by_level = evaluate(problem, folded, cpu_config())  # no --ref-mode: PIKE's level judges in eval mode
    assert by_level.outcome is Outcome.CORRECT, by_level.message
    assert by_level.ref_mode == "eval" and by_level.to_dict()["ref_mode"] == "eval"
    train = evaluate(problem, folded, cpu_config(ref_mode="train"))  # KernelBench's way: batch statistics
    assert train.outcome is Outcome.INCORRECT and train.ref_mode == "train"
    assert "values outside" in train.message


def test_compile_modes_name_inductor_modes_and_reach_torch_compile(monkeypatch):
    assert [compile_mode(m) for m in ("eager", "compile", "compile:max-autotune", "compile:reduce-overhead", "tensorrt")] == [
        "", "default", "max-autotune", "reduce-overhead", "tensorrt"]  # fmt: skip
    for bad in ("compile:fast", "inductor"):
        with pytest.raises(KernelBenchUsageError, match="choose eager, compile"):
            EvalConfig(mode=bad)
    seen = []

    class FakeTorch:
        @staticmethod
        def compile(model, **kwargs):
            seen.append(kwargs)
            return model

    runner._compiled(FakeTorch, object(), "max-autotune")
    runner._compiled(FakeTorch, object(), "default")
    assert seen == [{"mode": "max-autotune"}, {"mode": None}]


def test_baseline_json_names_the_inductor_mode(tmp_path):
    def judged(name, pid, mode):
        r = EvalResult(problem=name, level="1", problem_id=pid, outcome=Outcome.CORRECT, mode=mode, device="cuda:0", device_name="H100")
        r.ref, r.new = TimingStats.from_samples([1.0, 1.2]), TimingStats.from_samples([2.0, 2.2])
        return r

    writer = ReportWriter(tmp_path / "r.json", {"solutions": "baseline", "mode": "compile:max-autotune"}, {})
    for r in (judged("L1-19_ReLU", 19, "compile:max-autotune"), judged("L1-20_LeakyReLU", 20, "compile")):
        writer.add(r)
    writer.close()
    written = {p.name for p in write_baseline_files([tmp_path / "r.json"], tmp_path / "out", "H100")}
    assert written == {f"H100_{EAGER_FILE}", "H100_baseline_time_torch_compile_inductor_max-autotune.json",
                       "H100_baseline_time_torch_compile_inductor_default.json"}  # fmt: skip
    tuned = json.loads((tmp_path / "out" / "H100_baseline_time_torch_compile_inductor_max-autotune.json").read_text())
    assert list(tuned["level1"]) == ["19_ReLU.py"] and tuned["level1"]["19_ReLU.py"]["mean"] == pytest.approx(1.1)
    assert baseline_file("tensorrt") == "baseline_time_torch_compile_tensorrt.json"


@pytest.mark.skipif(not NO_TENSORRT, reason="torch-tensorrt is installed here")
def test_tensorrt_without_torch_tensorrt_is_skipped_with_the_reason(pytester, monkeypatch):
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    args = ["--level", "9", "--dataset", str(DATA / "tiny"), "--mode", "tensorrt", "-rs", "-p", "no:cacheprovider"]
    run = pytester.runpytest_subprocess(*args)
    run.stdout.fnmatch_lines(["*SKIPPED*--mode tensorrt needs torch-tensorrt, which is not installed*", "*1 skipped*"])
    cli = CliRunner().invoke(app, ["eval", str(TINY_PROBLEM), str(TINY_PROBLEM), "--mode", "tensorrt", "--json"])
    assert cli.exit_code == 2 and "needs torch-tensorrt" in cli.output
    tiny = problem_from_path(TINY_PROBLEM)  # any other caller of the judge: no verdict, the reason, no process started
    result = evaluate(tiny, baseline_candidate(tiny), cpu_config(mode="tensorrt"))
    assert result.outcome is Outcome.HARNESS_ERROR and result.extra.skipped == result.message and result.wall_seconds == 0
