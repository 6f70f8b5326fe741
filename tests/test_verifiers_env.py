"""The ``kernelbench`` verifiers (v1) environment with the real verifiers package, loaded the way its CLI loads it (the
module ``kernelbench`` of environments/kernelbench), a scripted model on a loopback fake OpenAI server (no key, no
network) and the real judge on the CPU.

Only the harness is stood in for: verifiers runs a model's turns as a separate chat program in a runtime (``uv`` brings
its packages from the index), so here a small in-process agent answers ``interaction(task)`` with the real OpenAI client
and a real ``vf.Trace``; the environment's feedback loop, the judge and verifiers' own scoring (``Task.score``) are the
real ones. ``nox -s verifiers03 verifiers04`` run whole rollouts through ``vf-eval`` (tests/vf_rollout.py)."""

from __future__ import annotations

import contextlib
import sys

import pytest
from fake_openai import FakeOpenAIServer

from helpers import BROKEN, DATA, REPO, assert_reward_of_a_correct

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="verifiers' v1 API needs Python 3.11 or newer")

CORRECT = (BROKEN / "correct.py").read_text()
INCORRECT = (BROKEN / "incorrect.py").read_text()
RELU = "import torch\n\n\ndef relu__default_kernel_impl(x):\n    return torch.where(x > 0, x, torch.zeros_like(x))\n"


def scripted(body: dict) -> str:
    """Turn 1: no code; turn 2: a wrong ModelNew; turn 3: a right one (the turn is the count of user messages)."""
    turn = sum(1 for m in body["messages"] if m["role"] == "user")
    if turn == 1:
        return "First I will think about the memory traffic."
    return f"Here it is:\n```python\n{INCORRECT if turn == 2 else CORRECT}```\n"


@pytest.fixture
def vf(monkeypatch):
    """verifiers.v1, with environments/kernelbench importable as ``pip install -e environments/kernelbench`` makes it."""
    pytest.importorskip("verifiers.v1", reason="the verifiers extra is not installed: pip install -e '.[verifiers]'")
    import verifiers.v1 as vf

    monkeypatch.syspath_prepend(str(REPO / "environments" / "kernelbench"))
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")  # the tiny test problem is level 9 of a KernelBench-style folder
    return vf


def load_env(vf, taskset: dict | None = None, **env: object):
    """The environment as verifiers' CLI builds it from ``--env.*`` flags (the tiny CPU problem unless ``taskset``)."""
    from verifiers.v1.utils.loaders import load_environment, resolve_env_config

    taskset = taskset or {"id": "kernelbench", "level": "9", "dataset": [str(DATA / "tiny")],
                          "task": {"device": "cpu", "judge": {"trials": 1, "timeout": 60.0}}}  # fmt: skip
    return load_environment(resolve_env_config({"taskset": taskset, **env}))


class ScriptedAgent:
    """An agent whose turns are the real OpenAI client's calls to the scripted server, recorded on a real trace."""

    def __init__(self, vf, base_url: str):
        import openai

        self.vf = vf
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
        self.traces: list = []

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        from verifiers.v1.trace import AgentInfo, TraceTask

        vf, client = self.vf, self.client
        trace = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data), agent=AgentInfo(config=vf.AgentConfig()))
        messages = [{"role": "system", "content": task.data.system_prompt}, {"role": "user", "content": task.data.prompt}]

        class Chat:
            async def turn(self, message: str | None = None):
                if message is not None:
                    messages.append({"role": "user", "content": message})
                reply = await client.chat.completions.create(model="scripted", messages=messages)
                text = reply.choices[0].message.content or ""
                messages.append({"role": "assistant", "content": text})
                return vf.Segment(messages=[vf.AssistantMessage(content=text)])

        Chat.trace = trace
        yield Chat()
        await task.score(trace)  # verifiers' scoring, as a finished rollout gets it
        self.traces.append(trace)


def rollout(vf, env, script, max_requests: int = 5):
    import asyncio

    (task,) = list(env.taskset)
    with FakeOpenAIServer(script, max_requests=max_requests, lifetime=240) as server:
        agent = ScriptedAgent(vf, server.base_url)
        asyncio.run(env.converse(task, agent))
        sent = [[m for m in r["json"]["messages"] if m["role"] == "user"] for r in server.requests]
    return task, agent.traces[0], sent


def test_multi_turn_rollout_feeds_the_judge_back_and_scores_both_rewards(vf):
    env = load_env(vf, max_turns=3)
    task, trace, sent = rollout(vf, env, scripted)
    assert len(sent) == 3  # max_turns model calls
    assert "## The reference architecture to optimize" in sent[0][0]["content"]
    assert sent[1][-1]["content"].startswith("Your reply was not judged: no code block in the reply.")
    feedback = sent[2][-1]["content"]  # the judge's verdict on turn 2 is turn 3's prompt
    assert "judged incorrect at stage 'compare'" in feedback and "reward -2.000" in feedback and "max abs diff" in feedback

    turns = trace.info["kb_turns"]
    assert [t["outcome"] for t in turns] == ["no_code", "incorrect", "correct"]
    speedup = turns[2]["speedup"]
    assert [t["reward"] for t in turns[:2]] == [-5.0, -2.0]
    assert_reward_of_a_correct(turns[2]["reward"], speedup)
    assert trace.rewards["reward"].score == turns[2]["reward"] == trace.metrics["best_reward"] == trace.metrics["last_reward"]
    m = trace.metrics
    assert (m["test_accuracy"], m["perf_accuracy"], m["best_run_correctness_score"], m["correct"]) == (1.0, 1.0, 1.0, 1.0)
    assert m["best_run_performance_score"] == m["best_speedup"] == speedup and m["turns"] == 3.0 and m["harness_errors"] == 0

    # backend-bench's reward on the same turns: correctness x performance (0 for the failed turns, the speedup last)
    product = type(task)(task.data, task.config.model_copy(update={"reward": "product", "turn": "last"}))
    import asyncio

    asyncio.run(product.score(trace))
    assert trace.rewards["reward"].score == pytest.approx(speedup) and trace.metrics["best_reward"] == pytest.approx(speedup)


def test_feedback_loop_stops_when_asked(vf):
    def always(code: str):
        return lambda body: f"```python\n{code}```\n"

    _, trace, sent = rollout(vf, load_env(vf, max_turns=3, feedback_loop="until_correct"), always(CORRECT))
    assert len(sent) == 1 and [t["outcome"] for t in trace.info["kb_turns"]] == ["correct"]
    _, trace, sent = rollout(vf, load_env(vf, max_turns=3, feedback_loop="none"), always(INCORRECT))
    assert len(sent) == 1 and trace.rewards["reward"].score == -2.0 and trace.metrics["test_accuracy"] == 0.0


def test_tasks_come_from_levels_subsets_and_op_suites(vf):
    from verifiers.v1.utils.loaders import load_taskset, taskset_config_type

    config = taskset_config_type("kernelbench")
    tasks = list(load_taskset(config(id="kernelbench", level="mini", problems="2-3", task={"device": "cpu"})))
    assert [(t.data.problem, t.data.name) for t in tasks] == [("mini/2", "2_RowSum"), ("mini/3", "3_Softmax")]
    assert "C++ (CPU)" in tasks[0].data.system_prompt + tasks[0].data.prompt
    ops = list(load_taskset(config(id="kernelbench", suite="smoke", ops="relu,add.Tensor", task={"device": "cpu"})))
    assert [(t.data.kind, t.data.op) for t in ops] == [("op", "aten.relu.default"), ("op", "aten.add.Tensor")]
    assert "add__Tensor_kernel_impl" in ops[1].data.prompt and "alpha=2" in ops[1].data.prompt
    with pytest.raises(ValueError, match="reward='mean': choose speedup, product"):
        load_taskset(config(id="kernelbench", task={"reward": "mean"}))
    with pytest.raises(ValueError, match="feedback_loop='sometimes': choose until_max_turns, until_correct, none"):
        load_env(vf, feedback_loop="sometimes")


def test_an_op_task_is_judged_on_its_suite_samples(vf):
    from verifiers.v1.utils.loaders import load_taskset, taskset_config_type

    from kbagent.verifiers_env import judging, scoring
    from pytest_kernelbench.config import EvalConfig

    config = taskset_config_type("kernelbench")
    (task,) = load_taskset(config(id="kernelbench", suite="smoke", ops="relu", task={"device": "cpu"}))
    data = task.data.model_dump()
    judge = EvalConfig(device="cpu", trials=1, timeout=120.0, process_pairs=1, min_reps=3, max_reps=5, max_time=0.5)  # a short timing
    turn = judging.judge_reply(data, f"```python\n{RELU}```", "", 1, judge, -5.0)
    assert turn["outcome"] == "correct", turn["message"]
    assert turn["correctness_score"] == 1.0 and turn["perf_accuracy"] == 1.0
    assert turn["performance_score"] == pytest.approx(turn["speedup"]) and scoring.turn_reward(turn, "product") == turn["speedup"]
    missing = judging.judge_reply(data, "```python\ndef relu(x):\n    return x\n```", "", 2, judge, -5.0)
    assert missing["outcome"] == "no_code" and "defines no function relu__default_kernel_impl" in missing["message"]
