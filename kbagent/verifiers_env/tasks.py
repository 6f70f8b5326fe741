"""The ``kernelbench`` taskset of the verifiers library's v1 API (``verifiers.v1``, verifiers 0.3.x and 0.4.x): its
tasks, their rewards and metrics, and its knobs (``--env.taskset.*``).

Tasks come from KernelBench's levels (``level``: ``mini``, ``1``..``4``, PIKE's ``3-metr``, ...; ``problems``,
``subset``, ``dataset`` as for ``pytest``) or, with ``suite`` (``smoke``, ``opinfo``), from an op suite: one task per
ATen op (``ops`` narrows them), a BackendBench-style implementation function judged as ``pytest --suite`` judges it.
The rewards are :mod:`.scoring`'s; the turns they read are written by the environment's loop (:mod:`.loop`) or, in
tool mode (``--env.taskset.task.tools true``), by the ``run_kernel`` tool (:mod:`.tools`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf
from pydantic import Field

from kbagent.prompts import Target, code_messages, normalize_language
from kbagent.verifiers_env import judging, scoring
from kbagent.verifiers_env.state import KernelState

if TYPE_CHECKING:
    from pytest_kernelbench.config import EvalConfig

TURNS_KEY = "kb_turns"  # trace.info key: the judged turns, in order


class KernelTaskData(vf.TaskData):
    kind: str = judging.KERNEL  # "kernel" (a ModelNew for a problem) or "op" (an ATen op's implementation)
    problem: str = ""  # "1/19", "mini/3", "smoke/relu.default"
    level: str = ""  # the problem's level, or the op's suite
    problem_id: int = 0
    source: str = ""  # the problem's source (kernel tasks)
    suite: str = ""  # the op suite (op tasks)
    op: str = ""  # "aten.relu.default" (op tasks)
    dtype: str = ""  # the op suite's dtype


class KernelTaskConfig(vf.TaskConfig):
    """How a task is judged and scored (``--env.taskset.task.*``)."""

    device: str = ""  # the judge's device: cpu, cuda, cpu-check; "" picks cuda where one is visible, else cpu
    judge: dict[str, Any] = Field(default_factory=dict)  # judge options: timeout, trials, atol, rtol, mode, strict, ...
    reward: str = "speedup"  # "speedup" (OpenReward's dense reward) or "product" (backend-bench's correctness x performance)
    turn: str = "best"  # the rollout's reward: the best turn's or the last one's
    no_code_reward: float = -5.0  # a reply without code to judge (as a compile error)
    harness_error_reward: float = 0.0  # when only the judge's own failures remain (no verdict)
    tools: bool = False  # tool mode: the judge as the tools run_kernel and finish, for a tool-using harness


class KernelTask(vf.Task[KernelTaskData, KernelState, KernelTaskConfig]):
    """One problem or op. Its reward and metrics read the rollout's judged turns."""

    def judged_turns(self, trace: vf.Trace) -> list[dict[str, Any]]:
        turns = trace.info.get(TURNS_KEY)
        if turns is None:
            turns = list(getattr(trace.state, "turns", []) or [])
        return list(turns)

    @vf.reward
    async def reward(self, trace: vf.Trace) -> float:
        c = self.config
        return scoring.rollout_reward(self.judged_turns(trace), c.reward, c.turn, c.no_code_reward, c.harness_error_reward)

    @vf.metric
    async def kernel_metrics(self, trace: vf.Trace) -> dict[str, float]:
        c = self.config
        return scoring.metrics(self.judged_turns(trace), c.reward, c.no_code_reward, c.harness_error_reward)

    @classmethod
    def toolsets(cls, config: KernelTaskConfig) -> list[vf.Toolset]:
        if not config.tools:
            return []
        from kbagent.verifiers_env.tools import KernelToolset, KernelToolsetConfig

        return [KernelToolset(KernelToolsetConfig(device=config.device, judge=dict(config.judge)))]


class KernelBenchConfig(vf.TasksetConfig):
    """Which tasks load (``--env.taskset.*``)."""

    level: str = "mini"  # mini (bundled), 1..4, 3-metr, ...; comma-separated
    problems: str | None = None  # problem ids, "1-5,7"
    subset: str | None = None  # a file of names or level/ids, or a named subset (metr-level3)
    dataset: list[str] = Field(default_factory=list)  # KernelBench data (default $KERNELBENCH_DATASET, then the bundled)
    suite: str | None = None  # smoke or opinfo: ATen ops of an op suite instead of problems
    ops: str | None = None  # with suite: the ops ("relu,add.Tensor")
    op_dtype: str = "float32"  # with suite: the samples' floating-point dtype
    language: str | None = None  # what the prompt asks for: cuda, triton, cpp (default: the device's)
    task: KernelTaskConfig = KernelTaskConfig()


def check(config: KernelBenchConfig) -> None:
    """Bad knobs, named before any task loads."""
    scoring.check_choice("reward", config.task.reward, scoring.REWARDS)
    scoring.check_choice("turn", config.task.turn, scoring.TURNS)
    if config.suite is not None:
        scoring.check_choice("suite", config.suite, judging.SUITES)


class KernelBenchTaskset(vf.Taskset[KernelTask, KernelBenchConfig]):
    def __init__(self, config: KernelBenchConfig) -> None:
        check(config)
        super().__init__(config)

    def load(self) -> list[KernelTask]:
        from pytest_kernelbench.config import EvalConfig, pick_device

        device = pick_device(self.config.task.device or None)
        judge = EvalConfig(device=device, **self.config.task.judge)
        run_on = "cuda" if device == "cuda" else "cpu"
        target = Target(normalize_language(self.config.language, run_on), run_on, checked=device == "cpu-check",
                        varied=judge.inputs == "varied")
        rows = op_rows(self.config, target, judge) if self.config.suite else problem_rows(self.config, target, judge)
        return [KernelTask(row, self.config.task) for row in rows]


def problem_rows(config: KernelBenchConfig, target: Target, judge: EvalConfig) -> list[KernelTaskData]:
    """One task per problem, its prompt stating the tolerance of the problem's level (or the one asked for)."""
    from pytest_kernelbench.problems import dataset_specs, load_subset, parse_id_ranges, parse_levels, select_problems

    datasets = dataset_specs(config.dataset or None)
    chosen = select_problems(parse_levels(config.level), parse_id_ranges(config.problems), datasets, subset=load_subset(config.subset))
    rows = []
    for p in chosen:
        level_target = dataclasses.replace(target, tolerance=judge.for_level(p.level).tol)
        system, user = (m["content"] for m in code_messages(p.source, None, level_target))
        rows.append(KernelTaskData(id=f"{p.level}/{p.problem_id}", name=p.name, prompt=user, system_prompt=system,
                                   problem=f"{p.level}/{p.problem_id}", level=str(p.level), problem_id=p.problem_id,
                                   source=p.source))  # fmt: skip
    return rows


OP_PROMPT = """Write a fast implementation of the PyTorch ATen operator `{op}` in {language} for {device}.

Define a Python function `{function}(*args, **kwargs)`: it takes the arguments `torch.ops.{op}` takes and returns what \
it returns. It is called with these arguments (tensors given as shape and dtype; fresh random values each call):
{samples}

Its outputs must match the operator's within {tolerance}; then it is timed against the operator on \
these arguments:
{timed}

Compute the result with your own kernel rather than by calling the operator. Reply with the complete code (imports \
included) in a single ```python block."""


def op_rows(config: KernelBenchConfig, target: Target, judge: EvalConfig) -> list[KernelTaskData]:
    from pytest_kernelbench.suites.base import parse_ops

    suite = str(config.suite)
    tasks = list(judging.suite_tasks(suite, config.op_dtype, target.device).values())
    wanted = parse_ops(config.ops)
    if wanted:
        unknown = [w for w in wanted if not any(t.matches(w) for t in tasks)]
        if unknown:
            raise ValueError(f"ops {','.join(unknown)}: not an op of the {suite} suite")
        tasks = [t for t in tasks if any(t.matches(w) for w in wanted)]
    rows = []
    for index, task in enumerate(tasks):
        prompt = OP_PROMPT.format(op=task.op, language=target.language_name, device=target.device_name,
                                  function=judging.op_function(task.op), tolerance=judge.for_level(suite).tol.describe(),
                                  samples="\n".join(f"- ({s.describe()})" for s in task.correctness[:12]),
                                  timed="\n".join(f"- ({s.describe()})" for s in task.performance))  # fmt: skip
        rows.append(KernelTaskData(id=f"{suite}/{task.name}", name=task.name, prompt=prompt, kind=judging.OP,
                                   problem=f"{suite}/{task.name}", level=suite, problem_id=index, suite=suite, op=task.op,
                                   dtype=config.op_dtype))  # fmt: skip
    return rows
