"""Docs generated from reports: KernelBench-shaped baseline JSON, its comparison, the solutions table."""

import json
import math

import pytest
from typer.testing import CliRunner

from kbagent.cli import app
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.report.baselines import COMPILE_FILE, EAGER_FILE, compare_markdown
from pytest_kernelbench.report.writer import ReportWriter
from pytest_kernelbench.result import EvalResult, TimingStats


def judged(problem, pid, mode, ref_samples, new_samples, outcome=Outcome.CORRECT, level="1"):
    r = EvalResult(problem=problem, level=level, problem_id=pid, outcome=outcome, mode=mode, stage="done",
                   device="cuda:0", device_name="NVIDIA H100 80GB HBM3")
    if outcome is Outcome.CORRECT:
        r.ref = TimingStats.from_samples(ref_samples)
        r.new = TimingStats.from_samples(new_samples)
        r.speedup = r.ref.median / r.new.median
    return r


def write_report(path, solutions, mode, results):
    writer = ReportWriter(path, {"solutions": solutions, "mode": mode}, {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0"})
    for r in results:
        writer.add(r)
    writer.close()
    return path


def test_a_compile_mode_baseline_run_gives_both_files_in_kernelbench_shape(tmp_path):
    compiled = [2.0, 2.2, 2.1, 2.4]
    eager = [4.0, 4.4, 4.2, 4.1]
    report = write_report(tmp_path / "b.json", "baseline", "compile", [
        judged("L1-19_ReLU", 19, "compile", compiled, eager),
        judged("L1-20_LeakyReLU", 20, "compile", [1.0], [1.0], outcome=Outcome.RUNTIME_ERROR),
        judged("L2-3_Fused", 3, "compile", [1.0, 1.0], [3.0, 3.0], level="2"),
    ])
    result = CliRunner().invoke(app, ["baseline-json", str(report), "--out-dir", str(tmp_path / "t"), "--label", "H100_ours"])
    assert result.exit_code == 0, result.output
    eager_json = json.loads((tmp_path / "t" / f"H100_ours_{EAGER_FILE}").read_text())
    compile_json = json.loads((tmp_path / "t" / f"H100_ours_{COMPILE_FILE}").read_text())
    assert set(eager_json) == {"level1", "level2"}
    entry = eager_json["level1"]["19_ReLU.py"]
    assert entry["mean"] == pytest.approx(sum(eager) / 4, rel=1e-3)
    assert entry["min"] == 4.0 and entry["max"] == 4.4 and entry["num_trials"] == 4
    assert entry["hardware"] == "NVIDIA H100 80GB HBM3"
    assert compile_json["level1"]["19_ReLU.py"]["mean"] == pytest.approx(sum(compiled) / 4, rel=1e-3)
    assert "20_LeakyReLU.py" not in eager_json["level1"]  # only correct runs give timings


def test_baseline_json_merges_new_runs_into_files_written_before(tmp_path):
    out = tmp_path / "t"
    first = write_report(tmp_path / "a.json", "baseline", "eager", [judged("L1-19_ReLU", 19, "eager", [4.0], [4.0])])
    assert CliRunner().invoke(app, ["baseline-json", str(first), "--out-dir", str(out), "--label", "X"]).exit_code == 0
    eager_file = out / f"X_{EAGER_FILE}"
    later = write_report(tmp_path / "b.json", "baseline", "compile", [
        judged("L1-19_ReLU", 19, "compile", [1.0], [9.0]),
        judged("L1-20_LeakyReLU", 20, "compile", [2.0], [5.0]),
    ])
    # The compile run first, the earlier eager file last: the eager-only time of 19 wins over the compile run's.
    result = CliRunner().invoke(app, ["baseline-json", str(later), str(eager_file), "--out-dir", str(out), "--label", "X"])
    assert result.exit_code == 0, result.output
    eager_json = json.loads(eager_file.read_text())
    assert eager_json["level1"]["19_ReLU.py"]["mean"] == 4.0
    assert eager_json["level1"]["20_LeakyReLU.py"]["mean"] == 5.0
    assert list(eager_json["level1"]) == ["19_ReLU.py", "20_LeakyReLU.py"]
    assert json.loads((out / f"X_{COMPILE_FILE}").read_text())["level1"]["20_LeakyReLU.py"]["mean"] == 2.0


def test_baseline_json_orders_problems_by_number_whatever_the_input_order(tmp_path):
    report = write_report(tmp_path / "m.json", "baseline", "eager", [
        judged("L3-metr-50_ReLUSelfAttention", 50, "eager", [1.0], [1.0], level="3-metr"),
        judged("L3-metr-9_ResNet18", 9, "eager", [1.0], [1.0], level="3-metr"),
        judged("L1-100_HingeLoss", 100, "eager", [1.0], [1.0]),
        judged("L1-19_ReLU", 19, "eager", [1.0], [1.0]),
    ])
    assert CliRunner().invoke(app, ["baseline-json", str(report), "--out-dir", str(tmp_path), "--label", "X"]).exit_code == 0
    eager_json = json.loads((tmp_path / f"X_{EAGER_FILE}").read_text())
    assert list(eager_json["level1"]) == ["19_ReLU.py", "100_HingeLoss.py"]
    assert list(eager_json["level3-metr"]) == ["metr-9_ResNet18.py", "metr-50_ReLUSelfAttention.py"]


def test_baseline_json_refuses_a_report_named_like_a_baseline_file(tmp_path):
    report = write_report(tmp_path / f"run_{EAGER_FILE}", "baseline", "eager", [judged("L1-19_ReLU", 19, "eager", [4.0], [4.0])])
    result = CliRunner().invoke(app, ["baseline-json", str(report), "--out-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "rename the report" in result.output


def test_baseline_json_refuses_a_report_of_real_candidates(tmp_path):
    report = write_report(tmp_path / "s.json", "solutions", "eager", [judged("L1-19_ReLU", 19, "eager", [2.0], [1.0])])
    result = CliRunner().invoke(app, ["baseline-json", str(report), "--out-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "--solutions baseline" in result.output


def test_compare_reports_the_ratio_of_means_per_level(tmp_path):
    ours = {"level1": {"1_A.py": {"mean": 2.0}, "2_B.py": {"mean": 1.0}, "3_C.py": {"mean": 5.0}}}
    theirs = {"level1": {"1_A.py": {"mean": 1.0}, "2_B.py": {"mean": 1.0}, "9_Z.py": {"mean": 1.0}}}
    (tmp_path / "o.json").write_text(json.dumps(ours))
    (tmp_path / "t.json").write_text(json.dumps(theirs))
    table = compare_markdown(tmp_path / "o.json", tmp_path / "t.json")
    row = next(line for line in table.splitlines() if line.startswith("| level1"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "2"  # only problems in both
    assert float(cells[2]) == pytest.approx(math.sqrt(2.0), abs=1e-3)
    assert cells[4] == "50%"
    assert cells[6].startswith("1_A 2.00")


def test_solutions_table_puts_eager_compile_and_ours_side_by_side(tmp_path):
    eager = write_report(tmp_path / "e.json", "solutions", "eager", [
        judged("L1-30_Softsign", 30, "eager", [8.0, 8.0], [2.0, 2.0]),
        judged("L1-12_Diag", 12, "eager", [1.0], [1.0], outcome=Outcome.INCORRECT),
        judged("L2-1_Conv", 1, "eager", [3.0, 3.0], [2.0, 2.0], level="2"),
    ])
    compiled = write_report(tmp_path / "c.json", "solutions", "compile", [
        judged("L1-30_Softsign", 30, "compile", [2.5, 2.5], [2.0, 2.0]),
        judged("L2-1_Conv", 1, "compile", [1.5, 1.5], [2.0, 2.0], level="2"),
    ])
    result = CliRunner().invoke(app, ["solutions-table", "--eager", str(eager), "--compile", str(compiled)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "### Level 1" in text and "### Level 2" in text
    softsign = next(line for line in text.splitlines() if line.startswith("| L1-30_Softsign"))
    assert [c.strip() for c in softsign.strip("|").split("|")] == ["L1-30_Softsign", "correct", "8", "2.5", "2", "4.00x", "1.25x"]
    assert "| L1-12_Diag | incorrect |" in text
    assert "Geomean over correct solutions: 4.00x vs eager (1 problems), 1.25x vs torch.compile (1 problems)" in text
    assert "0.75x vs torch.compile" in text  # level 2: 1.5 ms compiled vs 2 ms ours


def test_committed_only_drops_rows_whose_solution_file_is_gone(tmp_path):
    kept, gone = tmp_path / "30_Softsign.cuda.py", tmp_path / "12_Diag.cuda.py"
    kept.write_text("# a committed solution\n")
    a = judged("L1-30_Softsign", 30, "eager", [8.0], [2.0])
    b = judged("L1-12_Diag", 12, "eager", [1.0], [2.0])
    a.candidate_path, b.candidate_path = str(kept), str(gone)
    eager = write_report(tmp_path / "e.json", "solutions", "eager", [a, b])
    everything = CliRunner().invoke(app, ["solutions-table", "--eager", str(eager)]).output
    committed = CliRunner().invoke(app, ["solutions-table", "--eager", str(eager), "--committed-only"]).output
    assert "L1-12_Diag" in everything and "L1-12_Diag" not in committed
    assert "| L1-30_Softsign | correct |" in committed
