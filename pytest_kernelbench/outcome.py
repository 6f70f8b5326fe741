"""The closed set of evaluation outcomes and the reward each one earns.

Rewards follow the KernelBench RL environments: ``speedup - 1`` when correct,
then -2 incorrect, -3 runtime error, -4 init error, -5 compile error,
-6 unknown error, -7 timeout. A rejected candidate (tampering, or a policy such as
``--strict``) earns the same as an incorrect one: it produced no trustworthy answer.
"""

from __future__ import annotations

import enum


class Outcome(str, enum.Enum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    INIT_ERROR = "init_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    UNKNOWN_ERROR = "unknown_error"

    def __str__(self) -> str:  # plain value in f-strings and reports
        return self.value


_PENALTY = {
    Outcome.INCORRECT: -2.0,
    Outcome.REJECTED: -2.0,
    Outcome.RUNTIME_ERROR: -3.0,
    Outcome.INIT_ERROR: -4.0,
    Outcome.COMPILE_ERROR: -5.0,
    Outcome.UNKNOWN_ERROR: -6.0,
    Outcome.TIMEOUT: -7.0,
}

# The stage a worker was in decides what a crash there means.
STAGE_FAILURE = {
    "start": Outcome.UNKNOWN_ERROR,
    "reference": Outcome.UNKNOWN_ERROR,
    "inputs": Outcome.UNKNOWN_ERROR,
    "compile": Outcome.COMPILE_ERROR,
    "init": Outcome.INIT_ERROR,
    "run": Outcome.RUNTIME_ERROR,
    "compare": Outcome.RUNTIME_ERROR,
    "wait_lock": Outcome.UNKNOWN_ERROR,
    "time": Outcome.RUNTIME_ERROR,
    "done": Outcome.UNKNOWN_ERROR,
}


def reward(outcome: Outcome, speedup: float | None) -> float:
    if outcome is Outcome.CORRECT:
        return (speedup if speedup is not None else 1.0) - 1.0
    return _PENALTY[outcome]
