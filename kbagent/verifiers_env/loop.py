"""The ``kernelbench`` environment's episode: multi-turn, with the judge's verdict as the next user message.

The model answers the task's prompt; the reply's last ```python block that defines ``ModelNew`` (for an op, the
function the task names) is judged in this process (sandboxed, as ``pytest`` judges it), and the verdict goes back as
the next user turn while ``feedback_loop`` says so and turns are left: ``until_max_turns`` (always), ``until_correct``
(until a turn is correct), ``none`` (one turn). Knobs: ``--env.max-turns``, ``--env.feedback-loop``,
``--env.max-concurrent-judges``. In tool mode (``--env.taskset.task.tools true``) the agent runs once and judges
through the ``run_kernel`` / ``finish`` tools instead.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from kbagent.verifiers_env import judging, scoring
from kbagent.verifiers_env.tasks import TURNS_KEY, KernelTaskConfig


class KernelBenchEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})
    """The policy's seat; a tool-less chat loop by default (the `null` harness)."""
    max_turns: int = Field(3, ge=1)
    """Model replies judged per rollout at most."""
    feedback_loop: str = "until_max_turns"
    """until_max_turns, until_correct or none (backend-bench's choices)."""
    max_concurrent_judges: int = Field(0, ge=0)
    """Evaluations at once in this process; 0: half the cores, at most 8."""


class KernelBenchEnv(vf.Env[KernelBenchEnvConfig]):
    def __init__(self, config: KernelBenchEnvConfig) -> None:
        scoring.check_choice("feedback_loop", config.feedback_loop, scoring.FEEDBACK_LOOPS)
        super().__init__(config)
        workers = config.max_concurrent_judges or max(1, min(8, (os.cpu_count() or 2) // 2))
        self._judges = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kb-judge")
        self._configs: dict[str, Any] = {}

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        if isinstance(task.config, KernelTaskConfig) and task.config.tools:
            await agents.agent.run(task)
            return
        await self.converse(task, agents.agent)

    async def converse(self, task: vf.Task, agent: vf.Agent) -> None:
        """The feedback loop: reply, judge, feed the verdict back; each judged turn recorded on the trace."""
        turns: list[dict[str, Any]] = []
        async with agent.interaction(task) as chat:
            segment = await chat.turn()
            for index in range(1, self.config.max_turns + 1):
                if segment.terminated:
                    break
                calls = chat.trace.calls
                finish_reason = str(calls[-1].finish_reason or "") if calls else ""
                turn = await self.judge_reply(task, segment.last_reply, finish_reason, index)
                turns.append(turn)
                chat.trace.info[TURNS_KEY] = list(turns)
                if index == self.config.max_turns or not scoring.keep_going(turn, self.config.feedback_loop):
                    break
                segment = await chat.turn(turn["feedback"])

    async def judge_reply(self, task: vf.Task, reply: str, finish_reason: str, index: int) -> dict[str, Any]:
        config: KernelTaskConfig = task.config  # type: ignore[assignment]
        data = task.data.model_dump()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._judges, judging.judge_reply, data, reply, finish_reason, index,
                                          self.eval_config(config), config.no_code_reward)  # fmt: skip

    def eval_config(self, config: KernelTaskConfig) -> Any:
        """The judge's settings for a task config (built once: picking the device asks torch)."""
        key = f"{config.device}|{sorted(config.judge.items())}"
        if key not in self._configs:
            from pytest_kernelbench.config import EvalConfig, pick_device

            self._configs[key] = EvalConfig(device=pick_device(config.device or None), **config.judge)
        return self._configs[key]
