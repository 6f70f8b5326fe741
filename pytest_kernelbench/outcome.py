"""The closed set of evaluation outcomes and the reward each one earns.

Rewards follow the KernelBench RL environments: ``speedup - 1`` when correct,
then -2 incorrect, -3 runtime error, -4 init error, -5 compile error,
-6 unknown error, -7 timeout. A rejected candidate (a speedup its own timings claim and the
judge's clock does not support, an input modified in place, or a policy such as ``--strict``)
earns the same as an incorrect one: it produced no trustworthy answer.

``harness_error`` is the judge's own failure (a broken problem, a reference that does not run,
a device lock that never came, a sandbox that would not start): no verdict on the candidate, so
no reward (``None``); a trainer should drop the sample or retry it.

``built`` is ``--device cpu-check``'s pass (no GPU): a CUDA candidate compiled with nvcc (never run),
or any other candidate whose outputs matched the reference on the CPU (a Triton kernel in Triton's
interpreter), on inputs scaled down where the problem allows. It says nothing of speed, so it earns
no reward (``None``) either; pytest passes the item (the check asked for passed), and the agent's
search ranks it above every failure and below every correct candidate.
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
    HARNESS_ERROR = "harness_error"
    BUILT = "built"  # --device cpu-check passed: compiled (CUDA) or matched on the CPU; not timed

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

def reward(outcome: Outcome, speedup: float | None) -> float | None:
    if outcome is Outcome.CORRECT:
        return (speedup if speedup is not None else 1.0) - 1.0
    return _PENALTY.get(outcome)
