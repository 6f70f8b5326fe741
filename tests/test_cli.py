"""``kbagent eval``: the one-pair judge that agents and RL environments call."""

import json
import subprocess
import sys

import pytest

from helpers import BROKEN, TINY_PROBLEM


def kbagent(*args):
    return subprocess.run([sys.executable, "-m", "kbagent.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("name", "outcome", "rc"), [("correct", "correct", 0), ("incorrect", "incorrect", 1)])
def test_eval_json_prints_exactly_one_object(name, outcome, rc):
    proc = kbagent("eval", str(TINY_PROBLEM), str(BROKEN / f"{name}.py"), "--device", "cpu", "--json", "--trials", "2")
    assert proc.returncode == rc, proc.stderr
    data = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    assert isinstance(data, dict) and data["outcome"] == outcome
    for key in ("outcome", "speedup", "reward", "message", "ref_ms", "new_ms"):
        assert key in data
    if outcome == "correct":
        assert data["speedup"] > 0 and data["ref_ms"] > 0 and data["new_ms"] > 0 and data["reward"] == data["speedup"] - 1
    else:
        assert data["reward"] == -2 and data["speedup"] is None and "outside atol" in data["message"]


def test_eval_human_output_names_the_stage():
    proc = kbagent("eval", str(TINY_PROBLEM), str(BROKEN / "init_error.py"), "--device", "cpu")
    assert proc.returncode == 1
    assert "init_error" in proc.stdout and "cannot build this kernel" in proc.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing_problem.py", str(BROKEN / "correct.py")], "no such problem file"),
        ([str(TINY_PROBLEM), "missing_solution.py"], "no such solution file"),
        ([str(TINY_PROBLEM), str(BROKEN / "correct.py"), "--device", "tpu"], "--device tpu: choose cpu or cuda"),
    ],
)
def test_eval_bad_input_is_one_line(args, says):
    proc = kbagent("eval", *args)
    assert proc.returncode == 2
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""
