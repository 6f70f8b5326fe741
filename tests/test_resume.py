"""Interrupted runs: the report names the items left, --kb-resume judges only those and keeps the rest."""

import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

import pytest

from helpers import BROKEN, TINY_PROBLEM


@pytest.fixture
def run_folder(tmp_path, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "KERNELBENCH_DATASET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")
    problems, sols = tmp_path / "kb" / "level9", tmp_path / "sols" / "level9"
    problems.mkdir(parents=True)
    sols.mkdir(parents=True)
    for name in ("1_TinyA", "2_TinyB", "3_TinyC"):
        shutil.copy(TINY_PROBLEM, problems / f"{name}.py")
    shutil.copy(BROKEN / "compile_error.py", sols / "1_TinyA.py")  # a quick result
    shutil.copy(BROKEN / "timeout.py", sols / "2_TinyB.py")  # sleeps in its first call: the run is stopped there
    shutil.copy(BROKEN / "compile_error.py", sols / "3_TinyC.py")
    return tmp_path


def _command(folder, *extra):
    return [sys.executable, "-m", "pytest", "--level", "9", "--dataset", str(folder / "kb"), "--solutions", str(folder / "sols"),
            "--device", "cpu", "--kb-report", str(folder / "r.json"), "-p", "no:cacheprovider", "--build-jobs", "0",
            *extra]  # fmt: skip


def _report(folder):
    try:
        return json.loads((folder / "r.json").read_text())
    except (OSError, ValueError):
        return {}


def test_a_run_stopped_by_ctrl_c_says_what_is_left_and_kb_resume_judges_only_that(run_folder):
    command = [sys.executable, "-X", "faulthandler", *_command(run_folder)[1:]]  # SIGABRT on a hang: every thread's stack
    # SIGINT as a terminal's: a run started in the background by a shell without job control (a CI script's `cmd &`)
    # inherits it ignored, and so would this child, which then never stops (the CI runs it hung in until this)
    proc = subprocess.Popen(command, cwd=run_folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while len(_report(run_folder).get("results", [])) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # into the second item's judge
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, _ = proc.communicate(timeout=30)
            said = f"the run had not stopped 60 s after its SIGINT; its output and stacks:\n{out[-6000:]}"
            warnings.warn(said, stacklevel=1)  # CI's log prints warnings in full, an xfail's message not at all
            pytest.fail(said)
    finally:
        proc.kill()
    stopped = _report(run_folder)
    assert stopped["finished"] is False and stopped["pending"] == ["L9-2_TinyB", "L9-3_TinyC"], out
    assert [r["problem"] for r in stopped["results"]] == ["L9-1_TinyA"]
    assert "2 of 3 selected items have no result yet: L9-2_TinyB, L9-3_TinyC" in out
    assert "the same command with --kb-resume judges only those" in out

    again = subprocess.run(_command(run_folder), cwd=run_folder, capture_output=True, text=True, timeout=120)
    assert again.returncode == 4 and "--kb-resume judges those and keeps the rest" in again.stderr  # not overwritten unasked
    assert _report(run_folder) == stopped

    shutil.copy(BROKEN / "compile_error.py", run_folder / "sols" / "level9" / "2_TinyB.py")  # quick this time
    resumed = subprocess.run(_command(run_folder, "--kb-resume", "-v"), cwd=run_folder, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 1, resumed.stdout  # two compile errors
    assert "1 deselected" in resumed.stdout and "test_kernel[L9-1_TinyA]" not in resumed.stdout
    assert "test_kernel[L9-2_TinyB] FAILED" in resumed.stdout
    done = _report(run_folder)
    assert done["finished"] is True and done["pending"] == [] and done["resumed"] == 1
    assert [r["problem"] for r in done["results"]] == ["L9-1_TinyA", "L9-2_TinyB", "L9-3_TinyC"]
    assert done["results"][0] == stopped["results"][0]  # kept as it was


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--kb-resume"], "--kb-resume: no report at * to resume; run without --kb-resume to start one"),
        (["--kb-resume", "--atol", "0.5"], "--kb-resume: * was written with other options (atol unset -> 0.5); *"),
    ],
)
def test_kb_resume_of_nothing_or_of_other_options_is_one_line(run_folder, extra, says):
    if "--atol" in extra:
        (run_folder / "sols" / "level9" / "2_TinyB.py").unlink()
        (run_folder / "sols" / "level9" / "1_TinyA.py").unlink()
        (run_folder / "sols" / "level9" / "3_TinyC.py").unlink()
        first = subprocess.run(_command(run_folder), cwd=run_folder, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0 and _report(run_folder)["finished"] is True, first.stdout  # three skips: no solution
    result = subprocess.run(_command(run_folder, *extra), cwd=run_folder, capture_output=True, text=True, timeout=120)
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fnmatch.fnmatch(lines[0], f"ERROR: {says}"), result.stderr


def test_an_unwritable_report_is_one_line_before_any_work(run_folder):
    blocked = run_folder / "blocked"
    blocked.write_text("a file where a folder should be")
    command = [arg if not arg.endswith("r.json") else str(blocked / "r.json") for arg in _command(run_folder)]
    result = subprocess.run(command, cwd=run_folder, capture_output=True, text=True, timeout=120)
    assert result.returncode == 4 and "passed" not in result.stdout and "INTERNALERROR" not in result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"ERROR: --kb-report {blocked / 'r.json'}: cannot write it (") and line.endswith("); pass a writable path")
    assert os.path.isfile(blocked)


def test_collecting_only_leaves_a_finished_report_that_a_run_may_overwrite(run_folder):
    for _ in range(2):
        listed = subprocess.run(_command(run_folder, "--collect-only", "-q"), cwd=run_folder, capture_output=True, text=True, timeout=120)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert _report(run_folder)["finished"] is True and _report(run_folder)["pending"] == []
