"""``kbagent serve`` as a user runs it, with the real judge, on a loopback port: the token it prints, concurrent
clients, a cheating candidate, an episode, then the service killed (SIGKILL) and started again on its state folder."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from helpers import BROKEN, DATA, TESTS, TINY_PROBLEM, assert_reward_of_a_correct

TINY = TINY_PROBLEM.read_text()
CHEAT = (TESTS / "adversarial" / "modifies_input.py").read_text()  # writes into its input: rejected
# a correct candidate that answers zeros (incorrect) if it can see the service's state folder, the other rollouts' code
SNOOP = """import os
import torch
import torch.nn as nn

try:
    SEEN = os.listdir({state!r})
except OSError:
    SEEN = []


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        out = torch.relu(self.linear(x))
        return out * 0 if SEEN else out
"""


@contextlib.contextmanager
def kbagent_serve(state: Path, log: Path, *extra: str):
    """The service in its own process on a free loopback port, serving the tiny level 9; killed (bounded) on leaving.
    Its client sends the token the service printed (or the ``--token`` given, as X-API-Key)."""
    args = ["serve", "--port", "0", "--device", "cpu", "--state", str(state), "--trials", "1", "--timeout", "60",
            "--request-timeout", "120", "--log-level", "warning", "--level", "9", "--dataset", str(DATA / "tiny"), *extra]  # fmt: skip
    with log.open("w") as err:
        env = {**{k: v for k, v in os.environ.items() if k != "KBAGENT_SERVE_TOKEN"}, "KB_EXTRA_LEVELS": "9"}
        proc = subprocess.Popen([sys.executable, "-m", "kbagent.cli", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, f"the service did not start: {log.read_text()}"
            time.sleep(0.1)
        printed = re.findall(r"token (\S+) \(send it as Authorization: Bearer <token> or X-API-Key: <token>\)", log.read_text())
        given = extra[extra.index("--token") + 1] if "--token" in extra else None
        assert len(printed) == (0 if given else 1), log.read_text()  # a new one is printed, once; a given one never
        headers = {"X-API-Key": given} if given else {"Authorization": f"Bearer {printed[0]}"}
        with httpx.Client(base_url=found.group(1), timeout=120, headers=headers) as client:
            yield proc, client
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def state():
    """The service's state folder, outside /tmp: the sandbox gives a candidate a /tmp of its own, which would hide a
    state folder there whatever the service asked (``./kbagent-serve``, the default, is hidden only by its mask)."""
    folder = Path(tempfile.mkdtemp(prefix="kbagent-serve-test-", dir="/var/tmp"))
    yield folder / "state"
    shutil.rmtree(folder, ignore_errors=True)


def test_concurrent_clients_a_cheat_and_an_episode_that_survives_a_kill(tmp_path, state):
    answers: dict[str, dict] = {}

    def run(name: str, code: str, client: httpx.Client) -> None:
        answers[name] = client.post("/v1/run_kernel", json={"problem": "9/1", "code": code}).json()

    def episode(client: httpx.Client) -> None:
        started = client.post("/v1/episodes", json={"problem": "9/1"}).json()
        eid = started["episode_id"]
        answers["episode_run"] = client.post(f"/v1/episodes/{eid}/run_kernel", json={"code": (BROKEN / "incorrect.py").read_text()}).json()
        answers["finish"] = client.post(f"/v1/episodes/{eid}/finish").json()

    with kbagent_serve(state, tmp_path / "first.log", "--workers", "2") as (proc, client):
        assert client.post("/v1/run_kernel", json={"problem": "9/1", "code": "x"}, headers={"Authorization": ""}).status_code == 401
        refused = client.post("/v1/run_kernel", json={"problem_code": TINY, "code": "x"})  # not without --allow-problem-code
        assert refused.status_code == 403 and "--allow-problem-code" in refused.json()["error"]
        clients = [
            threading.Thread(target=run, args=("correct", (BROKEN / "correct.py").read_text(), client)),
            threading.Thread(target=run, args=("cheat", CHEAT, client)),
            threading.Thread(target=episode, args=(client,)),
        ]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(timeout=240)
        assert all("error" not in answer for answer in answers.values()), answers
        assert answers["correct"]["outcome"] == "correct" and answers["correct"]["problem"] == "L9-1_TinyLinear"
        assert_reward_of_a_correct(answers["correct"]["reward"], answers["correct"]["speedup"])
        cheat = answers["cheat"]
        assert (cheat["outcome"], cheat["reward"]) == ("rejected", -2.0) and "modified input 0 in place" in cheat["message"]
        run_, finish = answers["episode_run"], answers["finish"]
        assert (run_["outcome"], run_["reward"], run_["call"]) == ("incorrect", -2.0, 1) and "judged incorrect" in run_["feedback"]
        assert finish["finished"] and finish["best_reward"] == -2.0 and finish["history"][0]["outcome"] == "incorrect"
        assert 'kbagent_evaluations_total{outcome="rejected"} 1' in client.get("/metrics").text
        proc.kill()  # SIGKILL: no shutdown, no flush
        proc.wait(timeout=30)

    token = "a-token-of-our-own-choosing"
    with kbagent_serve(state, tmp_path / "second.log", "--token", token, "--allow-problem-code", "--allow-host", "gpu-box") as (_, client):
        eid = finish["episode_id"]
        assert client.get(f"/v1/episodes/{eid}").json() == finish
        gpu_box = {"Host": f"gpu-box:{client.base_url.port}"}
        assert client.post("/v1/episodes", json={"problem_code": TINY}, headers=gpu_box).status_code == 200
        assert client.get("/healthz", headers={"Host": "elsewhere"}).status_code == 403
        snoop = client.post("/v1/run_kernel", json={"problem": "9/1", "code": SNOOP.format(state=str(state.resolve()))}).json()
        assert snoop["outcome"] == "correct", snoop  # the state folder (episodes.jsonl, serve.lock) looked empty
        assert client.post(f"/v1/episodes/{eid}/run_kernel", json={"code": "x"}).status_code == 409
        assert 'kbagent_episodes{state="finished"} 1' in client.get("/metrics").text
