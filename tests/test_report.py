"""Summary figures, the JSON report written as results arrive, and the rich table."""

import json
import math

import pytest

from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.report.summary import fast_p, geomean_speedup, summarize
from pytest_kernelbench.report.terminal import render_summary
from pytest_kernelbench.report.writer import SCHEMA, ReportWriter, load_report
from pytest_kernelbench.result import EvalResult, TimingStats, rewarded_speedup


def result(name, outcome, speedup=None):
    r = EvalResult(problem=name, level="1", problem_id=1, outcome=outcome, speedup=speedup, stage="compare")
    if speedup:
        r.ref = TimingStats.from_samples([speedup * 1.0, speedup * 1.1, speedup * 0.9])
        r.new = TimingStats.from_samples([1.0, 1.1, 0.9])
    return r


RESULTS = [
    result("a", Outcome.CORRECT, 0.5),
    result("b", Outcome.CORRECT, 1.2),
    result("c", Outcome.CORRECT, 2.5),
    result("d", Outcome.INCORRECT),
    result("e", Outcome.TIMEOUT),
]


def test_fast_p_counts_over_all_judged_problems():
    assert fast_p(RESULTS, 0) == pytest.approx(3 / 5)
    assert fast_p(RESULTS, 1) == pytest.approx(2 / 5)
    assert fast_p(RESULTS, 1.5) == pytest.approx(1 / 5)
    assert fast_p(RESULTS, 2) == pytest.approx(1 / 5)
    assert fast_p([], 1) == 0.0


def test_a_noisy_gain_counts_in_fast_p_only_as_far_as_its_interval_goes_and_is_marked():
    noisy = result("n", Outcome.CORRECT, 1.8)
    noisy.extra.speedup_noisy, noisy.extra.speedup_interval = True, [0.9, 3.6]
    steady = result("s", Outcome.CORRECT, 1.8)
    steady.extra.speedup_noisy, steady.extra.speedup_interval = False, [1.7, 1.9]
    assert fast_p([noisy, steady], 1) == pytest.approx(1 / 2) and fast_p([noisy, steady], 0) == 1.0
    assert summarize([noisy, steady])["noisy_speedup"] == ["n"]
    text = render_summary([noisy, steady], verbose=True, width=140)
    assert "1.80x~ 0.90-3.60" in text and "noisy speedups (x~, not counted as gains in fast_p): n" in text


def test_a_noisy_gain_pays_no_reward_and_a_noisy_loss_pays_in_full():
    """Noise the judge cannot tell from a gain pays nothing (a candidate's own helper processes can widen it on a loaded
    CPU); a steady gain pays speedup - 1, a noisy loss its own speedup - 1."""
    def judged(speedup, noisy, interval):
        r = result("r", Outcome.CORRECT, speedup)
        r.extra.speedup_noisy, r.extra.speedup_interval = noisy, interval
        return r

    assert judged(1.47, True, [0.6, 2.2]).reward == 0.0
    assert judged(1.8, False, [1.7, 1.9]).reward == pytest.approx(0.8)
    assert judged(0.7, True, [0.4, 1.2]).reward == pytest.approx(-0.3)
    assert judged(1.47, True, [0.6, 2.2]).to_dict()["reward"] == 0.0  # the JSON report, JUnit and the service take it
    assert rewarded_speedup(judged(1.47, True, [0.6, 2.2])) == 1.0 and rewarded_speedup(result("d", Outcome.INCORRECT)) is None


def test_geomean_over_correct_results_only():
    assert geomean_speedup(RESULTS) == pytest.approx(math.exp((math.log(0.5) + math.log(1.2) + math.log(2.5)) / 3))
    assert geomean_speedup([result("d", Outcome.INCORRECT)]) is None


def test_summary_counts_and_rewards():
    s = summarize(RESULTS)
    assert s["total"] == 5
    assert s["outcomes"]["correct"] == 3 and s["outcomes"]["timeout"] == 1 and s["outcomes"]["compile_error"] == 0
    assert s["mean_reward"] == pytest.approx(((0.5 - 1) + (1.2 - 1) + (2.5 - 1) - 2 - 7) / 5)


def test_timing_stats():
    stats = TimingStats.from_samples([4.0, 1.0, 3.0, 2.0, 100.0])
    assert stats.median == 3.0 and stats.min == 1.0 and stats.max == 100.0 and stats.rounds == 5
    assert stats.samples == [4.0, 1.0, 3.0, 2.0, 100.0]
    with pytest.raises(ValueError):
        TimingStats.from_samples([])


def test_report_is_rewritten_after_every_result(tmp_path):
    path = tmp_path / "out" / "report.json"
    writer = ReportWriter(path, {"levels": ["1"]}, {"device": "cpu"})
    writer.add(RESULTS[0])
    first = json.loads(path.read_text())
    assert first["schema"] == SCHEMA and first["finished"] is False and len(first["results"]) == 1
    writer.add(RESULTS[3])
    writer.close()
    data, results = load_report(path)
    assert data["finished"] is True and data["options"] == {"levels": ["1"]}
    assert [r.outcome for r in results] == [Outcome.CORRECT, Outcome.INCORRECT]
    row = data["results"][0]
    for key in ("outcome", "speedup", "reward", "message", "ref_ms", "new_ms", "ref", "new", "source_hash", "versions"):
        assert key in row
    assert data["summary"]["outcomes"]["incorrect"] == 1


def test_rendered_summary_has_counts_fast_p_and_rows_when_verbose():
    text = render_summary(RESULTS, verbose=True, width=120)
    for needle in ("fast_1.5", "20.0%", "geomean speedup", "timeout", "2.50x", "-7.00"):
        assert needle in text
    assert "2.50x" not in render_summary(RESULTS, verbose=False, width=120)


LONG_NAMES = [
    "L1-72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_",
    "L1-71_conv_transposed_2D__asymmetric_input__square_kernel",
    "L1-75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__",
]


def problem_column(text: str) -> str:
    """The rendered results table's first column, its lines joined (a folded name joins up again)."""
    header = next(line for line in text.splitlines() if line.startswith("┃"))  # as many bars as the rows
    cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│") and line.count("│") == header.count("┃")]
    return "".join(cells)


@pytest.mark.parametrize("width", [60, 80, 100])
def test_narrow_terminal_wraps_problem_names_never_cuts_them(width):
    results = [result(name, Outcome.RUNTIME_ERROR) for name in LONG_NAMES] + RESULTS[1:3]
    text = render_summary(results, verbose=True, width=width)
    assert "…" not in text and "..." not in text
    assert max(len(line) for line in text.splitlines()) <= width
    column = problem_column(text)
    for name in LONG_NAMES:
        assert name in column, (name, text)
    assert "runtime_error" in "".join(text.split()).replace("│", "")  # other columns wrap too, whole


def test_at_80_columns_a_kernelbench_name_stays_on_one_line_and_the_optional_columns_go_first():
    noisy = result("L2-17_Conv2d_InstanceNorm_Divide", Outcome.CORRECT, 1.03)
    noisy.extra.speedup_noisy, noisy.extra.speedup_interval = True, [0.95, 1.10]
    failed = result("L1-95_CrossEntropyLoss", Outcome.RUNTIME_ERROR)
    text = render_summary([noisy, failed], verbose=True, width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("L2-17_Conv2d_InstanceNorm_Divide" in line for line in lines) and any("runtime_error" in line for line in lines)
    header = next(line for line in lines if line.startswith("┃"))
    assert "stage" not in header and "problem" in header and "speedup" in header and "new ms" in header
    assert "stage" in render_summary([noisy, failed], verbose=True, width=140)  # all seven where they fit


def test_wide_terminal_keeps_each_name_on_one_line():
    text = render_summary([result(name, Outcome.CORRECT, 1.5) for name in LONG_NAMES], verbose=True, width=200)
    for name in LONG_NAMES:
        assert any(name in line for line in text.splitlines())


def test_a_cpu_run_reads_torchs_version_from_its_version_file_without_importing_it():
    import subprocess
    import sys

    import torch

    from pytest_kernelbench.report.writer import environment

    env = environment("cpu")
    assert env["torch"] == torch.__version__ and env.get("cuda") == torch.version.cuda and env["device"] == "cpu"
    probe = "import sys; from pytest_kernelbench.report.writer import environment as e; e('cpu'); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_a_capped_speedup_says_so_with_both_numbers_wherever_a_person_reads_it():
    """Issue 45: a printed speedup never silently differs from the measured one."""
    from pytest_kernelbench.extra import Extra
    from pytest_kernelbench.outcome import Outcome
    from pytest_kernelbench.report.summary import capped_note, claimed_speedup
    from pytest_kernelbench.result import EvalResult, TimingStats

    capped = EvalResult(problem="L1-1_x", level="1", problem_id=1, outcome=Outcome.CORRECT, speedup=1.0,
                        ref=TimingStats.from_samples([0.2] * 5), new=TimingStats.from_samples([0.107] * 5),
                        extra=Extra(speedup_capped=True, wall_check={"event_speedup": 1.87}))  # fmt: skip
    plain = EvalResult(problem="L1-2_y", level="1", problem_id=2, outcome=Outcome.CORRECT, speedup=1.5,
                       ref=TimingStats.from_samples([0.3] * 5), new=TimingStats.from_samples([0.2] * 5),
                       extra=Extra(speedup_capped=False, wall_check={"event_speedup": 1.5}))  # fmt: skip
    assert claimed_speedup(capped) == 1.87 and claimed_speedup(plain) is None
    assert "1.870x" in capped_note(capped) and "1.000x" in capped_note(capped) and capped_note(plain) == ""
    table = render_summary([capped, plain], verbose=True, width=200)
    row = next(line for line in table.splitlines() if "L1-1_x" in line)
    assert "capped (claimed 1.87x)" in row and "1.00x" in row
    assert "capped" not in next(line for line in table.splitlines() if "L1-2_y" in line)
    # the other tables a person reads: kbagent table (markdown), solutions-table, kbagent compare
    from kbagent import compare
    from pytest_kernelbench.report.markdown import report_table, solutions_tables

    for text in (report_table({}, [capped, plain]), solutions_tables([({}, [capped, plain])], []),
                 compare.render(compare.compare([plain], [capped, plain], None), [plain], [capped, plain], width=200, color=False)):
        row = next(line for line in text.splitlines() if "L1-1_x" in line)
        assert "1.00" in row and "capped (claimed 1.870x)" in row, text
        assert "capped" not in next(line for line in text.splitlines() if "L1-2_y" in line), text


HOSTILE = "L1-1_\x1b[32mcorrect\x1b[0m\r[bold green]48.000x[/bold green]\u202e"


def test_printable_shows_control_characters_and_keeps_lines_and_tabs():
    from pytest_kernelbench.report.text import markup, printable

    assert printable("a\x1b[2Kb\rc\r\n\td\x00\x7f\x9b\u202e\ud800") == "a\\x1b[2Kb\\x0dc\r\n\td\\x00\\x7f\\x9b\\u202e\\ud800"
    assert printable("plain text\nline two\ttab") == "plain text\nline two\ttab"
    assert markup("[green]x[/]\x1b") == "\\[green]x\\[/]\\x1b"


def test_the_summary_table_shows_a_hostile_name_as_text():
    text = render_summary([result(HOSTILE, Outcome.RUNTIME_ERROR)], verbose=True, width=200)
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    assert "\\x1b[32mcorrect" in text.replace("\n", "") and "[bold green]48.000x[/bold green]" in text.replace("\n", "")


def test_the_markdown_table_shows_a_hostile_name_as_text():
    from pytest_kernelbench.report.markdown import report_table

    text = report_table({}, [result(HOSTILE, Outcome.RUNTIME_ERROR)])
    assert "\x1b" not in text and "\r" not in text and "\\x1b[32mcorrect" in text
