"""KernelBench as a multi-turn environment of the ``verifiers`` library (the classic API: ``vf.MultiTurnEnv``).

Each turn the model's reply is searched for a ```python block that defines ``ModelNew``; the judge runs it and its
verdict is the next user message (the same words as the service's ``feedback``). The rollout's reward is the judge's
reward (``speedup - 1`` when correct; -2 incorrect ... -7 timeout) of the best turn (``reward="best"``, the default)
or of the last one (``reward="last"``); ``best_reward``, ``last_reward``, ``correct`` and ``best_speedup`` are metrics.

Installed as the environment ``kernelbench`` (``environments/kernelbench``: ``vf-install kernelbench``), then::

    vf-eval kernelbench -a '{"level": "1", "problems": "1-10", "max_turns": 4}' -m MODEL -b BASE_URL -k KEY_VAR
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import verifiers as vf

from kbagent.extract import extract_code
from kbagent.feedback import NO_CODE_OUTCOME, feedback_text, no_code_feedback
from kbagent.prompts import Target, code_messages, first_line, normalize_language
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig, pick_device
from pytest_kernelbench.problems import Problem, dataset_specs, load_subset, parse_id_ranges, parse_levels, select_problems

TURNS = "kb_turns"  # state key: one record per judged turn
REWARD_MODES = ("best", "last")


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "")) for p in content)
    return str(content or "")


def _role(message: Any) -> str:
    return str(message.get("role") if isinstance(message, dict) else getattr(message, "role", ""))


def _finish_reason(step: Any) -> str:
    message = getattr(step.get("response"), "message", None)
    return str(getattr(message, "finish_reason", "") or "")


class KernelBenchEnv(vf.MultiTurnEnv):
    """Judge the latest reply each turn (in ``env_response``), and the last one when the rollout ends."""

    def __init__(self, eval_config: EvalConfig, judges: int, no_code_reward: float, **kwargs: Any):
        super().__init__(**kwargs)
        self.eval_config = eval_config
        self.no_code_reward = no_code_reward
        self._judges = ThreadPoolExecutor(max_workers=judges, thread_name_prefix="kb-judge")

    async def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        state[TURNS] = []
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        turn = await self._judge_latest(state)
        return [vf.UserMessage(content=turn["feedback"])]

    @vf.cleanup
    async def judge_final_turn(self, state: vf.State) -> None:
        if state.get("trajectory"):
            await self._judge_latest(state)

    async def _judge_latest(self, state: vf.State) -> dict[str, Any]:
        turns, index = state.setdefault(TURNS, []), len(state["trajectory"]) - 1
        if len(turns) > index:
            return turns[index]
        step = state["trajectory"][index]
        reply = "".join(_text(m) for m in step["completion"] if _role(m) == "assistant")
        found = extract_code(reply, _finish_reason(step))
        if not found.ok:
            turn = {"turn": index + 1, "outcome": NO_CODE_OUTCOME, "reward": self.no_code_reward, "speedup": None,
                    "message": found.reason, "feedback": no_code_feedback(found.reason)}  # fmt: skip
        else:
            result = await self._judge(state["info"], found.code or "")
            turn = {"turn": index + 1, "outcome": result["outcome"], "reward": result["reward"], "speedup": result["speedup"],
                    "message": first_line(result["message"], 500), "feedback": feedback_text(result)}  # fmt: skip
        turns.append(turn)
        return turn

    async def _judge(self, info: dict[str, Any], code: str) -> dict[str, Any]:
        from pytest_kernelbench.judge.controller import evaluate

        problem = Problem(str(info["level"]), int(info["problem_id"]), str(info["name"]), str(info["source"]), "verifiers")
        candidate = Candidate(code, "", "verifiers turn")
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._judges, evaluate, problem, candidate, self.eval_config)
        return result.to_dict()


def kernel_rubric(mode: str, harness_error_reward: float, no_code_reward: float) -> vf.Rubric:
    """The reward (the best or the last turn's) and the metrics. A turn the judge itself failed on has no verdict: it
    is left out of the best, and scores ``harness_error_reward`` as the last turn or when no turn has a verdict."""

    async def best_reward(state: vf.State) -> float:
        turns = state.get(TURNS) or []
        verdicts = [t["reward"] for t in turns if t["reward"] is not None]
        return max(verdicts) if verdicts else harness_error_reward if turns else no_code_reward

    async def last_reward(state: vf.State) -> float:
        turns = state.get(TURNS) or []
        if not turns:
            return no_code_reward
        return turns[-1]["reward"] if turns[-1]["reward"] is not None else harness_error_reward

    async def harness_errors(state: vf.State) -> float:
        return float(sum(1 for t in state.get(TURNS) or [] if t["reward"] is None))

    async def correct(state: vf.State) -> float:
        return float(any(t["outcome"] == "correct" for t in state.get(TURNS) or []))

    async def best_speedup(state: vf.State) -> float:
        return max((t["speedup"] or 0.0 for t in state.get(TURNS) or [] if t["outcome"] == "correct"), default=0.0)

    async def kernel_reward(state: vf.State) -> float:
        return await (best_reward(state) if mode == "best" else last_reward(state))

    rubric = vf.Rubric(funcs=[kernel_reward], weights=[1.0])
    for metric in (best_reward, last_reward, correct, best_speedup, harness_errors):
        rubric.add_metric(metric)
    return rubric


def _rows(problems: list[Problem], target: Target, config: EvalConfig) -> list[dict[str, Any]]:
    """One row per problem, its prompt stating the tolerance of the problem's level (or the one asked for)."""
    return [{"prompt": code_messages(p.source, None, dataclasses.replace(target, tolerance=config.for_level(p.level).tol)), "answer": "",
             "info": {"problem": f"{p.level}/{p.problem_id}", "level": p.level, "problem_id": p.problem_id, "name": p.name,
                      "source": p.source}} for p in problems]  # fmt: skip


def load_environment(
    level: str = "mini",
    problems: str | list[int] | None = None,
    subset: str | None = None,
    dataset: str | list[str] | None = None,
    max_turns: int = 3,
    device: str | None = None,
    language: str | None = None,
    reward: str = "best",
    judge: dict[str, Any] | None = None,
    max_concurrent_judges: int | None = None,
    no_code_reward: float = -5.0,
    harness_error_reward: float = 0.0,
    **kwargs: Any,
) -> vf.Environment:
    """The environment. ``level``: mini (bundled), 1..4, 3-metr, ... (comma-separated); ``problems``: ids such as
    "1-5,7"; ``subset``: a file of names or level/ids, or a named subset (metr-level3); ``dataset``: KernelBench data
    (default $KERNELBENCH_DATASET); ``judge``: judge options (timeout, trials, atol, ...); ``no_code_reward``: a turn
    whose reply has no ModelNew (default -5, as a compile error); ``harness_error_reward``: a turn the judge itself
    failed on (no verdict; default 0)."""
    if reward not in REWARD_MODES:
        raise ValueError(f"reward={reward!r}: choose {' or '.join(REWARD_MODES)}")
    ids = parse_id_ranges(",".join(map(str, problems)) if isinstance(problems, list) else problems)
    datasets = dataset_specs([dataset] if isinstance(dataset, str) else dataset)
    chosen = select_problems(parse_levels(level), ids, datasets, subset=load_subset(subset))
    if not device:
        device = pick_device(None)
    config = EvalConfig(device=device, **(judge or {}))
    target = Target(normalize_language(language, device), device)
    from datasets import Dataset

    judges = max_concurrent_judges or max(1, min(8, (os.cpu_count() or 2) // 2))
    rows = Dataset.from_list(_rows(chosen, target, config))
    return KernelBenchEnv(config, judges, no_code_reward, eval_dataset=rows, max_turns=max_turns,
                          rubric=kernel_rubric(reward, harness_error_reward, no_code_reward), **kwargs)  # fmt: skip
