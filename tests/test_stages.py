"""The stage vocabulary (judge/stages.py): every stage the supervisor can announce is classified there, once, and the
supervisor, the controller and the service agree on what is charged to the candidate."""

import ast
import time

import pytest

from helpers import REPO
from pytest_kernelbench.judge import stages
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.result import EvalResult

SUPERVISOR = REPO / "pytest_kernelbench" / "judge" / "supervisor"
# the calls whose first argument is a stage name the status file will carry
_ANNOUNCING = {"enter", "phase", "hold"}


def _announced() -> dict[str, list[str]]:
    """Every string literal passed as the first argument to enter/phase/hold in the supervisor's modules."""
    found: dict[str, list[str]] = {}
    for path in sorted(SUPERVISOR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ANNOUNCING:
                if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    found.setdefault(node.args[0].value, []).append(f"{path.name}:{node.lineno}")
    return found


def test_every_stage_the_supervisor_announces_is_classified_in_one_place():
    announced = _announced()
    assert {"reference", "compile", "init", "run", "compare", "trace", "time", "recheck", "stepped_aside"} <= set(announced)
    unknown = {name: where for name, where in announced.items() if name not in stages.STAGES}
    assert not unknown, f"stages announced but not classified in judge/stages.py: {unknown}"


def test_charged_and_uncharged_split_the_vocabulary():
    assert stages.CHARGED | stages.UNCHARGED == set(stages.STAGES)
    assert not stages.CHARGED & stages.UNCHARGED
    assert stages.CHARGED == {"compile", "init", "run", "compare", "trace", "time"}
    for name in ("stepped_aside", "wait_lock", "paused", "pch", "recheck", "start", "reference", "done"):
        assert not stages.charged(name), name
    assert not stages.charged("no-such-stage")  # an unknown name is never the candidate's time


def test_status_refuses_a_stage_the_vocabulary_does_not_know(tmp_path):
    from pytest_kernelbench.judge.supervisor.record import Status

    status = Status(str(tmp_path / "status.log"))
    status.enter("compile")
    with pytest.raises(AssertionError, match="judge/stages.py"):
        status.enter("compiling")


def test_time_stepped_aside_is_charged_to_no_one_by_the_supervisor_and_the_controller(tmp_path):
    from pytest_kernelbench.judge.controller import _StatusWatcher
    from pytest_kernelbench.judge.supervisor.record import Status

    path = tmp_path / "status.log"
    status = Status(str(path))
    status.enter("run")
    status.enter("stepped_aside")
    time.sleep(0.3)
    status.enter("run")
    assert status.charged() < 0.2 and status.stage_seconds["stepped_aside"] >= 0.3

    watcher = _StatusWatcher(path)
    path.write_text("stepped_aside 0.0\n")
    watcher.poll()
    time.sleep(0.3)
    assert watcher.candidate_seconds() < 0.2


@pytest.mark.parametrize("stage, spent, outcome", [
    ("stepped_aside", {"run": 59.0, "stepped_aside": 1.0}, Outcome.HARNESS_ERROR), ("pch", {"pch": 60.0}, Outcome.HARNESS_ERROR),
    ("time", {"run": 20.0, "time": 40.0}, Outcome.TIMEOUT), ("compile", {"compile": 60.0}, Outcome.TIMEOUT),
    # the request's time went to the judge (a build of another's, the device lock): not the candidate's timeout
    ("time", {"wait_build": 45.0, "wait_lock": 5.0, "time": 10.0}, Outcome.HARNESS_ERROR)])  # fmt: skip
def test_the_service_cuts_off_a_request_as_the_candidates_timeout_only_for_its_own_time(stage, spent, outcome):
    from kbagent.serve.pool import _over_limit

    result = _over_limit(EvalResult(problem="L1-1_x", level="1", problem_id=1, outcome=Outcome.UNKNOWN_ERROR, stage=stage,
                                    stage_seconds=spent), 60, timeout=120)  # fmt: skip
    assert result.outcome is outcome and (result.reward is None) == (outcome is Outcome.HARNESS_ERROR), result.message

