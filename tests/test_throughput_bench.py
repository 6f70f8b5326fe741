"""benchmarks/throughput.py's alone phase: the candidates a phase judged, judged again one at a time, and compared."""

import importlib.util
import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(_BENCH))  # throughput.py imports corpus_dir from beside it
_SPEC = importlib.util.spec_from_file_location("kb_benchmarks_throughput", _BENCH / "throughput.py")  # benchmarks/ is no package
throughput = sys.modules.setdefault(_SPEC.name, importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(throughput)


class _Candidate:
    def __init__(self, label: str):
        self.label = label


def _result(candidate: str, outcome: str, speedup: float | None, t: float = 0.0) -> dict:
    return {"candidate": candidate, "outcome": outcome, "speedup": speedup, "t": t}


def test_the_alone_phase_takes_what_the_phase_before_judged_in_the_order_it_judged_them():
    pairs = [("p", _Candidate(name), "cuda") for name in ("a", "b", "c", "d")]
    before = {"results": [_result("c", "correct", 1.1, t=5.0), _result("a", "incorrect", None, t=9.0), _result("gone", "correct", 1.0)]}
    assert [c.label for _, c, _ in throughput.judged_again(pairs, before)] == ["c", "a"]  # d was cut off; gone is no pair
    assert throughput.judged_again(pairs, None) == pairs
    assert throughput.judged_again(pairs, {"results": []}) == pairs  # a synthetic run before kept no results


def test_agreement_counts_kept_outcomes_and_speedups_within_5_and_10_percent_widest_first():
    before = {"results": [_result("a", "correct", 1.00), _result("b", "correct", 2.00), _result("c", "correct", 1.50),
                          _result("d", "incorrect", None), _result("e", "correct", 1.2), _result("f", "correct", 1.0)]}  # fmt: skip
    alone = {"results": [_result("a", "correct", 1.04), _result("b", "correct", 1.84), _result("c", "correct", 1.80),
                         _result("d", "correct", 1.3), _result("e", "timeout", None)]}  # fmt: skip
    found = throughput.agreement(before, alone)
    assert found["compared"] == 5 and found["same_outcome"] == 3, found  # f was not judged alone
    assert found["outcome_differs"] == ["d: incorrect then, correct alone", "e: correct then, timeout alone"]
    assert (found["speedups"], found["within_5pct"], found["within_10pct"]) == (3, 1, 2), found
    assert [w["candidate"] for w in found["widest"]] == ["c", "b", "a"] and found["widest"][0]["ratio"] == 1.2


def test_a_run_cut_off_keeps_the_stage_each_judge_in_flight_was_in_and_when_each_build_ran(monkeypatch):
    """Where a run's end went: a judge still in flight at the deadline is listed with its stage, and each pool build
    with its span and outcome (issue 46: the PIKE runs judged nothing in their last minute)."""
    import threading
    import time
    from types import SimpleNamespace

    from pytest_kernelbench.build import pool
    from pytest_kernelbench.candidates import Candidate
    from pytest_kernelbench.config import EvalConfig
    from pytest_kernelbench.outcome import Outcome
    from pytest_kernelbench.result import EvalResult

    def fake_evaluate(problem, candidate, config, stop=None, build_only=False, build_rank=0):
        result = EvalResult(problem="p", level="1", problem_id=1, outcome=Outcome.CORRECT, stage_seconds={"compile": 0.1})
        if build_only:
            time.sleep(0.2)
            return result
        if candidate.label == "long":  # timing when the deadline comes
            stop.wait(10)
            result.outcome, result.stage, result.message = Outcome.UNKNOWN_ERROR, "time", "stopped during stage 'time': the session ended"
            result.stage_seconds = {"compile": 0.1, "time": 0.5}
            result.extra.stages_at = [["compile", 0.0], ["time", 0.1]]
        return result

    monkeypatch.setattr(throughput, "evaluate", fake_evaluate)
    monkeypatch.setattr(pool, "evaluate", fake_evaluate)
    monkeypatch.setattr(pool, "wait_while_cpu_timing", lambda lock_dir: None)
    problem = SimpleNamespace(level="1", problem_id=1)
    built = "from torch.utils.cpp_extension import load_inline\n"
    pairs = [(problem, Candidate(built + f"# {label}\n", "", label), "cpp") for label in ("quick", "long", "never")]
    stop = threading.Event()
    threading.Timer(0.6, stop.set).start()
    lines, _, cut, end = throughput.judge_pairs(pairs, EvalConfig(device="cpu"), jobs=3, judges=1, stop=stop, started=time.time())
    assert [line["candidate"] for line in lines] == ["quick"] and sorted(cut) == ["long", "never"], (lines, cut)
    [stopped] = end["stopped"]
    assert stopped["candidate"] == "long" and stopped["stage"] == "time" and stopped["stage_s"]["time"] == 0.5, stopped
    assert stopped["stages_at"] == [["compile", 0.0], ["time", 0.1]], stopped
    builds = {b["candidate"]: b for b in end["builds"]}
    assert set(builds) == {"quick", "long", "never"}, builds  # three build jobs: all three started at once
    assert all(b["outcome"] == "correct" and 0.1 < b["to_t"] - b["from_t"] < 2 for b in builds.values()), builds


def test_a_long_settle_is_listed_with_the_candidates_then_in_a_shared_gpu_stage():
    """Issue 46: time phases waited 12-14 s for a quiet GPU once one candidate had started its calls. Each settle of
    LONG_SETTLE_S or more is listed with who was in init, run or stepped aside when it began, judged or cut off."""
    timer = {"candidate": "timer", "t": 40.0, "wall_s": 30.0,  # began at 10 s into the run
             "stages_at": [["reference", 0.0], ["time", 5.0], ["settle", 5.5], ["time", 18.0], ["done", 20.0]]}
    quick = {"candidate": "quick", "t": 17.0, "wall_s": 2.0, "stages_at": [["run", 0.0], ["settle", 1.0], ["done", 1.5]]}
    hog = {"candidate": "hog", "from_t": 12.0, "stages_at": [["init", 0.0], ["run", 1.0], ["stepped_aside", 3.0]]}
    gone = {"candidate": "gone", "from_t": 0.0, "stages_at": None}  # a record of before stages_at was kept
    found = throughput.long_settles([timer, quick], [hog, gone])
    assert found == [{"candidate": "timer", "from_t": 15.5, "seconds": 12.5, "beside": ["hog", "quick"]}], found
    assert throughput.long_settles([timer], [], least=13.0) == []


def test_whose_processes_kept_a_settle_waiting_are_named_by_their_candidates():
    """extra.settle_busy names a judge's runner by its supervisor's pid (judge/nvml.py); the run's record names its
    candidate, judged or cut off."""
    timer = {"candidate": "timer", "supervisor_pid": 100, "settle_busy": [{"s": 12.5, "by": {"300-candidate": 40, "pid 7": 2}}]}
    other = {"candidate": "other", "supervisor_pid": 200, "settle_busy": None}
    hog = {"candidate": "hog", "supervisor_pid": 300}
    assert throughput.settle_busy([timer, other], [hog]) == [{"candidate": "timer", "s": 12.5, "by": {"hog (candidate)": 40, "pid 7": 2}}]
    assert throughput.settle_busy([other], []) == []
