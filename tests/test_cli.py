"""``kbagent eval``: the one-pair judge that agents and RL environments call."""

import json
import os
import subprocess
import sys

import pytest

from helpers import BROKEN, TESTS, TINY_PROBLEM
from pytest_kernelbench.result import EvalResult, rewarded_speedup


def kbagent(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kbagent.cli", *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize(("name", "outcome", "rc"), [("correct", "correct", 0), ("incorrect", "incorrect", 1)])
def test_eval_json_prints_exactly_one_object(name, outcome, rc):
    proc = kbagent("eval", str(TINY_PROBLEM), str(BROKEN / f"{name}.py"), "--device", "cpu", "--json", "--trials", "2")
    assert proc.returncode == rc, proc.stderr
    data = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    assert isinstance(data, dict) and data["outcome"] == outcome
    for key in ("outcome", "speedup", "reward", "message", "ref_ms", "new_ms"):
        assert key in data
    if outcome == "correct":
        assert data["speedup"] > 0 and data["ref_ms"] > 0 and data["new_ms"] > 0
        assert data["reward"] == pytest.approx(rewarded_speedup(EvalResult.from_dict(data)) - 1)  # a noisy gain pays nothing
    else:
        assert data["reward"] == -2 and data["speedup"] is None and "outside atol" in data["message"]
    assert data["tolerance"]["name"] == "kernelbench" and data["tolerance"]["float16"] == [0.01, 0.01]  # level 9: KernelBench's


def test_a_judge_option_not_given_is_taken_from_its_environment_variable_and_a_bad_one_is_one_line(monkeypatch):
    """KB_PROCESS_PAIRS and KB_MAX_TIME (what this suite sets to 1 and 0.5): taken from the environment, the option given
    wins over them."""
    from pytest_kernelbench.config import env_values
    from pytest_kernelbench.errors import KernelBenchUsageError

    monkeypatch.setenv("KB_PROCESS_PAIRS", "2")
    monkeypatch.setenv("KB_MAX_TIME", "0.3")
    assert env_values({"trials": 2}) == {"trials": 2, "process_pairs": 2, "max_time": 0.3}
    assert env_values({"process_pairs": 1, "max_time": 1.0}) == {"process_pairs": 1, "max_time": 1.0}
    args = ["eval", str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--device", "cpu", "--json", "--trials", "1"]
    proc = kbagent(*args, env={**os.environ, "KB_PROCESS_PAIRS": "2"})
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["extra"]["process_pairs"]) == 2
    monkeypatch.setenv("KB_PROCESS_PAIRS", "many")
    with pytest.raises(KernelBenchUsageError, match="KB_PROCESS_PAIRS='many': give what --process-pairs takes"):
        env_values({})
    proc = kbagent(*args, env={**os.environ, "KB_PROCESS_PAIRS": "many"})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: KB_PROCESS_PAIRS='many': give what --process-pairs takes (a whole number)"
    ]


def test_the_service_judges_with_the_environments_judge_options_too(monkeypatch):
    """kbagent serve hands its judge options to every request's config: KB_PROCESS_PAIRS among them, the flag first."""
    from typer.testing import CliRunner

    import kbagent.serve.main
    from kbagent.cli import app

    seen = []
    monkeypatch.setattr(kbagent.serve.main, "serve", lambda options, device, judge: seen.append(judge))
    monkeypatch.setenv("KB_PROCESS_PAIRS", "2")
    assert CliRunner().invoke(app, ["serve", "--device", "cpu", "--port", "0"]).exit_code == 0
    assert CliRunner().invoke(app, ["serve", "--device", "cpu", "--port", "0", "--process-pairs", "1"]).exit_code == 0
    assert [judge.get("process_pairs") for judge in seen] == [2, 1]


def test_eval_human_output_names_the_stage():
    proc = kbagent("eval", str(TINY_PROBLEM), str(BROKEN / "init_error.py"), "--device", "cpu")
    assert proc.returncode == 1
    assert "init_error" in proc.stdout and "cannot build this kernel" in proc.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing_problem.py", str(BROKEN / "correct.py")], "no such problem file"),
        ([str(TINY_PROBLEM), "missing_solution.py"], "no such solution file"),
        ([str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--device", "tpu"], "'--device': 'tpu': choose cpu, cuda"),
        ([str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--tolerance", "tight"], "--tolerance tight: choose kernelbench, pike"),
        ([str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--atol", "-1"], "--atol -1.0: give a finite number of at least 0"),
        ([str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--max-memory", "-1"], "--max-memory/--kb-max-memory -1: must be 0 or more"),
        ([str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--rtol", "nan"], "--rtol nan: give a finite number of at least 0 (e.g. 1e-2)"),
        ([str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--build-cache", "/proc/no-such"], "--build-cache /proc/no-such: cannot make"),
    ],
)
def test_eval_bad_input_is_one_line(args, says):
    proc = kbagent("eval", *args)
    assert proc.returncode == 2
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [(["--port", "99999"], "error: --port 99999: choose a port from 0 to 65535 (0: a free one)"),
     (["--state", "/proc/no-such", "--level", "mini"], "error: --state /proc/no-such: cannot make or write it (")],
)  # fmt: skip
def test_serve_with_a_bad_port_or_state_folder_is_one_line(args, says):
    proc = kbagent("serve", *args)
    assert proc.returncode == 2 and proc.stderr.strip().startswith(says) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_table_renders_a_report(tmp_path):
    from pytest_kernelbench.outcome import Outcome
    from pytest_kernelbench.report.writer import ReportWriter
    from pytest_kernelbench.result import EvalResult, TimingStats

    ok = EvalResult(problem="L1-19_ReLU", level="1", problem_id=19, outcome=Outcome.CORRECT, speedup=2.0)
    ok.ref, ok.new = TimingStats.from_samples([2.0, 2.0, 2.2]), TimingStats.from_samples([1.0, 1.0, 1.1])
    bad = EvalResult(problem="L1-20_LeakyReLU", level="1", problem_id=20, outcome=Outcome.TIMEOUT)
    noisy = EvalResult(problem="L1-21_Sigmoid", level="1", problem_id=21, outcome=Outcome.CORRECT, speedup=1.03,
                       extra={"speedup_noisy": True, "speedup_interval": [0.95, 1.12]})  # fmt: skip
    noisy.ref, noisy.new = TimingStats.from_samples([1.03] * 3), TimingStats.from_samples([1.0] * 3)
    writer = ReportWriter(tmp_path / "r.json", {"solutions": "solutions", "mode": "eager"}, {"gpu": "NVIDIA H100", "torch": "2.11"})
    for r in (ok, bad, noisy):
        writer.add(r)
    proc = kbagent("table", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    assert "Device: NVIDIA H100; torch 2.11" in proc.stdout
    assert "reference run as: eager (--mode); models in: the level default mode (--ref-mode)" in proc.stdout
    assert "| L1-19_ReLU | correct | 2 | 1 | 2.000 |" in proc.stdout
    assert "| L1-20_LeakyReLU | timeout | - | - | - |" in proc.stdout
    assert "| L1-21_Sigmoid | correct | 1.03 | 1 | 1.030 (noisy, 0.95-1.12) |" in proc.stdout
    assert "3 judged; geomean speedup" in proc.stdout and "Noisy speedups (" in proc.stdout and "): L1-21_Sigmoid." in proc.stdout


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"Name,Speedup\nrelu,2.0\n", "not a --kb-report (not JSON)"),
        (b"\xff\xfe\x00binary", "not a --kb-report (not UTF-8 text)"),
        (b'[{"outcome": "correct"}]', "not a --kb-report (JSON without a report schema"),
        (b'{"level1": {"19_ReLU.py": {"mean": 1.0}}}', "not a --kb-report (JSON without a report schema"),
        (b'{"schema": "pytest-kernelbench/report/1", "results": [{"problem": "x"}]}', "a --kb-report whose results cannot be read"),
    ],
)
def test_table_of_a_bad_or_foreign_file_is_one_line_and_exit_2(tmp_path, content, says):
    path = tmp_path / "foreign.json"
    path.write_bytes(content)
    for command in (["table", str(path)], ["solutions-table", "--eager", str(path)]):
        proc = kbagent(*command)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"error: {path}: {says}") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stdout == ""


def test_eval_human_output_shows_a_candidates_escape_sequences_as_text():
    """A candidate's error text draws a green 'correct 48.000x' with escape sequences: printed, they are text."""
    proc = kbagent("eval", str(TINY_PROBLEM), str(TESTS / "adversarial" / "escape_sequences.py"), "--device", "cpu")
    assert proc.returncode == 1, proc.stderr
    assert "runtime_error" in proc.stdout and "correct 48.000x" in proc.stdout
    assert "\x1b" not in proc.stdout and "\r" not in proc.stdout and "\x07" not in proc.stdout
    assert "\\x1b[32mcorrect\\x1b[0m" in proc.stdout and "[green]correct 48.000x[/green]" in proc.stdout


def test_eval_human_output_says_capped_with_both_numbers(monkeypatch):
    """Issue 45: where the judge printed the supervisor's bound instead of the runners' claim, kbagent eval says so."""
    from typer.testing import CliRunner

    import pytest_kernelbench.judge.controller
    from kbagent.cli import app
    from pytest_kernelbench.extra import Extra
    from pytest_kernelbench.outcome import Outcome
    from pytest_kernelbench.result import EvalResult, TimingStats

    capped = EvalResult(problem="L9-1_TinyLinear", level="9", problem_id=1, outcome=Outcome.CORRECT, speedup=1.0,
                        ref=TimingStats.from_samples([0.2] * 5), new=TimingStats.from_samples([0.107] * 5),
                        extra=Extra(speedup_capped=True, wall_check={"event_speedup": 1.87}))  # fmt: skip
    monkeypatch.setattr(pytest_kernelbench.judge.controller, "evaluate", lambda *args, **kwargs: capped)
    monkeypatch.setenv("COLUMNS", "300")
    result = CliRunner().invoke(app, ["eval", str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    line = " ".join(result.output.split())
    assert "correct" in line and "1.000x" in line, line
    assert "capped: the runners' timings say 1.870x, the supervisor's clock vouches for 1.000x" in line, line
