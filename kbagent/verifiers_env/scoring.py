"""The rewards and metrics of a rollout, from its judged turns (:mod:`.judging`'s records), without the verifiers library.

Two rewards, chosen by ``reward``:

* ``"speedup"`` (OpenReward's dense one, the default): the judge's reward, ``speedup - 1`` when correct, -2 incorrect,
  -3 runtime error, -4 init error, -5 compile error, -6 unknown, -7 timeout; a reply without code scores
  ``no_code_reward``. A turn the judge itself failed on has no reward: it is left out of the best and scores
  ``harness_error_reward`` only as the last turn or when no turn has one.
* ``"product"`` (backend-bench's): correctness score x performance score, 0 for a failed turn and the speedup (an
  op's geometric mean over its performance samples) for a correct one.

``turn`` says whose reward the rollout gets: the best turn's (``"best"``) or the last one's (``"last"``). The metrics
keep backend-bench's names and follow the chosen reward: ``best_reward``, ``last_reward``, and of the best run (the
turn with the best reward, the earliest of equals) ``best_run_correctness_score``, ``best_run_performance_score``,
``test_accuracy`` (its fraction of correctness tests passed) and ``perf_accuracy`` (its fraction of performance runs
passed); besides them ``correct`` (1 if any turn was), ``best_speedup``, ``turns`` and ``harness_errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

REWARDS = ("speedup", "product")
TURNS = ("best", "last")
FEEDBACK_LOOPS = ("until_max_turns", "until_correct", "none")

Turn = dict[str, Any]


def check_choice(name: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name}={value!r}: choose {', '.join(choices)}")
    return value


def turn_reward(turn: Turn, reward: str) -> float | None:
    """One turn's reward: the judge's (None for its own failure) or correctness x performance."""
    if turn.get("outcome") == "harness_error":
        return None
    if reward == "product":
        return float(turn["correctness_score"]) * float(turn["performance_score"])
    value = turn.get("reward")
    return None if value is None else float(value)


def best_turn(turns: Sequence[Turn], reward: str) -> Turn | None:
    """The judged turn with the highest reward, the earliest of equals; None when no turn has a reward."""
    rewarded = [(turn_reward(t, reward), -i, t) for i, t in enumerate(turns) if turn_reward(t, reward) is not None]
    return max(rewarded, key=lambda r: (r[0], r[1]))[2] if rewarded else None


def _fallback(turns: Sequence[Turn], reward: str, no_code_reward: float, harness_error_reward: float) -> float:
    if not turns:
        return 0.0 if reward == "product" else no_code_reward
    return harness_error_reward


def best_reward(turns: Sequence[Turn], reward: str, no_code_reward: float, harness_error_reward: float) -> float:
    best = best_turn(turns, reward)
    return turn_reward(best, reward) if best is not None else _fallback(turns, reward, no_code_reward, harness_error_reward)  # type: ignore[return-value]


def last_reward(turns: Sequence[Turn], reward: str, no_code_reward: float, harness_error_reward: float) -> float:
    value = turn_reward(turns[-1], reward) if turns else None
    return value if value is not None else _fallback(turns, reward, no_code_reward, harness_error_reward)


def rollout_reward(turns: Sequence[Turn], reward: str, turn: str, no_code_reward: float, harness_error_reward: float) -> float:
    pick = best_reward if turn == "best" else last_reward
    return pick(turns, reward, no_code_reward, harness_error_reward)


def metrics(turns: Sequence[Turn], reward: str, no_code_reward: float, harness_error_reward: float) -> dict[str, float]:
    best = best_turn(turns, reward)
    speedups = [float(t["speedup"]) for t in turns if t.get("outcome") == "correct" and isinstance(t.get("speedup"), (int, float))]
    return {
        "best_reward": best_reward(turns, reward, no_code_reward, harness_error_reward),
        "last_reward": last_reward(turns, reward, no_code_reward, harness_error_reward),
        "best_run_correctness_score": float(best["correctness_score"]) if best else 0.0,
        "best_run_performance_score": float(best["performance_score"]) if best else 1.0,
        "test_accuracy": float(best["correctness_score"]) if best else 0.0,
        "perf_accuracy": float(best["perf_accuracy"]) if best else 0.0,
        "correct": float(any(t.get("outcome") == "correct" for t in turns)),
        "best_speedup": max(speedups, default=0.0),
        "turns": float(len(turns)),
        "harness_errors": float(sum(1 for t in turns if t.get("outcome") == "harness_error")),
    }


def keep_going(turn: Turn, feedback_loop: str) -> bool:
    """Whether the judge's feedback goes back to the model for another turn (when turns are left): always
    (``until_max_turns``), until a turn is correct (``until_correct``), never (``none``: one turn)."""
    if feedback_loop == "none":
        return False
    return not (feedback_loop == "until_correct" and turn.get("outcome") == "correct")
