"""``kbagent search`` and ``kbagent report`` as a user runs them: the scripted model, bad input, resume,
and the whole loop through litellm's real HTTP client against a local fake OpenAI server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from fake_openai import FakeOpenAIServer, Reply, Status

from helpers import REPO, TINY_PROBLEM, closed_port_url, keyless_env
from pytest_kernelbench.problems import DATASET_ENV

KEY = "sk-fake-KEY-5f3a9c0e1b"


def kbagent(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "kbagent.cli", *args], capture_output=True, text=True, timeout=timeout, env=env)


def files_under(folder):
    return [p for p in folder.rglob("*") if p.is_file()]


def test_search_json_with_the_scripted_model_then_resume_and_report(tmp_path):
    out = tmp_path / "run"
    args = ["--device", "cpu", "--trials", "2", "--out", str(out)]
    proc = kbagent("search", str(TINY_PROBLEM), "--model", "scripted/reference", "--num-samples", "1", "--num-phases", "2", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    best = data["best"]
    assert best["outcome"] == "correct" and best["speedup"] > 0 and best["path"] == str(out / "best.py")
    assert data["llm_calls"] == 3 and data["tokens"]["total"] > 0 and data["cost_usd"] == 0
    assert data["evaluations_run"] == 2 and data["stop_reason"] == "completed"
    assert "class ModelNew" in (out / "best.py").read_text()
    assert "[kbagent] p1-n0 correct" in proc.stderr  # progress goes to stderr
    for name in ("config.json", "problem.py", "tree.json", "summary.json", "ideas.json", "events.log"):
        assert (out / name).is_file(), name
    for name in ("prompt.md", "messages.json", "response.md", "reply.json", "candidate.py", "result.json", "node.json"):
        assert (out / "nodes" / "p0-i0" / name).is_file(), name

    # a finished run resumed: every call and evaluation is replayed, none redone
    again = kbagent("search", "--resume", "--out", str(out), "--json")
    assert again.returncode == 0, again.stderr
    resumed = json.loads(again.stdout)
    assert resumed["llm_calls"] == 3 and resumed["llm_calls_replayed"] == 3 and resumed["evaluations_run"] == 0
    assert resumed["best"]["node"] == best["node"]

    report = kbagent("report", str(out))
    assert report.returncode == 0, report.stderr
    assert "L9-1_TinyLinear" in report.stdout and "correct" in report.stdout
    for name in ("speedup_per_phase", "geomean_vs_phase", "speedup_vs_calls", "speedup_vs_cost", "fast_p"):
        png = out / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_resume_after_sigkill_redoes_no_finished_call_or_evaluation(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kbagent.cli", "search", str(TINY_PROBLEM), "--model", "scripted/reference", "--device", "cpu",
           "--trials", "2", "--num-samples", "1", "--num-phases", "2", "--out", str(out), "--quiet"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first_result = out / "nodes" / "p0-i0" / "result.json"
    deadline = time.monotonic() + 120
    while not first_result.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.kill()  # SIGKILL: no cleanup of any kind
    proc.wait(timeout=30)
    assert first_result.exists()
    calls = {p.parent.name for p in out.glob("nodes/*/reply.json")}
    results = {p.parent.name for p in out.glob("nodes/*/result.json")}
    assert {"ideas", "p0-i0"} <= calls and "p0-i0" in results
    assert not (out / "summary.json").exists() or not json.loads((out / "summary.json").read_text())["finished"]

    again = kbagent("search", "--resume", "--out", str(out), "--json")
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["finished"] and data["llm_calls"] == 3 and data["llm_calls_replayed"] == len(calls)
    assert data["evaluations"] == 2 and data["evaluations_run"] == 2 - len(results)
    assert data["best"]["outcome"] == "correct"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing_problem.py", "--model", "scripted/reference"], "missing_problem.py: no such problem file"),
        ([str(TINY_PROBLEM)], "--model is required"),
        ([str(TINY_PROBLEM), "--model", "scripted/reference", "--num-samples", "0"], "--num-samples 0: must be an integer >= 1"),
        ([str(TINY_PROBLEM), "--model", "scripted/reference", "--strategy", "greedy"], "unknown strategy 'greedy'"),
        ([str(TINY_PROBLEM), "--model", "scripted/nonesuch"], "unknown scripted model 'scripted/nonesuch'"),
        ([str(TINY_PROBLEM), "--model", "scripted/reference", "--num-samples", "many"], "Invalid value for '--num-samples'"),
        ([str(TINY_PROBLEM), "--model", "scripted/reference", "--device", "tpu"], "'--device': 'tpu': choose cpu, cuda"),
        (["--resume"], "--resume needs --out RUN_FOLDER"),
    ],
)
def test_search_bad_input_is_one_line_and_exit_2(args, says):
    proc = kbagent("search", *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


def test_search_refuses_a_used_run_folder_without_resume(tmp_path):
    (tmp_path / "old.txt").write_text("something")
    proc = kbagent("search", str(TINY_PROBLEM), "--model", "scripted/reference", "--device", "cpu", "--out", str(tmp_path))
    assert proc.returncode == 2 and "the folder is not empty; add --resume" in proc.stderr


def test_report_of_a_folder_without_runs_is_exit_2(tmp_path):
    proc = kbagent("report", str(tmp_path))
    assert proc.returncode == 2 and "no search runs in it" in proc.stderr


# --- end to end through litellm's real client ---------------------------------------------------

IDEAS = '```json\n["Fuse the bias add and the ReLU into the matmul epilogue."]\n```'
HEADER = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, features):\n        super().__init__()\n"
)
HEADER += "        self.linear = nn.Linear(features, features)\n\n"
SYNTAX_ERROR = f"Here it is:\n```python\n{HEADER}    def forward(self, x)\n        return torch.relu(self.linear(x))\n```\n"
WRONG_VALUES = f"Fixed:\n```python\n{HEADER}    def forward(self, x):\n        return self.linear(x)\n```\n"
CORRECT = (
    f"Fixed again:\n```python\n{HEADER}    def forward(self, x):\n"
    "        return torch.addmm(self.linear.bias, x, self.linear.weight.t()).clamp_min(0)\n```\n"
)


def test_search_fixes_its_way_to_a_correct_candidate_through_litellm(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(["OK", IDEAS, SYNTAX_ERROR, WRONG_VALUES, CORRECT], max_requests=10) as server:
        proc = kbagent(
            "search", str(TINY_PROBLEM), "--model", "openai/fake-coder", "--api-base", server.base_url, "--api-key", KEY,
            "--device", "cpu", "--trials", "2", "--num-samples", "1", "--num-phases", "1", "--max-fix-attempts", "3",
            "--out", str(out), "--json",
        )  # fmt: skip
        probe, *requests = server.requests  # the preflight's one-token request, then the search's calls
    assert proc.returncode == 0, proc.stderr
    assert probe["json"]["max_tokens"] == 1 and probe["json"]["model"] == "fake-coder"
    data = json.loads(proc.stdout)
    assert data["best"]["outcome"] == "correct" and data["best"]["node"] == "p0-i0-f2"
    assert data["outcomes"] == {"compile_error": 1, "incorrect": 1, "correct": 1}
    assert data["llm_calls"] == 4 and data["llm_errors"] == 0 and data["tokens"]["prompt"] > 0 and data["tokens"]["completion"] > 0
    assert len(requests) == 4 and all(r["json"]["model"] == "fake-coder" for r in requests)
    assert requests[0]["headers"].get("authorization") == f"Bearer {KEY}"  # the key went to the server ...

    def user_text(request):
        return request["json"]["messages"][-1]["content"]

    assert "Brainstorm up to 1 distinct ideas" in user_text(requests[0])
    assert "Fuse the bias add and the ReLU" in user_text(requests[1])
    assert "compile_error at stage 'compile'" in user_text(requests[2]) and "SyntaxError" in user_text(requests[2])
    assert "incorrect at stage 'compare'" in user_text(requests[3]) and "max abs diff" in user_text(requests[3])
    assert "return self.linear(x)" in user_text(requests[3])  # the wrong candidate itself

    for path in files_under(out):  # ... and nowhere else
        assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in proc.stdout + proc.stderr
    reply = json.loads((out / "nodes" / "p0-i0-f2" / "reply.json").read_text())
    assert reply["model"] == "openai/fake-coder" and reply["prompt_tokens"] > 0 and reply["cost_usd"] == 0


# --- fail fast: before the first LLM call, one line, exit code 2 --------------------------------


# Each of preflight's messages (an unknown provider, ...) is checked in tests/test_llm.py; here the way to them (each run
# imports litellm: 8 CPU-seconds on CI's machine).
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "gemini/gemini-2.5-pro"], "finds no GOOGLE_API_KEY or GEMINI_API_KEY in the environment; set it, or pass --api-key"),
        (["--model", "openai/local", "--api-key", KEY, "--api-base", "CLOSED"], "nothing answers there"),
    ],
)
def test_search_without_a_key_or_a_server_stops_before_any_call(tmp_path, args, says):
    out = tmp_path / "run"
    args = [closed_port_url() if a == "CLOSED" else a for a in args]
    started = time.monotonic()
    proc = kbagent("search", str(TINY_PROBLEM), *args, "--device", "cpu", "--out", str(out), env=keyless_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], proc.stderr
    assert proc.stdout == "" and KEY not in proc.stderr
    assert not (out / "nodes").exists()  # no LLM call was made, not even the brainstorm
    assert time.monotonic() - started < 90  # imports only (it used to retry for 296 s)


def test_search_refuses_a_model_the_server_does_not_list(tmp_path):
    with FakeOpenAIServer(["never asked"], models=["qwen-coder"]) as server:
        proc = kbagent("search", str(TINY_PROBLEM), "--model", "openai/qwen-codr", "--api-base", server.base_url, "--api-key", KEY,
                       "--device", "cpu", "--out", str(tmp_path / "run"), env=keyless_env())  # fmt: skip
        assert server.requests == [] and [g["path"] for g in server.gets] == ["/v1/models"]
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: --model openai/qwen-codr: the server at {server.base_url} lists no model 'qwen-codr' "
                                   "(it lists qwen-coder); use --model openai/qwen-coder")  # fmt: skip


def test_search_against_a_server_that_answers_404_to_everything_stops_after_one_request(tmp_path):
    with FakeOpenAIServer([Status(404, message="no such route")]) as server:
        proc = kbagent("search", str(TINY_PROBLEM), "--model", "openai/local", "--api-base", server.base_url, "--api-key", KEY,
                       "--device", "cpu", "--out", str(tmp_path / "run"), env=keyless_env())  # fmt: skip
        assert len(server.requests) == 1 and server.requests[0]["json"]["max_tokens"] == 1
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: --model openai/local: a one-token test request to {server.base_url} failed (NotFoundError: ")
    assert "no such route" in line and "--api-base (an OpenAI-compatible server's base usually ends in /v1)" in line
    assert not (tmp_path / "run" / "nodes").exists()


# --- honest cost ------------------------------------------------------------------------------


def test_max_cost_on_an_unpriced_model_is_an_error(tmp_path):
    with FakeOpenAIServer(["never asked"]) as server:
        proc = kbagent("search", str(TINY_PROBLEM), "--model", "openai/local", "--api-base", server.base_url, "--api-key", KEY,
                       "--max-cost", "1", "--device", "cpu", "--out", str(tmp_path / "run"), env=keyless_env())  # fmt: skip
        assert server.requests == []
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "--max-cost 1: litellm has no price for openai/local" in line and "--price-in USD --price-out USD" in line


@pytest.mark.parametrize(("args", "says"), [(["--price-in", "1"], "--price-in and --price-out go together"),
                                            (["--price-in", "-1", "--price-out", "1"], "--price-in -1: must be >= 0")])  # fmt: skip
def test_bad_prices_are_one_line(args, says):
    proc = kbagent("search", str(TINY_PROBLEM), "--model", "scripted/reference", *args)
    assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_prices_make_the_cost_and_the_cap_stops_the_search(tmp_path):
    """A local server litellm has no price for: --price-in/--price-out give each call its cost, and
    --max-cost stops starting calls once that much is spent."""
    out = tmp_path / "run"
    reply = Reply(IDEAS, prompt_tokens=100_000, completion_tokens=20_000)  # $0.30 + $0.20 at $3/$10 per million
    priced = [Reply("OK", prompt_tokens=5, completion_tokens=1), reply, Reply(CORRECT, prompt_tokens=100_000, completion_tokens=20_000)]
    with FakeOpenAIServer(priced, max_requests=10) as server:
        proc = kbagent(
            "search", str(TINY_PROBLEM), "--model", "openai/local", "--api-base", server.base_url, "--api-key", KEY,
            "--price-in", "3", "--price-out", "10", "--max-cost", "0.9", "--device", "cpu", "--trials", "2",
            "--num-samples", "2", "--num-phases", "2", "--num-workers", "1", "--out", str(out), "--json",
        )  # fmt: skip
        sent = len(server.requests)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["llm_calls"] == 2 == sent - 1  # $0.50 after the first, $1.00 after the second: the third never starts
    assert data["cost_usd"] == pytest.approx(1.0) and "cost budget of $0.9 reached ($1.0000 spent)" in data["stop_reason"]
    ideas = json.loads((out / "nodes" / "ideas" / "reply.json").read_text())
    assert ideas["cost_usd"] == pytest.approx(0.5) and ideas["prompt_tokens"] == 100_000  # recorded per call
    saved = json.loads((out / "config.json").read_text())
    assert saved["search"]["price_in"] == 3 and saved["llm"]["price_out"] == 10


# --- a dataset problem instead of a problem file: --level L --problem ID [--dataset PATH] ----------


def test_search_a_bundled_problem_by_level_and_id(tmp_path):
    out = tmp_path / "run"
    proc = kbagent("search", "--level", "mini", "--problem", "1", "--model", "scripted/reference", "--device", "cpu",
                   "--trials", "2", "--num-samples", "1", "--num-phases", "1", "--out", str(out), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["problem"]["id"] == "Lmini-1_LeakyReluScale" and data["best"]["outcome"] == "correct"
    assert (out / "problem.py").read_text() == (REPO / "problems" / "mini" / "1_LeakyReluScale.py").read_text()

    # resumed with the same problem named again: accepted; with another one: refused
    again = kbagent("search", "--resume", "--out", str(out), "--level", "mini", "--problem", "1", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["llm_calls_replayed"] == data["llm_calls"]
    other = kbagent("search", "--resume", "--out", str(out), "--level", "mini", "--problem", "2")
    assert other.returncode == 2 and f"2_RowSum.py: not the problem of the run in {out}" in other.stderr


def write_jsonl(path, *rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


TINY_ROWS = [
    {"level": 1, "problem_id": 19, "name": "19_TinyLinear.py", "code": TINY_PROBLEM.read_text()},
    {"level": 1, "problem_id": 20, "name": "20_Other", "code": TINY_PROBLEM.read_text() + "\n# other\n"},
    {"level": 2, "problem_id": 19, "name": "19_LevelTwo", "code": TINY_PROBLEM.read_text() + "\n# level two\n"},
]


@pytest.mark.parametrize("via", ["flag", "env"])
def test_search_a_problem_of_a_jsonl_dataset(tmp_path, via):
    dataset = write_jsonl(tmp_path / "problems.jsonl", *TINY_ROWS)
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != DATASET_ENV}
    if via == "env":
        env[DATASET_ENV] = str(dataset)
    given = ["--dataset", str(dataset)] if via == "flag" else []
    proc = kbagent("search", "--level", "1", "--problem", "19", *given, "--model", "scripted/reference", "--device", "cpu",
                   "--dry-run", "--num-samples", "1", "--num-phases", "1", "--out", str(out), "--json", env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    problem = json.loads(proc.stdout)["problem"]
    assert problem["id"] == "L1-19_TinyLinear" and problem["origin"] == f"{dataset}:1"
    assert (out / "problem.py").read_text() == TINY_PROBLEM.read_text()
    assert "[kbagent] 19_TinyLinear: model scripted/reference" in proc.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([str(TINY_PROBLEM), "--level", "mini", "--problem", "1"], "give a PROBLEM_FILE or --level L --problem ID [--dataset PATH]"),
        ([str(TINY_PROBLEM), "--problem", "1"], "not both"),
        (["--problem", "3"], "--problem 3 needs --level, e.g. --level mini --problem 3"),
        (["--level", "mini"], "--level mini needs --problem ID"),
        (["--level", "mini", "--problem", "99"], "--problem 99: level mini has no such problem; choose one of its ids: 1-10"),
        (["--level", "1", "--problem", "21", "--dataset", "DATASET"], "--problem 21: level 1 of DATASET has no such problem; choose one "
                                                                     "of its ids: 19-20"),
        (["--level", "3", "--problem", "1", "--dataset", "DATASET"], "--level 3: no problems of that level in DATASET"),
        (["--level", "1", "--problem", "19"], "level 1 needs KernelBench data: pass --dataset PATH"),
        (["--level", "1", "--problem", "19", "--dataset", "nowhere.jsonl"], "--dataset nowhere.jsonl: no such file or folder"),
        (["--level", "9", "--problem", "1"], "--level 9: unknown level; choose from mini, 0, 1"),
        (["--level", "mini,1", "--problem", "1"], "--level mini,1: one level only"),
        (["--level", "mini", "--problem", "one"], "Invalid value for '--problem'"),
        (["--dataset", "DATASET"], "--dataset needs --level L --problem ID"),
        ([], "missing PROBLEM_FILE or --level L --problem ID"),
    ],
)
def test_search_bad_level_or_problem_is_one_line_and_exit_2(tmp_path, args, says):
    dataset = str(write_jsonl(tmp_path / "problems.jsonl", *TINY_ROWS))
    args = [dataset if a == "DATASET" else a for a in args]
    env = {k: v for k, v in os.environ.items() if k != DATASET_ENV}
    proc = kbagent("search", *args, "--model", "scripted/reference", "--device", "cpu", "--out", str(tmp_path / "run"), env=env)
    assert proc.returncode == 2, proc.stderr
    says = says.replace("DATASET", dataset)
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == "" and not (tmp_path / "run").exists()


def test_the_resume_hint_asks_for_a_key_given_on_the_command_line_and_never_prints_it(monkeypatch, tmp_path):
    from kbagent.cli import API_KEY_ENV, resume_hint

    monkeypatch.delenv(API_KEY_ENV, raising=False)
    hint = resume_hint(tmp_path, KEY)
    assert hint.startswith(f"kbagent search --resume --out {tmp_path} --api-key KEY ") and KEY not in hint
    assert resume_hint(tmp_path, None) == f"kbagent search --resume --out {tmp_path}"
    monkeypatch.setenv(API_KEY_ENV, KEY)  # from the environment: there again on the next run
    assert resume_hint(tmp_path, KEY) == f"kbagent search --resume --out {tmp_path}"
