"""``pytest --model ...``: kbagent's pytest plugin runs a search per item, the item judges the best
candidate, and the saved candidate re-checks later with ``--solutions``."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch  # noqa: F401 - imported before pytester snapshots sys.modules: torch must not be imported twice
from fake_openai import FakeOpenAIServer

from helpers import DATA, drop_credentials
from kbagent.budget import LEDGER_NAME, SessionBudget

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
TINY_ARGS = ["--level", "9", "--dataset", str(DATA / "tiny"), "--device", "cpu", "--trials", "2", "-p", "no:cacheprovider"]
SEARCH_ARGS = ["--model", "scripted/reference", "--num-samples", "1", "--num-phases", "1"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "KERNELBENCH_DATASET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")  # the tiny test problem lives under level9/


def test_model_runs_a_search_per_item_judges_and_saves_the_best(pytester):
    out, junit = pytester.path / "runs", pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(*TINY_ARGS, *SEARCH_ARGS, "--out", str(out), f"--junitxml={junit}", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*L9-1_TinyLinear*PASSED*", f"kbagent: run folders in {out}*--solutions {out / 'best'}*"])

    summary = json.loads((out / "L9-1_TinyLinear" / "summary.json").read_text())
    assert summary["llm_calls"] == 2 and summary["best"]["outcome"] == "correct" and summary["evaluations_run"] == 1
    saved = out / "best" / "level9" / "1_TinyLinear.cpu.py"
    assert saved.read_text() == (out / "L9-1_TinyLinear" / "best.py").read_text()
    assert "class ModelNew" in saved.read_text()

    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["outcome"] == "correct" and props["kbagent_llm_calls"] == "2"
    assert props["kbagent_run"] == str(out / "L9-1_TinyLinear")

    # the saved candidate is a solutions folder: commit it, re-check it without any model
    recheck = pytester.runpytest_subprocess(*TINY_ARGS, "--solutions", str(out / "best"), "-v")
    recheck.assert_outcomes(passed=1)


def test_dry_run_searches_without_evaluating_and_skips(pytester):
    out = pytester.path / "runs"
    result = pytester.runpytest_subprocess(*TINY_ARGS, *SEARCH_ARGS, "--num-phases", "2", "--dry-run", "--out", str(out), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*--dry-run: searched without evaluating (3 LLM calls); best candidate saved to*"])
    summary = json.loads((out / "L9-1_TinyLinear" / "summary.json").read_text())
    assert summary["evaluations"] == 0 and summary["phases_done"] == 2
    assert (out / "best" / "level9" / "1_TinyLinear.cpu.py").is_file()


def test_no_candidate_at_all_fails_the_item_with_the_reason(pytester, tmp_path):
    replies = tmp_path / "prose.json"
    replies.write_text(json.dumps(["I would rather not write code today."]))
    out = pytester.path / "runs"
    result = pytester.runpytest_subprocess(*TINY_ARGS, "--model", f"scripted/{replies}", "--num-samples", "2", "--out", str(out))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*kbagent: no candidate for L9-1_TinyLinear: unusable replies: no code block in the reply (x*"])


def test_bad_search_option_is_a_usage_error(pytester):
    result = pytester.runpytest_subprocess(*TINY_ARGS, *SEARCH_ARGS, "--strategy", "greedy")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: unknown strategy 'greedy': choose one of lineage-topk*"])


# --- fail fast: one usage error at session start, not one error per item ------------------------


# Each of preflight's messages (an unknown provider, an --api-base where nothing answers, ...) is checked in
# tests/test_llm.py, and `kbagent search` shows two of them (tests/test_agent_cli.py); here the session's way to them
# (each run imports litellm: 8 CPU-seconds on CI's machine).
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "gemini/gemini-2.5-pro"], "ERROR: --model gemini/gemini-2.5-pro: no credentials for gemini: *--api-key*"),
        (["--model", "openai/local", "--api-key", "sk-x", "--api-base", "SERVER", "--max-cost", "2"],
         "ERROR: --max-cost 2: litellm has no price for openai/local*--price-in USD --price-out USD*"),
        pytest.param(["--model", "openai/local", "--api-key", "sk-x", "--api-base", "SERVER", "--max-cost-per-task", "0.5"],
                     "ERROR: --max-cost-per-task 0.5: litellm has no price for openai/local*",
                     marks=pytest.mark.full),  # the check above, through the per-task cap: litellm again
        (["--model", "scripted/reference", "--max-cost", "0"], "ERROR: --max-cost 0: must be a positive number of dollars"),
        (["--model", "scripted/reference", "--max-cost-per-task", "-1"], "ERROR: --max-cost-per-task -1: must be a positive*"),
    ],
)  # fmt: skip
def test_no_key_no_price_or_a_bad_cap_is_one_usage_error_before_any_item(pytester, monkeypatch, args, says):
    drop_credentials(monkeypatch)
    out = pytester.path / "runs"
    with FakeOpenAIServer(["never asked"]) as server:
        args = [server.base_url if a == "SERVER" else a for a in args]
        result = pytester.runpytest_subprocess(*TWO_ITEMS_ARGS(pytester), *args, "--num-samples", "1", "--out", str(out))
        assert server.requests == []
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, result.stderr.lines
    result.stderr.fnmatch_lines([says])
    assert not out.exists()  # no item ran, no search started


# --- the session's dollar cap ---------------------------------------------------------------------


def two_items(pytester) -> Path:
    """A dataset of two copies of the tiny problem (level 9, ids 1 and 2)."""
    code = (DATA / "tiny" / "level9" / "1_TinyLinear.py").read_text()
    rows = [{"level": 9, "problem_id": i, "name": f"{i}_TinyLinear.py", "code": code} for i in (1, 2)]
    path = pytester.path / "two.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def TWO_ITEMS_ARGS(pytester) -> list[str]:  # noqa: N802 - reads like the constant lists above
    return ["--level", "9", "--dataset", str(two_items(pytester)), "--device", "cpu", "--trials", "2", "-p", "no:cacheprovider"]


PRICED = ["--model", "scripted/reference", "--num-samples", "1", "--num-phases", "1", "--price-in", "1000", "--price-out", "1000"]


def ledger(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / LEDGER_NAME).read_text().splitlines()]


def test_max_cost_caps_the_session_across_items_and_per_task_caps_each(pytester):
    # uncapped: what each call of the first item costs (scripted replies, token counts x the given prices)
    free = pytester.path / "free"
    pytester.runpytest_subprocess(*TWO_ITEMS_ARGS(pytester), *PRICED, "--out", str(free)).assert_outcomes(passed=2)
    calls = ledger(free)
    assert [(c["task"], c["call"]) for c in calls] == [("L9-1_TinyLinear", "ideas"), ("L9-1_TinyLinear", "p0-i0"),
                                                       ("L9-2_TinyLinear", "ideas"), ("L9-2_TinyLinear", "p0-i0")]  # fmt: skip
    reply = json.loads((free / "L9-1_TinyLinear" / "nodes" / "ideas" / "reply.json").read_text())
    tokens = reply["prompt_tokens"] + reply["completion_tokens"]
    assert tokens > 0 and calls[0]["cost_usd"] == pytest.approx(tokens * 1000 / 1e6)  # $1000 per million, in and out
    first, second = calls[0]["cost_usd"], calls[1]["cost_usd"]

    # --max-cost between the first call and the first item's whole cost: item 1 runs, item 2 starts no call
    capped = pytester.path / "capped"
    cap = f"{first + second / 2:.6f}"
    result = pytester.runpytest_subprocess(*TWO_ITEMS_ARGS(pytester), *PRICED, "--max-cost", cap, "--out", str(capped), "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([f"*L9-2_TinyLinear: session cost budget of ${float(cap):g} reached*"])
    result.stdout.fnmatch_lines([f"kbagent: ${first + second:.4f} spent on LLM calls under {capped} of a --max-cost of*"])
    assert [c["task"] for c in ledger(capped)] == ["L9-1_TinyLinear"] * 2
    assert json.loads((capped / "L9-2_TinyLinear" / "summary.json").read_text())["llm_calls"] == 0

    # --max-cost-per-task below one call: every item makes its first call, then stops
    per_task = pytester.path / "per_task"
    per_task_cap = f"{first / 2:.6f}"
    result = pytester.runpytest_subprocess(*TWO_ITEMS_ARGS(pytester), *PRICED, "--max-cost-per-task", per_task_cap, "--out", str(per_task))
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*no candidate for L9-1_TinyLinear*stopped: cost budget of $*"])
    assert [(c["task"], c["call"]) for c in ledger(per_task)] == [("L9-1_TinyLinear", "ideas"), ("L9-2_TinyLinear", "ideas")]


def test_max_cost_is_shared_by_xdist_workers_and_later_sessions(pytester):
    """The ledger under --out is what every worker reads: spending already recorded there (by an
    earlier session, or another worker) counts against --max-cost in every process."""
    out = pytester.path / "runs"
    SessionBudget(out / LEDGER_NAME).record("earlier-session", "ideas", 5.0)
    result = pytester.runpytest_subprocess(*TWO_ITEMS_ARGS(pytester), *PRICED, "--max-cost", "5", "--out", str(out), "-n", "2", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*session cost budget of $5 reached ($5.0000 spent under this run folder)*"])
    assert len(ledger(out)) == 1 and not list(out.glob("*/nodes/*/reply.json"))


def test_session_budget_is_read_by_every_process(tmp_path):
    path = tmp_path / "out" / LEDGER_NAME
    mine, other = SessionBudget(path, cap_usd=1.0), SessionBudget(path, cap_usd=1.0)
    assert mine.spent() == 0.0 and mine.stop_reason() is None  # no ledger yet
    mine.record("L1-1_A", "ideas", 0.25)
    assert other.spent() == pytest.approx(0.25) and other.stop_reason() is None
    code = f"from kbagent.budget import SessionBudget; SessionBudget({str(path)!r}).record('L1-2_B', 'p0-i0', 0.75)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)  # another process, as an xdist worker is
    assert mine.spent() == pytest.approx(1.0) and other.spent() == pytest.approx(1.0)
    assert "session cost budget of $1 reached ($1.0000 spent" in mine.stop_reason()
    with path.open("a") as fh:
        fh.write('{"task": "L1-3_C", "cost_usd": 2')  # a line still being written: not read yet
    assert mine.spent() == pytest.approx(1.0)
    with path.open("a") as fh:
        fh.write('.0}\n')
    assert mine.spent() == pytest.approx(3.0)


RECORDING_CONFTEST = """
import json, os
from pytest_kernelbench.build.pool import Prebuilder
from pytest_kernelbench.judge.remote import RayEvaluator

def _recorder(cls, name):
    original = getattr(cls, name)
    def wrapped(self, problem, candidate, *rest):
        with open(os.environ["KB_TEST_CALLS"], "a") as fh:
            fh.write(json.dumps([cls.__name__, name, problem.id, candidate.label]) + "\\n")
        return original(self, problem, candidate, *rest)
    setattr(cls, name, wrapped)

_recorder(Prebuilder, "submit")
_recorder(RayEvaluator, "result")
"""


@pytest.mark.parametrize("route", ["pool", pytest.param("ray", marks=pytest.mark.full)])  # CI: Ray in tests/test_ray.py
def test_search_evaluations_go_through_the_build_pool_or_ray(pytester, monkeypatch, route):
    """Under --model the search's evaluations go where eval-only runs send theirs: with --ray-address
    to the Ray cluster, else here with each candidate handed to the build pool first."""
    if route == "ray":
        pytest.importorskip("ray")
        monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    calls = pytester.path / "calls.jsonl"
    monkeypatch.setenv("KB_TEST_CALLS", str(calls))
    pytester.makeconftest(RECORDING_CONFTEST)
    extra = ["--ray-address", "local"] if route == "ray" else ["--build-jobs", "1"]
    out = pytester.path / "runs"
    result = pytester.runpytest_subprocess(*TINY_ARGS, *SEARCH_ARGS, "--out", str(out), *extra, timeout=600)
    result.assert_outcomes(passed=1)
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    searched = [c for c in seen if c[3].startswith("kbagent p0")]
    expected = ["RayEvaluator", "result"] if route == "ray" else ["Prebuilder", "submit"]
    assert searched and all(c[:3] == [*expected, "L9-1_TinyLinear"] for c in searched), seen
    summary = json.loads((out / "L9-1_TinyLinear" / "summary.json").read_text())
    item_judgement = 1 if route == "ray" else 0  # the item's own judgement of the best goes to Ray too
    assert len(searched) == summary["evaluations_run"] + item_judgement and summary["best"]["outcome"] == "correct"
