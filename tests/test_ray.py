"""Judging on a Ray cluster (a local instance on CPU): results stream back, a lost worker is retried."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

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


def _ray_args(address):
    return ["--level", "mini", "--problems", "1", "--solutions", "baseline", "--device", "cpu", "--ray-address", address,
            "-p", "no:cacheprovider"]  # fmt: skip


def test_a_ray_address_where_nothing_listens_is_one_line_and_exit_4_at_once(pytester):
    with socket.socket() as sock:  # a loopback port bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    result = pytester.runpytest_subprocess(*_ray_args(f"127.0.0.1:{port}"), timeout=120)
    assert result.ret == 4 and time.monotonic() - started < 60  # a Python start and pytest's; Ray itself is never asked
    result.stderr.fnmatch_lines([f"ERROR: --ray-address 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port} (*)*ray start --head*"])
    assert "Traceback" not in result.stderr.str() and "passed" not in result.stdout.str()


@contextlib.contextmanager
def _silent_server(seconds: float):
    """A loopback port that accepts connections (64 at most, for ``seconds`` at most) and says nothing: Ray would wait
    for minutes. Yields (the port, the connections accepted so far); closes them after."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(1.0)
        accepted = []

        def accept():
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and len(accepted) < 64:
                try:
                    accepted.append(server.accept()[0])
                except OSError:
                    continue

        threading.Thread(target=accept, daemon=True).start()
        try:
            yield server.getsockname()[1], accepted
        finally:
            for conn in accepted:
                conn.close()


def test_a_ray_address_that_answers_but_is_no_ray_is_one_line_within_its_limit_and_sigterm_stops_the_wait(tmp_path):
    with _silent_server(120) as (port, accepted):
        cmd = [sys.executable, "-m", "pytest", *_ray_args(f"127.0.0.1:{port}")]
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "KB_RAY_CONNECT_SECONDS": "7"}  # default 15 s; Ray warns every 5 s
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 4 and time.monotonic() - started < 90, done.stderr
        assert f"--ray-address 127.0.0.1:{port}: no Ray cluster answered there within 7 s;" in done.stderr
        assert "\n" not in done.stderr.strip(), done.stderr  # that line alone: no warning of Ray's every few seconds
        before = len(accepted)
        stopped = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while len(accepted) == before and time.monotonic() - started < 110:  # the second run's probe: Ray is next
                time.sleep(0.1)
            time.sleep(2)  # into ray.init's wait
            stopped.send_signal(signal.SIGTERM)
            assert stopped.wait(timeout=10) != 0
        finally:
            stopped.kill()


@pytest.mark.parametrize("given", ["soon", "0", "-3", "inf"])
def test_a_ray_connect_limit_that_is_no_number_of_seconds_is_one_line(monkeypatch, given):
    from pytest_kernelbench.errors import KernelBenchUsageError
    from pytest_kernelbench.judge.remote import connect_seconds

    monkeypatch.setenv("KB_RAY_CONNECT_SECONDS", given)
    with pytest.raises(KernelBenchUsageError, match=f"KB_RAY_CONNECT_SECONDS='{given}': give a number of seconds above 0"):
        connect_seconds()
    monkeypatch.setenv("KB_RAY_CONNECT_SECONDS", "2.5")
    assert connect_seconds() == 2.5


def test_a_connect_that_gave_up_leaves_rays_client_quiet_while_the_process_ends():
    """A slow exit after the one-line error (CI's machine on a slow hour took over 3 s) printed the still-waiting client's
    5-second warning after it: Ray is told to wait longer before it warns (remote.GRACE_SECONDS)."""
    with _silent_server(60) as (port, _):
        code = ("import os, sys, time\nfrom pytest_kernelbench.judge.remote import connect\n"
                f"try:\n    connect('127.0.0.1:{port}', timeout=3)\n"
                "except Exception as exc:\n    print('ERROR:', exc, file=sys.stderr, flush=True)\n"
                "time.sleep(4)\nos._exit(0)\n")  # fmt: skip
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    assert "no Ray cluster answered there within 3 s" in done.stderr, done.stderr
    assert "\n" not in done.stderr.strip(), done.stderr  # nothing of Ray's in the 4 s after it (its default: a warning 5 s into the wait)
