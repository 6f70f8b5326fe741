"""A task of the ``kernelbench`` environment judged, without the verifiers library: the pieces the environment's
chat loop and its tool server (:mod:`kbagent.verifiers_env.tools`) share.

A task is either a KernelBench-style problem (``kind`` "kernel": a ``ModelNew`` against the problem's ``Model``) or an
ATen op of an op suite (``kind`` "op": a BackendBench-style ``<op>_kernel_impl`` function, judged on the suite's
correctness samples and timed on its performance samples, as ``pytest --suite`` judges it). Each judged turn is one
record (:func:`judged_turn`, :func:`unjudged_turn`); the rewards and metrics read those records (:mod:`.scoring`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from kbagent.extract import Extraction, extract_code
from kbagent.feedback import NO_CODE_OUTCOME, feedback_text, no_code_feedback
from kbagent.prompts import first_line
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.problems import Problem

KERNEL, OP = "kernel", "op"
SUITES = ("smoke", "opinfo")
HARNESS_ERROR = "harness_error"


def problem_of(data: Mapping[str, Any]) -> Problem:
    """The KernelBench problem a task's data names (its source travels with it: the judge needs no data folder)."""
    return Problem(str(data["level"]), int(data["problem_id"]), str(data["name"]), str(data["source"]), "verifiers")


def op_folder(op: str) -> str:
    """BackendBench's folder (and function prefix) of an ATen overload: ``aten.add.Tensor`` -> ``add__Tensor``."""
    name = op.removeprefix("aten.")
    base, _, overload = name.partition(".")
    return f"{base}__{overload or 'default'}"


def op_function(op: str) -> str:
    return f"{op_folder(op)}_kernel_impl"


@functools.lru_cache(maxsize=8)
def suite_tasks(suite: str, dtype: str, device: str) -> dict[str, Any]:
    """The op suite's tasks by op (``aten.relu.default``); built once per process (OpInfo's samples take seconds)."""
    if suite == "smoke":
        from pytest_kernelbench.suites.smoke import smoke_suite

        tasks = smoke_suite(dtype).tasks
    elif suite == "opinfo":
        from pytest_kernelbench.suites.opinfo import opinfo_suite

        tasks = opinfo_suite("cuda" if device == "cuda" else "cpu", dtype).tasks
    else:
        raise ValueError(f"suite {suite!r}: choose {' or '.join(SUITES)}")
    return {task.op: task for task in tasks}


def extract(data: Mapping[str, Any], reply: str, finish_reason: str = "") -> Extraction:
    """The code a reply holds for this task: a ``ModelNew``, or for an op the implementation function."""
    if data.get("kind") == OP:
        function = op_function(str(data["op"]))
        pattern = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(function)}\b", re.MULTILINE)
        return extract_code(reply, finish_reason, defines=pattern, missing=f"the code block defines no function {function}")
    return extract_code(reply, finish_reason)


def judge(data: Mapping[str, Any], code: str, config: EvalConfig) -> dict[str, Any]:
    """The judge's verdict on ``code`` for this task (``EvalResult.to_dict()``); runs the sandboxed judge (seconds)."""
    from pytest_kernelbench.judge.controller import evaluate

    if data.get("kind") != OP:
        return evaluate(problem_of(data), Candidate(code, "", "verifiers turn"), config).to_dict()
    from pytest_kernelbench.suites.backend_dir import Implementation
    from pytest_kernelbench.suites.run import evaluate_op

    op = str(data["op"])
    task = suite_tasks(str(data["suite"]), str(data.get("dtype") or "float32"), config.device)[op]
    impl = Implementation(op, f"{op_folder(op)}_implementation.py", op_function(op), code)
    result = evaluate_op(task, str(data["suite"]), int(data["problem_id"]), impl, lambda p, c, timed: evaluate(p, c, config))
    return result.to_dict()


def _performance(data: Mapping[str, Any], result: Mapping[str, Any]) -> tuple[float, float]:
    """(performance score, fraction of performance runs that passed), as backend-bench scores a turn: the speedup
    (an op's geometric mean over its performance samples, a failed sample counting 1.0), 1.0 for a failed turn."""
    suite = (result.get("extra") or {}).get("op_suite") if data.get("kind") == OP else None
    if isinstance(suite, dict):
        samples = suite.get("samples") or []
        passed = sum(1 for s in samples if s.get("outcome") == "correct")
        return float(suite.get("performance") or 1.0), passed / len(samples) if samples else 0.0
    speedup = result.get("speedup")
    if result.get("outcome") == "correct" and isinstance(speedup, (int, float)) and speedup > 0:
        return float(speedup), 1.0
    return 1.0, 0.0


def judged_turn(index: int, data: Mapping[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """One judged turn's record: the dense reward (``speedup - 1`` when correct; -2 incorrect ... -7 timeout; None for the
    judge's own failure), backend-bench's correctness and performance scores, and the feedback sent back."""
    correct = result.get("outcome") == "correct"
    performance, perf_accuracy = _performance(data, result)
    feedback = feedback_text(result)
    if data.get("kind") == OP:
        feedback = feedback.replace("Your ModelNew", "Your implementation")
    return {"turn": index, "outcome": result.get("outcome"), "reward": result.get("reward"), "speedup": result.get("speedup"),
            "correctness_score": 1.0 if correct else 0.0, "performance_score": performance, "perf_accuracy": perf_accuracy,
            "message": first_line(str(result.get("message", "")), 500), "feedback": feedback}  # fmt: skip


def unjudged_turn(index: int, reason: str, no_code_reward: float, kind: str = KERNEL) -> dict[str, Any]:
    """A turn whose reply held no code to judge: it scores ``no_code_reward`` and nothing on backend-bench's scores."""
    feedback = no_code_feedback(reason)
    if kind == OP:
        feedback = feedback.replace("It must define `class ModelNew(nn.Module)`.", "It must define the function the task names.")
    return {"turn": index, "outcome": NO_CODE_OUTCOME, "reward": no_code_reward, "speedup": None, "correctness_score": 0.0,
            "performance_score": 1.0, "perf_accuracy": 0.0, "message": reason, "feedback": feedback}  # fmt: skip


def harness_failure(index: int, error: BaseException) -> dict[str, Any]:
    """A turn the judge itself failed on (not the candidate's doing): no reward."""
    message = f"the judge failed: {type(error).__name__}: {error}"
    return {"turn": index, "outcome": HARNESS_ERROR, "reward": None, "speedup": None, "correctness_score": 0.0,
            "performance_score": 1.0, "perf_accuracy": 0.0, "message": first_line(message, 500),
            "feedback": f"Your code was not judged ({message}); send it again."}  # fmt: skip


def judge_reply(data: Mapping[str, Any], reply: str, finish_reason: str, index: int, config: EvalConfig,
                no_code_reward: float) -> dict[str, Any]:  # fmt: skip
    """A model's reply judged as turn ``index``: extracted, judged, recorded (blocking: run it off the event loop)."""
    found = extract(data, reply, finish_reason)
    if not found.ok:
        return unjudged_turn(index, found.reason, no_code_reward, str(data.get("kind") or KERNEL))
    try:
        return judged_turn(index, data, judge(data, found.code or "", config))
    except Exception as exc:  # the judge's own failure: recorded, never the model's reward
        return harness_failure(index, exc)
