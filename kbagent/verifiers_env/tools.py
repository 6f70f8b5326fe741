"""The judge as a verifiers ``Toolset`` (tool mode, ``--env.taskset.task.tools true``): ``run_kernel`` judges the code
it is given for the rollout's task and answers the verdict (the same words as the chat loop's feedback); ``finish`` ends
the episode with the best reward so far, as in OpenReward's KernelBench environment. Every judged call is one turn of
the rollout's state, which the task's reward and metrics read.

verifiers starts this module as its own process per rollout (``python -m kbagent.verifiers_env.tools``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from kbagent.verifiers_env import judging, scoring
from kbagent.verifiers_env.state import KernelState


class KernelToolsetConfig(vf.ToolsetConfig):
    device: str = ""
    judge: dict[str, Any] = Field(default_factory=dict)


class KernelToolset(vf.Toolset[KernelToolsetConfig, KernelState]):
    TOOL_PREFIX = None  # the tools are run_kernel and finish, as OpenReward names them

    def __init__(self, config: KernelToolsetConfig) -> None:
        super().__init__(config)
        self.task: dict[str, Any] | None = None
        self._config = None

    async def setup_task(self, task: Any) -> None:
        self.task = task.model_dump() if hasattr(task, "model_dump") else dict(task)

    def eval_config(self):
        if self._config is None:
            from pytest_kernelbench.config import EvalConfig, pick_device

            self._config = EvalConfig(device=pick_device(self.config.device or None), **self.config.judge)
        return self._config

    @vf.tool
    async def run_kernel(self, code: str) -> str:
        """Judge your code against the task's reference: correctness on fresh inputs, then speed. `code` is the complete
        Python source (for a KernelBench problem it defines `class ModelNew`; for an op, the function the task names).
        Answers the outcome, the reward (speedup - 1 when correct; -2 incorrect ... -7 timeout) and the judge's message."""
        state = self.state
        if state.finished:
            return "The episode is finished; run_kernel judges nothing more."
        if self.task is None:
            return "This tool server has no task (not started for a rollout)."
        index = len(state.turns) + 1
        try:
            result = await asyncio.to_thread(judging.judge, self.task, code, self.eval_config())
            turn = judging.judged_turn(index, self.task, result)
        except Exception as exc:  # the judge's own failure: no reward
            turn = judging.harness_failure(index, exc)
        state.turns.append(turn)
        return turn["feedback"]

    @vf.tool
    async def finish(self) -> str:
        """End the episode: its reward is the best reward of its run_kernel calls."""
        state = self.state
        state.finished = True
        best = scoring.best_turn(state.turns, "speedup")
        if best is None:
            return f"Episode finished after {len(state.turns)} run_kernel call(s), none with a verdict."
        return f"Episode finished: best reward {best['reward']:+.3f} (call {best['turn']} of {len(state.turns)})."


if __name__ == "__main__":
    KernelToolset.run()
