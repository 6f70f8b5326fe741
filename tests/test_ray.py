"""Judging on a Ray cluster (a local instance on CPU): results stream back, a lost worker is retried."""

import json
import shutil

import pytest
import torch  # noqa: F401  imported before pytester snapshots sys.modules

from helpers import BROKEN, DATA, TINY_PROBLEM

pytest.importorskip("ray")
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def test_ray_judges_every_item_and_retries_a_lost_worker(pytester, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "KERNELBENCH_DATASET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")
    marker = pytester.path / "killed.pid"
    monkeypatch.setenv("KB_TEST_NODE_LOSS_MARKER", str(marker))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    problems, sols = pytester.path / "problems" / "level9", pytester.path / "sols" / "level9"
    problems.mkdir(parents=True)
    sols.mkdir(parents=True)
    for name in ("1_TinyA", "3_TinyC"):
        shutil.copy(TINY_PROBLEM, problems / f"{name}.py")
    # Candidates cannot reach the Ray worker (their sandbox hides every other process), so the
    # lost worker is staged by a problem, which the supervisor loads as trusted code.
    shutil.copy(DATA / "ray" / "kills_its_worker_once.py", problems / "2_TinyB.py")
    shutil.copy(BROKEN / "correct.py", sols / "1_TinyA.py")
    shutil.copy(BROKEN / "correct.py", sols / "2_TinyB.py")
    shutil.copy(BROKEN / "runtime_error.py", sols / "3_TinyC.py")
    report = pytester.path / "report.json"

    result = pytester.runpytest_subprocess(
        "--level", "9", "--dataset", str(problems.parent), "--solutions", str(sols.parent), "--device", "cpu",
        "--trials", "2", "--ray-address", "local", "--kb-report", str(report), "-p", "no:cacheprovider",
        timeout=600,
    )  # fmt: skip

    result.assert_outcomes(passed=2, failed=1)
    assert marker.is_file()  # the first attempt at 2_TinyB did kill its Ray worker
    outcomes = {r["problem"]: r["outcome"] for r in json.loads(report.read_text())["results"]}
    assert outcomes == {"L9-1_TinyA": "correct", "L9-2_TinyB": "correct", "L9-3_TinyC": "runtime_error"}
