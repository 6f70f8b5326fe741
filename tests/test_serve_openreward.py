"""``kbagent serve --protocol openreward`` driven by OpenReward's own client (the ``openreward`` package) on a loopback
port, with the real judge on the CPU: splits, tasks, the prompt, ``run_kernel`` (``code``, and ``python`` with ``cpp``),
``finish``, the token as ``X-API-Key``, and the episode in the service's log."""

from __future__ import annotations

import json
import sys

import pytest
from test_serve_live import kbagent_serve

from helpers import REPO, assert_reward_of_a_correct

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="OpenReward's SDK needs Python 3.11 or newer")

TOKEN = "s3cret-token-for-openreward"
PROBLEM = "mini/10"  # SwishResidualScale: its committed CPU solution builds no extension
SOLUTION = (REPO / "solutions" / "mini" / "10_SwishResidualScale.cpu.py").read_text()
WRONG = SOLUTION.replace("mul_(self.scale)", "mul_(self.scale * 2)")
# `python` with a `cpp` source: correct only when the service hands the source over as cpp_source
USES_CPP = SOLUTION.replace("        self.scale = scale\n", "        assert cpp_source == '// fused kernel'\n        self.scale = scale\n")


@pytest.fixture
def state():
    """The service's state folder, outside /tmp (the sandbox gives a candidate a /tmp of its own: test_serve_live)."""
    import shutil
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="kbagent-openreward-test-", dir="/var/tmp"))
    yield folder / "state"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def openreward(monkeypatch):
    module = pytest.importorskip("openreward", reason="the openreward extra is not installed: pip install -e '.[openreward]'")
    monkeypatch.setenv("OPENREWARD_DISABLE_UPDATE_CHECK", "1")  # the client would ask the package index for a newer SDK
    return module


def test_openreward_client_runs_an_episode_against_the_service(openreward, state, tmp_path, monkeypatch):
    import httpx

    assert WRONG != SOLUTION and USES_CPP != SOLUTION
    with kbagent_serve(state, tmp_path / "serve.log", "--protocol", "openreward", "--level", "mini", "--token", TOKEN) as (_, http):
        url = str(http.base_url).rstrip("/")
        monkeypatch.setenv("OPENREWARD_API_URL", url)  # the client's second (platform) address: this service too
        assert httpx.get(f"{url}/health").status_code == 200  # public, as in the SDK
        assert httpx.get(f"{url}/kernelbench/splits").status_code == 401  # no token
        assert http.get("/kernelbench/splits", headers={"X-API-Key": "wrong-token-0123456789"}).status_code == 401
        assert http.get("/kernelbench/splits").status_code == 200

        with openreward.OpenReward(api_key=TOKEN, base_url=url) as client:
            env = client.environments.get("kernelbench", base_url=url)
            splits = env.list_splits()
            assert {"dev", "mini"} <= {getattr(s, "name", s) for s in splits}
            tasks = env.list_tasks("mini")
            assert len(tasks) == 10 and len(env.list_tasks("dev")) == 1
            (task,) = [t for t in tasks if t.task_spec["problem"] == PROBLEM]
            assert {tool.name for tool in env.list_tools()} == {"run_kernel", "finish"}

            with env.session(task=task) as session:
                prompt = "".join(block.text for block in session.get_prompt())
                assert "## The reference architecture to optimize" in prompt and "clamp_value" in prompt
                wrong = session.call_tool("run_kernel", {"code": WRONG})
                right = session.call_tool("run_kernel", {"python": USES_CPP, "cpp": "// fused kernel"})
                done = session.call_tool("finish", {})

    assert wrong.reward == -2.0 and not wrong.finished and "judged incorrect" in wrong.blocks[0].text
    assert right.metadata["outcome"] == "correct"
    assert_reward_of_a_correct(right.reward, right.metadata["speedup"])
    assert "is correct" in right.blocks[0].text
    assert done.finished and done.reward == right.reward and done.metadata["best_call"] == 2

    events = [json.loads(line) for line in (state / "episodes.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "run", "run", "finish"]
    assert events[0]["problem"]["level"] == "mini" and events[0]["problem"]["problem_id"] == 10
    assert "cpp_source = '// fused kernel'" in events[2]["code"] and events[3]["best_reward"] == right.reward


def test_python_cuda_cpp_fields_become_the_candidates_source(openreward):
    from kbagent.serve.openreward import RunKernelInput, candidate_source

    python = '"""doc."""\nfrom __future__ import annotations\n\nimport torch\n'
    source = candidate_source(RunKernelInput(python=python, cuda="__global__ void k() {}", cpp="void k();"))
    assert source.startswith('"""doc."""\nfrom __future__ import annotations\ncuda_source = \'__global__ void k() {}\'\n')
    namespace: dict = {}
    exec(compile(source.replace("import torch\n", ""), "candidate", "exec"), namespace)  # the literals read back as given
    assert namespace["cuda_source"] == "__global__ void k() {}" and namespace["cpp_source"] == "void k();"
    assert candidate_source(RunKernelInput(code="x = 1\n")) == "x = 1\n"
    for bad in (RunKernelInput(), RunKernelInput(code="x", python="y"), RunKernelInput(code="x", cuda="z")):
        with pytest.raises(ValueError, match="give exactly one of|go with 'python'"):
            candidate_source(bad)


def test_openreward_protocol_needs_levels(tmp_path):
    import subprocess

    done = subprocess.run([sys.executable, "-m", "kbagent.cli", "serve", "--protocol", "openreward", "--port", "0", "--device", "cpu",
                           "--state", str(tmp_path / "s")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "--protocol openreward lists its tasks by level: give --level" in done.stderr
