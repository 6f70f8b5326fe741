"""GPU checks of the RL surfaces (issue 47): ``kbagent serve --protocol openreward`` driven by OpenReward's client and
the verifiers v1 environment, each judging a real CUDA candidate (a committed ``load_inline`` solution) on the GPU.
They skip cleanly without a CUDA device, and without the ``openreward`` / ``verifiers`` packages."""

from __future__ import annotations

import pytest
from test_serve_live import kbagent_serve
from test_verifiers_env import load_env, rollout

from helpers import REPO, assert_reward_of_a_correct

pytestmark = pytest.mark.gpu

CUDA_SOLUTION = (REPO / "solutions" / "mini" / "1_LeakyReluScale.cuda.py").read_text()


def test_openreward_service_judges_a_cuda_candidate(tmp_path, monkeypatch):
    openreward = pytest.importorskip("openreward")
    monkeypatch.setenv("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    token = "gpu-check-token-0123456789"
    args = ("--protocol", "openreward", "--level", "mini", "--device", "cuda", "--timeout", "300", "--request-timeout", "600",
            "--token", token)  # fmt: skip
    with kbagent_serve(tmp_path / "state", tmp_path / "serve.log", *args) as (_, http):
        url = str(http.base_url).rstrip("/")
        monkeypatch.setenv("OPENREWARD_API_URL", url)
        with openreward.OpenReward(api_key=token, base_url=url) as client:
            env = client.environments.get("kernelbench", base_url=url)
            (task,) = [t for t in env.list_tasks("mini") if t.task_spec["problem"] == "mini/1"]
            with env.session(task=task) as session:
                assert "CUDA" in session.get_prompt()[0].text
                judged = session.call_tool("run_kernel", {"code": CUDA_SOLUTION})
                done = session.call_tool("finish", {})
    assert judged.metadata["outcome"] == "correct", judged.blocks[0].text
    assert_reward_of_a_correct(judged.reward, judged.metadata["speedup"])
    assert done.finished and done.reward == judged.reward


def test_verifiers_environment_judges_a_cuda_candidate(monkeypatch):
    pytest.importorskip("verifiers.v1")
    import verifiers.v1 as vf

    monkeypatch.syspath_prepend(str(REPO / "environments" / "kernelbench"))
    taskset = {"id": "kernelbench", "level": "mini", "problems": "1", "task": {"device": "cuda", "judge": {"timeout": 300.0}}}
    env = load_env(vf, taskset, max_turns=2, feedback_loop="until_correct")
    task, trace, sent = rollout(vf, env, lambda body: f"```python\n{CUDA_SOLUTION}```\n")
    assert "CUDA" in sent[0][0]["content"] and len(sent) == 1
    (turn,) = trace.info["kb_turns"]
    assert turn["outcome"] == "correct", turn["message"]
    assert_reward_of_a_correct(trace.rewards["reward"].score, turn["speedup"])
    assert trace.metrics["test_accuracy"] == 1.0
