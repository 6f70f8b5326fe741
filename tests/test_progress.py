"""The progress line: counts, rate and ETA from results as they arrive (a fake clock drives it)."""

from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.report.progress import ProgressLine, wanted
from pytest_kernelbench.result import EvalResult


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def result(outcome, stage="done"):
    return EvalResult(problem="L1-1_X", level="1", problem_id=1, outcome=outcome, stage=stage)


def test_counts_rate_and_eta():
    clock = FakeClock()
    line = ProgressLine(total=10, interval=30, clock=clock)
    clock.now += 60
    line.add(result(Outcome.CORRECT))
    line.add(result(Outcome.COMPILE_ERROR, stage="compile"))
    line.add(result(Outcome.INCORRECT, stage="compare"))
    line.add(None)  # a skipped item (no candidate)
    assert (line.judged, line.built, line.correct, line.skipped) == (3, 2, 1, 1)
    assert line.failed == {"compile_error": 1, "incorrect": 1}
    assert line.eta_seconds() == 60 / 4 * 6  # 4 of 10 done in 60 s
    text = line.render()
    assert "4/10  built 2  judged 3  correct 1  failed 2 (compile_error 1, incorrect 1)  skipped 1" in text
    assert "180/h" in text and "elapsed 1:00" in text and "ETA 1:30" in text


def test_shown_at_most_once_per_interval():
    clock = FakeClock()
    line = ProgressLine(total=5, interval=30, clock=clock)
    clock.now += 10
    assert not line.due()
    clock.now += 25
    assert line.due()
    clock.now += 5
    assert not line.due()
    clock.now += 30
    assert line.due()


def test_auto_is_off_under_q_and_in_ci():
    assert wanted("auto", 0, {}) and wanted("auto", 1, {})
    assert not wanted("auto", -1, {})
    assert not wanted("auto", 0, {"CI": "true"})
    assert wanted("on", -1, {"CI": "true"}) and not wanted("off", 2, {})
