"""Supervisors forked from a server that imported torch once: as isolated as a fresh interpreter, faster to start."""

import os
import signal
import time

import pytest

from helpers import broken, cpu_config, tiny_problem
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.judge import forkserver
from pytest_kernelbench.judge.controller import evaluate, supervisor_env
from pytest_kernelbench.outcome import Outcome

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the fork server needs os.fork")

# Imported by the first candidate: patches torch and the harness, leaves a global behind.
POISON = '''
import torch
import pytest_kernelbench.judge.stats as stats
torch.add = lambda *a, **k: 0
stats.median_rel_err = lambda samples: 0.0
import builtins
builtins.KB_LEFT_BEHIND = "answer"
raise SystemExit(3)
'''

# The second candidate passes only if none of that reached it.
CHECKS = '''
import builtins
import torch
import pytest_kernelbench.judge.stats as stats
assert not hasattr(builtins, "KB_LEFT_BEHIND"), "a global from the previous candidate"
assert torch.add(torch.ones(1), 1).item() == 2.0, "torch.add patched by the previous candidate"
assert stats.median_rel_err([1.0, 1.0]) == float("inf"), "harness patched by the previous candidate"
'''


def _candidate(source: str, name: str) -> Candidate:
    return Candidate(source=source, path=name, label=name)


def _server(config: EvalConfig) -> forkserver.ForkServer:
    return forkserver.server_for(supervisor_env(config))


def test_a_candidate_cannot_reach_the_next_one_through_the_server():
    config = cpu_config(worker_start="forkserver")
    correct = broken("correct").source
    first = evaluate(tiny_problem(), _candidate(POISON + correct, "poison.py"), config)
    assert first.outcome is Outcome.COMPILE_ERROR and "SystemExit: 3" in first.message
    server = _server(config)
    second = evaluate(tiny_problem(), _candidate(CHECKS + correct, "checks.py"), config)
    assert second.outcome is Outcome.CORRECT, second.message
    assert _server(config) is server and server.alive  # both were forked from the same server
    assert second.stage_seconds["start"] < 0.5  # torch was already imported


@pytest.mark.parametrize("worker_start", ["forkserver", pytest.param("spawn", marks=pytest.mark.full)])
def test_crashes_are_results_either_way(worker_start):
    config = cpu_config(worker_start=worker_start)
    crashed = evaluate(tiny_problem(), broken("segfault"), config)
    assert crashed.outcome is Outcome.RUNTIME_ERROR and "SIGSEGV" in crashed.message
    exited = evaluate(tiny_problem(), broken("unknown_error"), config)
    assert exited.outcome is Outcome.RUNTIME_ERROR and "exited with code 0" in exited.message
    fine = evaluate(tiny_problem(), broken("correct"), config)
    assert fine.outcome is Outcome.CORRECT, fine.message
    if worker_start == "spawn":
        assert fine.stage_seconds["start"] > 0.05  # a fresh interpreter imported torch


def test_a_killed_server_is_replaced_and_its_running_worker_still_gets_a_result():
    config = cpu_config(worker_start="forkserver", timeout=30)
    server = _server(config)
    os.kill(server.pid, signal.SIGKILL)  # while nothing runs
    deadline = time.monotonic() + 10
    while server.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    result = evaluate(tiny_problem(), broken("correct"), config)
    assert result.outcome is Outcome.CORRECT, result.message
    replacement = _server(config)
    assert replacement is not server

    import threading

    box = {}
    runner = threading.Thread(target=lambda: box.setdefault("r", evaluate(tiny_problem(), broken("timeout"), config)))
    runner.start()
    time.sleep(3)  # the hanging candidate is running now
    os.kill(replacement.pid, signal.SIGKILL)
    runner.join(timeout=20)
    assert not runner.is_alive(), "the evaluation waited on a supervisor whose server was killed"
    assert box["r"].outcome is not Outcome.CORRECT and "SIGKILL" in box["r"].message


PARENT = """
import sys, threading, time
sys.path[:0] = {paths!r}
from helpers import broken, cpu_config, tiny_problem
from pytest_kernelbench.judge import forkserver
from pytest_kernelbench.judge.controller import evaluate, supervisor_env
config = cpu_config(worker_start="forkserver", timeout=300)
threading.Thread(target=evaluate, args=(tiny_problem(), broken("timeout"), config), daemon=True).start()
time.sleep(0.5)
print(forkserver.server_for(supervisor_env(config)).pid, flush=True)
time.sleep(300)
"""


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _gone(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_sigkilled_parent_takes_the_server_its_supervisors_and_their_runners_with_it(tmp_path):
    import subprocess
    import sys

    from helpers import REPO, TESTS

    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(paths=[str(TESTS), str(REPO)])],
                              stdout=subprocess.PIPE, text=True, env=supervisor_env(cpu_config()))
    from pytest_kernelbench.judge.procs import descendants

    try:
        server_pid = int(parent.stdout.readline())
        deadline = time.monotonic() + 60
        while len(descendants(server_pid)) < 3 and time.monotonic() < deadline:  # supervisor, runner (and bwrap's)
            time.sleep(0.1)
        workers = descendants(server_pid)
        assert len(workers) >= 2, "no supervisor and runner were started"
        time.sleep(1)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while not all(_gone(pid) for pid in [server_pid, *workers]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(server_pid), "the fork server outlived its parent"
    assert all(_gone(pid) for pid in workers), "a supervisor or runner outlived the fork server"


def test_unknown_worker_start_is_a_clear_error():
    with pytest.raises(KernelBenchUsageError, match="'forkserver' or 'spawn'"):
        EvalConfig(worker_start="threads")


_SIZE_INPUTS = """
import sys, types
from pytest_kernelbench.judge import forkserver
from pytest_kernelbench.judge.supervisor import plan
if sys.argv[1] == "warm":
    forkserver.warm_meta()
problem = types.ModuleType("problem")
exec("import torch\\ndef get_inputs():\\n    return [torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))]", problem.__dict__)
before = set(sys.modules)
size = plan.input_bytes(problem)
print(int(size), len(set(sys.modules) - before))
"""


@pytest.mark.parametrize("warm", ["warm", "cold"])
def test_the_server_sizes_inputs_once_so_a_supervisor_imports_nothing_for_it(warm):
    """input_bytes (random tensors on the meta device) imports sympy and torch's decompositions on first use:
    0.3-3 s in every supervisor, unless the server did it before forking (forkserver.warm_meta)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _SIZE_INPUTS, warm], capture_output=True, text=True, timeout=120, check=True)
    size, imported = map(int, out.stdout.split())
    assert size == 64 * 3 * 32 * 32 * 4 + 64 * 8
    assert (imported == 0) if warm == "warm" else (imported > 100)


_SEAL_KERNELS = """
import os, sys
import pytest_kernelbench.config  # the server's preloads import it either way
from pytest_kernelbench.judge import forkserver, fused
if sys.argv[1] == "warm":
    forkserver.preload_fused()
    assert "TRITON_CACHE_DIR" not in os.environ  # the supervisor's first use sets it
import torch
before = set(sys.modules)
kernels = fused._kernels()
print(kernels is not None, len(set(sys.modules) - before), torch.cuda.is_initialized(), "triton-judge" in os.environ["TRITON_CACHE_DIR"])
"""


@pytest.mark.parametrize("warm", ["warm", "cold"])
def test_a_gpu_judges_server_defines_the_seal_kernels_once_and_touches_no_device(warm):
    """A GPU supervisor's first seal imported triton (0.2-0.3 s) in every evaluation; its fork server now does it before
    forking (forkserver.preload_fused, with KB_PRELOAD_FUSED=1, which supervisor_env sets for a GPU judge), without
    compiling anything or starting CUDA, and the kernels still compile into the judge's own cache folder."""
    import subprocess
    import sys

    assert supervisor_env(EvalConfig(device="cuda")).get(forkserver.FUSED_ENV) == "1"
    assert forkserver.FUSED_ENV not in supervisor_env(EvalConfig(device="cpu"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", _SEAL_KERNELS, warm], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    defined, imported, cuda, judge_cache = out.stdout.split()
    assert defined == "True" and cuda == "False" and judge_cache == "True"
    assert (int(imported) == 0) if warm == "warm" else (int(imported) > 20), imported
