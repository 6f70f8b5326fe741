"""The search's evaluations: each candidate judged in a thread (at most ``eval_jobs`` at once; the
engine takes the per-device lock for timing, so compiles overlap and timings do not), spread round
robin over the visible GPUs, replayed from the run folder when judged before; and the fresh
re-judgement of the best correct candidate. A judge that raises yields an ``unknown_error`` result."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbagent.llm import one_line
from kbagent.runfolder import RunFolder
from kbagent.search.config import SearchConfig
from kbagent.search.nodes import Node
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import Problem
from pytest_kernelbench.result import EvalResult

Evaluator = Callable[[Problem, Candidate, EvalConfig], EvalResult]


def visible_gpus(eval_config: EvalConfig) -> list[int]:
    """The GPU indices evaluations may use: all visible ones on CUDA, else the configured device."""
    if eval_config.device != "cuda":
        return [eval_config.device_index]
    import torch

    return list(range(torch.cuda.device_count())) or [eval_config.device_index]


def default_eval_jobs() -> int:
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def error_result(problem: Problem, eval_config: EvalConfig, candidate: Candidate, exc: Exception) -> EvalResult:
    return EvalResult(
        problem=problem.id,
        level=problem.level,
        problem_id=problem.problem_id,
        outcome=Outcome.UNKNOWN_ERROR,
        message=one_line(f"the evaluator raised {type(exc).__name__}: {exc}"),
        device=eval_config.device_label,
        source_hash=candidate.source_hash,
        candidate_path=candidate.path,
    )


class Evaluations:
    """The evaluations of one search and their counts (``evaluations``: replayed ones included)."""

    def __init__(
        self,
        problem: Problem,
        config: SearchConfig,
        eval_config: EvalConfig,
        run: RunFolder,
        evaluator: Evaluator,
        prebuild: Callable[[Problem, Candidate], Any] | None,
    ):
        self.problem = problem
        self.cfg = config
        self.eval_config = eval_config
        self.run = run
        self.evaluator = evaluator
        self.prebuild = prebuild
        self.evaluations = self.evaluations_run = 0
        self.slots = asyncio.Semaphore(config.eval_jobs or default_eval_jobs())
        self.gpus = visible_gpus(eval_config) if config.all_gpus else [eval_config.device_index]
        self._next_gpu = 0

    async def evaluate(self, node: Node, path: Path) -> EvalResult:
        saved = self.run.saved_result(node.id)
        if saved is not None:
            self.evaluations += 1
            return saved
        candidate = Candidate(node.code or "", str(path), f"kbagent {node.id}")
        if self.prebuild is not None:  # its extension builds now, on the pool, while it waits for a slot
            self.prebuild(self.problem, candidate)
        async with self.slots:
            eval_config = dataclasses.replace(self.eval_config, profile=True)  # a GPU judge keeps a per-kernel time table for the prompt
            if len(self.gpus) > 1:  # round robin; the per-GPU timing lock keeps each GPU to one timed run
                eval_config = dataclasses.replace(eval_config, device_index=self.gpus[self._next_gpu % len(self.gpus)])
                self._next_gpu += 1
            try:
                result = await asyncio.to_thread(self.evaluator, self.problem, candidate, eval_config)
            except Exception as exc:  # noqa: BLE001 - a broken evaluator is a result, not a lost search
                result = error_result(self.problem, self.eval_config, candidate, exc)
        self.run.save_result(node.id, result)
        self.evaluations += 1
        self.evaluations_run += 1
        return result

    async def rejudge(self, best: Node | None) -> EvalResult | None:
        """The best correct candidate judged once more, fresh: its speedup is the largest of many noisy
        measurements (a copy of the reference once showed 9.9x in the search, 1.00x re-judged). New
        weights seed (inputs are fresh OS entropy on every call anyway), full timing."""
        if best is None or best.code is None or not best.correct or self.cfg.dry_run:
            return None
        eval_config = dataclasses.replace(self.eval_config, seed=secrets.randbelow(2**31))
        candidate = Candidate(best.code, "", f"kbagent {best.id} (re-judged)")
        try:
            return await asyncio.to_thread(self.evaluator, self.problem, candidate, eval_config)
        except Exception as exc:  # noqa: BLE001 - a broken evaluator is a result
            return error_result(self.problem, eval_config, candidate, exc)
