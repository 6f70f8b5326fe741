"""``kbagent serve`` with a stand-in judge, on a loopback port in this process: request checks, the bounded queue
(429), the per-request limit, episodes and their log, metrics, and who may talk to it: the token, Host, Origin,
Content-Type and the body limit through a real server (tests/test_serve_guard.py: the guard by itself;
tests/test_serve_live.py runs the real judge)."""

from __future__ import annotations

import contextlib
import json
import math
import re
import select
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from kbagent.cli import entry
from kbagent.serve import bind
from kbagent.serve.app import ServiceSettings, create_app
from kbagent.serve.catalog import Catalog
from kbagent.serve.episodes import EpisodeStore
from kbagent.serve.schema import MAX_BODY_BYTES
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.result import EvalResult

TOKEN = "s3cret-token-of-the-tests"
JSON = {"Content-Type": "application/json"}
CODE = "class ModelNew: pass  # SPEEDUP=2\n"


class FakeJudge:
    """evaluate(): correct at the speedup a candidate names (``# SPEEDUP=x``); a candidate saying BLOCK waits for
    ``gate`` (or the stop the service sets); each call recorded."""

    def __init__(self):
        self.gate = threading.Event()
        self.calls: list[tuple[str, str]] = []
        self.configs = []

    def __call__(self, problem, candidate, config, stop=None):
        self.calls.append((problem.id, config.device))
        self.configs.append(config)
        result = EvalResult(problem=problem.id, level=problem.level, problem_id=problem.problem_id, outcome=Outcome.CORRECT,
                            stage="done", device=config.device_label, extra={"interval": [0.5, math.inf]})  # fmt: skip
        if "BLOCK" in candidate.source:
            began = time.monotonic()
            while not self.gate.is_set():
                if stop is not None and stop.wait(0.02):  # stopped in the candidate's own stage, as the real judge says it
                    result.outcome, result.stage = Outcome.UNKNOWN_ERROR, "run"
                    result.stage_seconds = {"run": time.monotonic() - began}
                    return result
        found = re.search(r"SPEEDUP=([\d.]+)", candidate.source)
        result.speedup = float(found.group(1)) if found else 1.0
        return result


@contextlib.contextmanager
def service(tmp_path, judge, *, workers=2, queue=8, request_timeout=30.0, problem_code=False, hosts=(), headers=None):
    """The app under uvicorn on 127.0.0.1, a free port, in a thread; stopped (bounded) on leaving. Its client sends
    the token (``headers``: instead of it)."""
    settings = ServiceSettings(tmp_path / "state", Catalog(None, [], None), {"timeout": 60.0}, "cpu", 0, workers, queue,
                               request_timeout, TOKEN, problem_code, hosts)  # fmt: skip
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(settings, judge), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the service did not start"
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"} if headers is None else headers
        with httpx.Client(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", timeout=30, headers=headers) as client:
            yield client
    finally:
        judge.gate.set()
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error, str) and error and "\n" not in error
    return error


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"{not json", 400, "the body is not JSON"),
        (b"[1, 2]", 400, "the body is a JSON list"),
        ({"problem": "mini/1"}, 400, "'code' must be a non-empty string (missing 'code')"),
        ({"problem": "mini/1", "problem_code": "class Model: ...", "code": CODE}, 400, "give exactly one of 'problem'"),
        ({"problem": "nineteen", "code": CODE}, 400, "is not level/id; write it like \"1/19\""),
        ({"problem": "mini/1", "code": CODE, "tmeout": 5}, 400, "unknown field 'tmeout'"),
        ({"problem": "mini/1", "code": CODE, "trials": "3"}, 400, "'trials' must be an integer, not str"),
        ({"problem": "mini/1", "code": CODE, "timeout": 600}, 400, "at most this service's 60 s"),
        ({"problem": "mini/1", "code": CODE, "device": "tpu"}, 400, "'device' 'tpu': choose cpu, cuda"),
        ({"problem": "mini/1", "code": CODE, "device": "cuda"}, 400, "this service sees no CUDA device"),
        ({"problem": "mini/1", "code": CODE, "sandbox": "off"}, 400, "unknown field 'sandbox'"),
        ({"problem": "mini/99", "code": CODE}, 404, "problem mini/99: level mini has no such problem; its ids: 1, 2"),
        ({"problem": "7/1", "code": CODE}, 404, "--level 7: unknown level"),
        ({"problem_code": "x = 1", "code": CODE}, 400, "'problem_code' must be a KernelBench problem"),
    ],
)
def test_a_malformed_request_gets_one_line_naming_the_fix(tmp_path, body, status, says):
    judge = FakeJudge()
    with service(tmp_path, judge) as client:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        error = one_line_error(client.post("/v1/run_kernel", content=content, headers=JSON), status)
        assert says in error
        assert judge.calls == []  # nothing was judged


def test_routes_sizes_and_the_answer_of_a_good_request(tmp_path):
    judge = FakeJudge()
    with service(tmp_path, judge) as client:
        assert "no route /v2/run" in one_line_error(client.post("/v2/run", json={}), 404)
        assert "GET is not allowed" in one_line_error(client.get("/v1/run_kernel"), 405)
        big = {"problem": "mini/1", "code": "#" * 2_100_000}
        assert "over the limit" in one_line_error(client.post("/v1/run_kernel", json=big), 413)
        answer = client.post("/v1/run_kernel", json={"problem": "mini/3", "code": CODE, "trials": 2})
        assert answer.status_code == 200
        data = answer.json()
        assert data == EvalResult.from_dict(data).to_dict()  # exactly an EvalResult's JSON, as kbagent eval --json prints
        assert data["outcome"] == "correct" and data["reward"] == 1.0 and data["problem"] == "Lmini-3_Softmax"
        assert data["extra"]["interval"] == [0.5, None]  # strict JSON: no Infinity
        listing = client.get("/v1/problems", params={"level": "mini"}).json()["problems"]
        assert listing[0] == {"problem": "mini/1", "name": "1_LeakyReluScale", "level": "mini", "problem_id": 1}


def test_the_token_guards_every_route_but_health(tmp_path):
    judge = FakeJudge()
    with service(tmp_path, judge, headers={}) as client:
        body = {"problem": "mini/1", "code": CODE}
        error = one_line_error(client.post("/v1/run_kernel", json=body), 401)
        assert "Authorization: Bearer <token> or X-API-Key: <token>" in error
        for wrong in ({"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {"Authorization": TOKEN},
                      {"Authorization": f"Basic {TOKEN}"}, {"X-API-Key": TOKEN[:-1]}):  # fmt: skip
            answer = client.post("/v1/run_kernel", json=body, headers=wrong)
            assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer", wrong
        assert client.get("/metrics").status_code == 401 and client.get("/v1/episodes/x").status_code == 401
        assert client.get("/healthz").json()["status"] == "ok"
        assert judge.calls == []
        for good in ({"Authorization": f"Bearer {TOKEN}"}, {"Authorization": f"bearer  {TOKEN}"}, {"X-API-Key": TOKEN}):
            answer = client.post("/v1/run_kernel", json=body, headers=good)
            assert answer.status_code == 200 and answer.json()["reward"] == 1.0, good
        assert metric(client, 'kbagent_refused_total{status="401"}', headers={"X-API-Key": TOKEN}) == 8


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({"Host": "evil.example:{port}"}, 403, "Host 'evil.example:{port}' is not this service's address"),  # DNS rebinding
        ({"Host": "127.0.0.1:1"}, 403, "is not this service's address"),
        ({"Host": "evil.example:{port}", "Origin": "http://evil.example:{port}"}, 403, "is not this service's address"),
        ({"Origin": "http://evil.example"}, 403, "a request with Origin 'http://evil.example' (a web page's) is refused"),
        ({"Origin": "null"}, 403, "Origin 'null'"),
        ({"Origin": "http://localhost:{port}"}, 403, "Origin 'http://localhost:{port}'"),  # not the Host it came with
        ({"Content-Type": "text/plain"}, 415, "Content-Type 'text/plain': send the body as JSON with Content-Type: application/json"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type 'application/x-www-form-urlencoded'"),
        ({"Content-Type": ""}, 415, "Content-Type '(none)'"),
    ],
)
def test_a_request_from_a_web_page_or_for_another_host_is_refused(tmp_path, headers, status, says):
    judge = FakeJudge()
    with service(tmp_path, judge, problem_code=True) as client:
        port = str(client.base_url.port)
        headers = {k: v.replace("{port}", port) for k, v in headers.items()}
        body = json.dumps({"problem_code": "class Model: ...\ndef get_inputs(): ...", "code": CODE})
        headers = {"Content-Type": "application/json", **headers}
        error = one_line_error(client.post("/v1/run_kernel", content=body, headers=headers), status)
        assert says.replace("{port}", port) in error
        assert judge.calls == []  # the problem's code never ran
        assert metric(client, f'kbagent_refused_total{{status="{status}"}}') == 1


def test_the_service_answers_to_its_own_names(tmp_path):
    with service(tmp_path, FakeJudge(), hosts=("gpu-box", "proxy.lan:443")) as client:
        port = client.base_url.port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", f"gpu-box:{port}", "proxy.lan:443"):
            answer = client.post("/v1/run_kernel", json={"problem": "mini/1", "code": CODE}, headers={"Host": host})
            assert answer.status_code == 200, (host, answer.text)
        same_origin = {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
        assert client.post("/v1/run_kernel", json={"problem": "mini/1", "code": CODE}, headers=same_origin).status_code == 200
        for host in ("gpu-box", "proxy.lan:{port}", f"gpu-box.evil:{port}"):
            assert client.get("/healthz", headers={"Host": host.format(port=port)}).status_code == 403, host


def chunked_upload(port: int, limit: int, total: int) -> tuple[bytes, int]:
    """POST a chunked body of ``total`` bytes, 64 KiB a chunk, stopping as soon as an answer can be read; the
    answer and the bytes sent by then."""
    chunk = b"x" * 65536
    head = (f"POST /v1/run_kernel HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()  # fmt: skip
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        sock.sendall(head)
        deadline = time.monotonic() + 60
        while sent < total and time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock], [], 1.0)
            if readable:
                break
            if writable:
                try:
                    sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                except OSError:  # the service closed the connection within this chunk: its answer is waiting
                    sent += len(chunk)  # what it read of it put the body over the limit (seen: 30 chunks counted, 1966080)
                    break
                sent += len(chunk)
        answer = b""
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                answer += data
    return answer, sent


def test_a_chunked_body_is_stopped_at_the_limit_as_it_arrives(tmp_path):
    judge = FakeJudge()
    with service(tmp_path, judge) as client:
        answer, sent = chunked_upload(client.base_url.port, MAX_BODY_BYTES, 512 * 2**20)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), answer[:300]
        assert b"connection: close" in head.lower()
        assert "over the limit of 2000000 bytes" in json.loads(body)["error"]
        # the answer came while the client was still sending: after the limit and what sockets buffer, not 512 MiB
        assert MAX_BODY_BYTES < sent < MAX_BODY_BYTES + 8 * 2**20, sent
        assert judge.calls == []
        assert client.get("/healthz").status_code == 200  # and the service goes on


def test_the_state_folder_is_hidden_from_the_candidate(tmp_path):
    judge = FakeJudge()
    with service(tmp_path, judge) as client:
        client.post("/v1/run_kernel", json={"problem": "mini/1", "code": CODE, "trials": 1})
    assert judge.configs[0].hide == (str((tmp_path / "state").resolve()),)
    assert "hide" not in judge.configs[0].public()  # a folder of this machine: never in a report


def test_problem_code_is_refused_unless_allowed(tmp_path):
    problem = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\n"
    judge = FakeJudge()
    with service(tmp_path, judge) as client:  # the default
        for path, body in (("/v1/episodes", {"problem_code": problem}), ("/v1/run_kernel", {"problem_code": problem, "code": CODE})):
            error = one_line_error(client.post(path, json=body), 403)
            assert "the judge's reference" in error and "--allow-problem-code" in error
        assert judge.calls == []
        assert client.post("/v1/run_kernel", json={"problem": "mini/1", "code": CODE}).status_code == 200
    with service(tmp_path, judge, problem_code=True) as client:
        answer = client.post("/v1/run_kernel", json={"problem_code": problem, "name": "7_Mine", "code": CODE}).json()
        assert answer["problem"] == "Lfile-7_Mine" and answer["outcome"] == "correct"
        client.post("/v1/run_kernel", json={"problem": "mini/1", "code": CODE})
        started = client.post("/v1/episodes", json={"problem_code": problem, "name": "7_Mine"}).json()
        client.post(f"/v1/episodes/{started['episode_id']}/run_kernel", json={"code": CODE})
        sent = client.post("/v1/run_kernel", json={"problem_code": problem, "code": CODE, "device": "cpu-check"})
        assert "cpu-check" in one_line_error(sent, 400)
    # a served problem is the judge's own; a client's runs only in sandboxed runners (problem_sandbox)
    assert [c.problem_sandbox for c in judge.configs] == [False, True, False, True]


def wait_for(client: httpx.Client, what, seconds: float = 10.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        health = client.get("/healthz").json()
        if what(health):
            return health
        time.sleep(0.02)
    raise AssertionError(f"the service never got there: {health}")


def metric(client: httpx.Client, name: str, headers: dict[str, str] | None = None) -> float:
    text = client.get("/metrics", headers=headers).text
    for line in text.splitlines():
        assert line.startswith("#") or re.fullmatch(r'[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [\d.e+-]+', line), line
        if line.split(" ")[0] == name:
            return float(line.split(" ")[1])
    raise AssertionError(f"{name} not in /metrics")


def test_a_full_queue_answers_429_with_retry_after_and_metrics_show_it(tmp_path):
    judge = FakeJudge()
    with service(tmp_path, judge, workers=1, queue=1) as client:
        answers: list[httpx.Response] = []
        body = {"problem": "mini/1", "code": "# BLOCK SPEEDUP=3\n"}
        posts = [threading.Thread(target=lambda: answers.append(client.post("/v1/run_kernel", json=body))) for _ in range(2)]
        for post in posts:
            post.start()
        wait_for(client, lambda h: h["in_flight"] == 1 and h["queue_depth"] == 1)
        refused = client.post("/v1/run_kernel", json=body)
        assert "queue is full" in one_line_error(refused, 429)
        assert int(refused.headers["Retry-After"]) >= 1
        assert metric(client, "kbagent_queue_depth") == 1 and metric(client, "kbagent_in_flight") == 1
        assert metric(client, "kbagent_rejected_total") == 1
        judge.gate.set()
        for post in posts:
            post.join(timeout=20)
        assert [a.status_code for a in answers] == [200, 200] and {a.json()["reward"] for a in answers} == {2.0}
        assert metric(client, 'kbagent_evaluations_total{outcome="correct"}') == 2
        assert metric(client, 'kbagent_requests_total{route="/v1/run_kernel",status="429"}') == 1


def test_the_per_request_limit_stops_an_evaluation(tmp_path):
    with service(tmp_path, FakeJudge(), request_timeout=0.5) as client:
        started = time.monotonic()
        data = client.post("/v1/run_kernel", json={"problem": "mini/1", "code": "# BLOCK\n"}).json()
        assert time.monotonic() - started < 10
        assert data["outcome"] == "timeout" and data["reward"] == -7.0
        assert "0.5 s request limit passed during stage 'run'" in data["message"]


def test_an_episode_keeps_its_history_and_finish_returns_the_best(tmp_path):
    judge = FakeJudge()
    with service(tmp_path, judge) as client:
        started = client.post("/v1/episodes", json={"problem": "mini/2", "trials": 1}).json()
        episode = started["episode_id"]
        prompt = "\n".join(m["content"] for m in started["prompt"])
        assert "class Model(nn.Module)" in prompt and "C++ (CPU)" in prompt  # the task, in the language for the CPU
        assert [t["function"]["name"] for t in started["tools"]] == ["run_kernel", "finish"]
        runs = [client.post(f"/v1/episodes/{episode}/run_kernel", json={"code": f"# SPEEDUP={s}\n"}).json() for s in (3, 1.5)]
        assert [r["call"] for r in runs] == [1, 2] and [r["reward"] for r in runs] == [2.0, 0.5]
        assert runs[1]["best_reward"] == 2.0 and "1.500x the reference's speed" in runs[1]["feedback"]
        finished = client.post(f"/v1/episodes/{episode}/finish").json()
        assert finished["finished"] and finished["best_reward"] == 2.0 and finished["best_call"] == 1
        assert finished["rewards"] == [2.0, 0.5] and finished["last_reward"] == 0.5
        assert client.post(f"/v1/episodes/{episode}/finish").json() == finished  # finish again: the same answer
        assert "is finished" in one_line_error(client.post(f"/v1/episodes/{episode}/run_kernel", json={"code": CODE}), 409)
        assert "no episode 'nope'" in one_line_error(client.get("/v1/episodes/nope"), 404)
        assert judge.calls == [("Lmini-2_RowSum", "cpu")] * 2
    # the log on disk holds it all: read back by a new store, as a restarted service does
    (tmp_path / "state" / "episodes.jsonl").open("a").write('{"event": "run", "episode": "')  # a line cut short by a kill
    assert EpisodeStore(tmp_path / "state").get(episode).summary() == finished


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--token", "short"], "error: --token has 5 characters: give at least 16 (or leave it out: one is generated and printed)"),
        (["--token", "a token with spaces"], "error: --token must be printable ASCII without spaces (it travels in an HTTP header)"),
        (["--allow-host", "evil.example/x"], "error: --allow-host 'evil.example/x': give a host name or address, optionally with its port"),
        (["--level", "mini", "--subset", "nope"], "error: --subset nope: no such file and no such named subset"),
        (["--workers", "0"], "error: --workers must be at least 1"),
    ],
)
def test_serve_refuses_to_start_with_one_line(tmp_path, capsys, monkeypatch, args, says):
    monkeypatch.delenv("KBAGENT_SERVE_TOKEN", raising=False)
    with pytest.raises(SystemExit) as info:
        entry(["serve", "--device", "cpu", "--state", str(tmp_path / "state"), *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(says) and err.count("\n") == 1
