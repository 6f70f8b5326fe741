"""A real rollout of the ``kernelbench`` verifiers environment through verifiers' own CLI, on the CPU, against a scripted
OpenAI-compatible server on 127.0.0.1 (no key, no model): what the nox sessions ``verifiers03`` and ``verifiers04`` run.

    python tests/vf_rollout.py            # in a venv with verifiers 0.3.x or 0.4.x, pytest-kernelbench and uv

Turn 1 replies without code, turn 2 with a wrong ModelNew, turn 3 with a right one; the judge's verdicts are the
next user messages. Then tool mode: the model calls ``run_kernel`` with the right ModelNew and then ``finish``. The
script checks what the scripted server was sent and the rewards and metrics in the run's ``traces.jsonl``, and exits
non-zero on any mismatch. verifiers 0.4 names its command ``vf-eval``; 0.3.x names it ``eval`` (``vf-eval`` there is the
classic v0 command).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from fake_openai import FakeOpenAIServer, ToolCalls  # noqa: E402

CORRECT = (TESTS / "data" / "broken" / "correct.py").read_text()
INCORRECT = (TESTS / "data" / "broken" / "incorrect.py").read_text()
TINY = TESTS / "data" / "tiny"


def chat_script(body: dict) -> str:
    """Turn 1: no code; turn 2: a wrong ModelNew; turn 3: a right one (the turn is the count of user messages)."""
    turn = sum(1 for m in body["messages"] if m["role"] == "user")
    if turn == 1:
        return "First I will think about the memory traffic."
    return f"Here it is:\n```python\n{INCORRECT if turn == 2 else CORRECT}```\n"


def tool_script(body: dict) -> object:
    """Call run_kernel with the right ModelNew, then finish, then stop."""
    results = [m for m in body["messages"] if m["role"] == "tool"]
    if not results:
        return ToolCalls([("run_kernel", {"code": CORRECT})])
    if len(results) == 1:
        return ToolCalls([("finish", {})])
    return "Done."


def vf_command() -> list[str]:
    name = "vf-eval" if version("verifiers").startswith("0.4") else "eval"
    found = shutil.which(name) or str(Path(sys.executable).with_name(name))
    return [found]


def run_eval(server_url: str, out: Path, *extra: str) -> list[dict]:
    env = {**os.environ, "KB_EXTRA_LEVELS": "9", "FAKE_API_KEY": "unused", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    args = [*vf_command(), "kernelbench", "-m", "scripted", "--client.base-url", server_url, "--client.api-key-var", "FAKE_API_KEY",
            "--push", "False", "-o", str(out), "-n", "1", "-r", "1", "--env.taskset.level", "9", "--env.taskset.dataset",
            str(TINY), "--env.taskset.task.device", "cpu",
            "--env.agent.runtime.type", "subprocess",
            "--env.taskset.task.judge", json.dumps({"trials": 1, "timeout": 60.0}), *extra]  # fmt: skip
    if os.environ.get("KB_VF_ARGS"):  # e.g. "-v --no-serve" while debugging
        args += os.environ["KB_VF_ARGS"].split()
    done = subprocess.run(args, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    print(done.stdout[-4000:], done.stderr[-6000:], sep="\n")
    assert done.returncode == 0, f"{args[0]} exited {done.returncode}"
    files = sorted(out.rglob("traces.jsonl"))
    assert files, f"no traces.jsonl under {out}"
    episodes = [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]
    assert all(e["ok"] for e in episodes), [e.get("errors") for e in episodes]
    return [trace for e in episodes for trace in e["traces"]]  # an episode's agent runs (one here)


def check_chat(trace: dict, sent: list[list[dict]]) -> None:
    assert len(sent) == 3, f"{len(sent)} model calls, not 3"
    assert "## The reference architecture to optimize" in sent[0][0]["content"]
    assert sent[1][-1]["content"].startswith("Your reply was not judged: no code block in the reply."), sent[1][-1]
    feedback = sent[2][-1]["content"]
    assert "judged incorrect at stage 'compare'" in feedback and "reward -2.000" in feedback, feedback
    turns = trace["info"]["kb_turns"]
    assert [t["outcome"] for t in turns] == ["no_code", "incorrect", "correct"], turns
    best = turns[2]["reward"]
    speedup = turns[2]["speedup"]  # speedup - 1, or 0 for a gain the judge marked noisy (result.rewarded_speedup)
    assert abs(best - (speedup - 1)) < 1e-9 or (speedup > 1 and best == 0.0), (best, speedup)
    metrics, rewards = trace["metrics"], trace["rewards"]
    assert abs(rewards["reward"]["score"] - best) < 1e-9 and metrics["best_reward"] == metrics["last_reward"] == best, trace
    assert metrics["test_accuracy"] == 1.0 and metrics["best_run_correctness_score"] == 1.0 and metrics["turns"] == 3.0
    assert abs(metrics["best_run_performance_score"] - turns[2]["speedup"]) < 1e-9


def check_tools(trace: dict, bodies: list[dict]) -> None:
    names = {tool["function"]["name"] for tool in bodies[0].get("tools", [])}
    assert {"run_kernel", "finish"} <= names, names
    results = [m for m in bodies[-1]["messages"] if m["role"] == "tool"]
    assert "Your ModelNew is correct" in str(results[0]["content"]), results
    assert "Episode finished: best reward" in str(results[1]["content"]), results
    assert trace["metrics"]["correct"] == 1.0 and trace["metrics"]["turns"] == 1.0, trace["metrics"]
    assert trace["rewards"]["reward"]["score"] > -1.0, trace["rewards"]


def chat_rollout(tmp: Path) -> None:
    with FakeOpenAIServer(chat_script, max_requests=6, lifetime=900) as server:
        (trace,) = run_eval(server.base_url, tmp / "chat", "--env.max-turns", "3")
        sent = [[m for m in r["json"]["messages"] if m["role"] == "user"] for r in server.requests]
    check_chat(trace, sent)
    print(f"chat rollout: reward {trace['rewards']['reward']['score']:.3f}, metrics {trace['metrics']}")


def tool_rollout(tmp: Path) -> None:
    with FakeOpenAIServer(tool_script, max_requests=6, lifetime=900) as server:
        (trace,) = run_eval(server.base_url, tmp / "tools", "--env.taskset.task.tools", "true")
        bodies = [r["json"] for r in server.requests]
    check_tools(trace, bodies)
    print(f"tool rollout: reward {trace['rewards']['reward']['score']:.3f}, metrics {trace['metrics']}")


def main() -> None:
    wanted = sys.argv[1:] or ["chat", "tools"]
    with tempfile.TemporaryDirectory(prefix="kb-vf-") as tmp:
        for name in wanted:
            {"chat": chat_rollout, "tools": tool_rollout}[name](Path(tmp))
    print(f"verifiers {version('verifiers')}: {' and '.join(wanted)} rollouts as expected")


if __name__ == "__main__":
    main()
