"""``pytest --model ...``: kbagent's pytest plugin runs a search per item, the item judges the best
candidate, and the saved candidate re-checks later with ``--solutions``."""

import json
import xml.etree.ElementTree as ET

import pytest
import torch  # noqa: F401 - imported before pytester snapshots sys.modules: torch must not be imported twice

from helpers import DATA

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
