"""kbagent compare: two --kb-report runs per item, and the regression gate for CI."""

import json

import pytest
from typer.testing import CliRunner

from kbagent.cli import app
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.report.writer import ReportWriter
from pytest_kernelbench.result import EvalResult, TimingStats


def judged(problem, ref_ms, new_ms, outcome=Outcome.CORRECT, noisy=False):
    r = EvalResult(problem=problem, level="1", problem_id=int(problem.split("-")[1].split("_")[0]), outcome=outcome)
    if outcome is Outcome.CORRECT:
        r.ref, r.new = TimingStats.from_samples([ref_ms] * 5), TimingStats.from_samples([new_ms] * 5)
        r.speedup = ref_ms / new_ms
        r.extra.speedup_noisy, r.extra.speedup_interval = noisy, [r.speedup * 0.9, r.speedup * 1.1]
    return r


def report(path, results):
    writer = ReportWriter(path, {"solutions": "s"}, {})
    for r in results:
        writer.add(r)
    writer.close()
    return str(path)


@pytest.fixture
def runs(tmp_path):
    base = report(tmp_path / "base.json", [
        judged("L1-1_Steady", 2.0, 1.0),        # 2.00x -> 2.00x
        judged("L1-2_Slower", 3.0, 1.0),        # 3.00x -> 2.50x: -16.7%
        judged("L1-3_Noisy", 2.0, 1.0, noisy=True),  # 2.00x -> 1.00x, noisy in BASE: never a regression
        judged("L1-4_Broke", 2.0, 1.0),         # correct -> incorrect
        judged("L1-5_Gone", 1.0, 1.0),
    ])  # fmt: skip
    new = report(tmp_path / "new.json", [
        judged("L1-1_Steady", 4.0, 2.0),
        judged("L1-2_Slower", 2.5, 1.0),
        judged("L1-3_Noisy", 1.0, 1.0),
        judged("L1-4_Broke", 0, 0, outcome=Outcome.INCORRECT),
        judged("L1-6_Added", 1.0, 0.5),
    ])  # fmt: skip
    return base, new


def invoke(*args):
    return CliRunner().invoke(app, ["compare", *args], env={"COLUMNS": "200"})


def test_compare_lists_every_item_side_by_side_and_marks_the_noisy(runs):
    result = invoke(*runs)
    assert result.exit_code == 0, result.output  # no threshold: a table, never a failure
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.startswith(" L1-")}
    assert set(lines) == {"L1-1_Steady", "L1-2_Slower", "L1-3_Noisy", "L1-4_Broke", "L1-5_Gone", "L1-6_Added"}
    assert "2.000x" in lines["L1-1_Steady"] and "+0.0%" in lines["L1-1_Steady"]
    assert "3.000x" in lines["L1-2_Slower"] and "2.500x" in lines["L1-2_Slower"] and "-16.7%" in lines["L1-2_Slower"]
    assert "2.000x~" in lines["L1-3_Noisy"] and "-50.0% noisy" in lines["L1-3_Noisy"]
    assert "correct -> incorrect" in lines["L1-4_Broke"] and "regression" in lines["L1-4_Broke"]  # an outcome lost is one at any threshold
    assert "1 only in BASE, 1 only in NEW" in result.output and "1 regressions: L1-4_Broke" in result.output
    # geomean over L1-1, L1-2 and L1-3 (correct in both)
    assert f"{(2 * 3 * 2) ** (1 / 3):.3f}x -> {(2 * 2.5 * 1) ** (1 / 3):.3f}x" in result.output


@pytest.mark.parametrize(("threshold", "regressions"), [("20", ["L1-4_Broke"]), ("10", ["L1-2_Slower", "L1-4_Broke"])])
def test_fail_on_regression_is_a_gate_at_its_threshold(runs, threshold, regressions):
    result = invoke(*runs, "--fail-on-regression", threshold, "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert data["regressions"] == regressions and data["threshold_pct"] == float(threshold)
    rows = {row["item"]: row for row in data["rows"]}
    assert rows["L1-2_Slower"]["speedup_change_pct"] == pytest.approx((2.5 / 3 - 1) * 100)
    assert rows["L1-3_Noisy"]["noisy"] and not rows["L1-3_Noisy"]["regression"]
    assert rows["L1-6_Added"]["base"] is None and rows["L1-5_Gone"]["new"] is None


def test_a_run_against_itself_passes_the_gate(runs):
    base, _ = runs
    assert invoke(base, base, "--fail-on-regression", "0").exit_code == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [(["missing.json", "missing.json"], "error: missing.json: not a --kb-report"),
     (["BASE", "BASE", "--fail-on-regression", "-5"], "error: --fail-on-regression -5.0: give a percentage of 0 or more")],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(runs, args, says):
    result = invoke(*[runs[0] if a == "BASE" else a for a in args])
    assert result.exit_code == 2 and result.output.strip().startswith(says) and len(result.output.strip().splitlines()) == 1
