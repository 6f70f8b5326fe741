"""The per-device timing lock: two processes never hold it at once, and waiting for it is not a timeout."""

import subprocess
import sys
import textwrap

from helpers import broken, cpu_config, tiny_problem
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.judge.locking import device_lock
from pytest_kernelbench.outcome import Outcome

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pytest_kernelbench.judge.locking import device_lock
    with device_lock(sys.argv[1], "cuda-test-gpu"):
        start = time.time()
        time.sleep(float(sys.argv[2]))
        print(start, time.time(), flush=True)
    """
)


def test_two_processes_take_the_device_lock_in_turn(tmp_path):
    procs = [
        subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "1.0"], stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    windows = sorted(tuple(map(float, p.communicate(timeout=60)[0].split()[-2:])) for p in procs)
    assert all(p.returncode == 0 for p in procs)
    (start_a, end_a), (start_b, end_b) = windows
    assert end_a - start_a >= 1.0 and end_b - start_b >= 1.0
    assert start_b >= end_a, f"lock windows overlap: {windows}"


def test_different_devices_do_not_block_each_other(tmp_path):
    with device_lock(tmp_path, "gpu-A"):
        other = device_lock(tmp_path, "gpu-B")
        other.acquire(timeout=1)
        assert other.is_locked
        other.release()


def _hold_lock(lock_dir, key, seconds):
    script = HOLDER.replace('"cuda-test-gpu"', repr(key)).replace("start = time.time()", "start = time.time(); print('held', flush=True)")
    holder = subprocess.Popen([sys.executable, "-c", script, str(lock_dir), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_waiting_for_the_lock_does_not_count_against_the_timeout(tmp_path):
    # The supervisor reaches the lock within ~8 s even on a loaded CI machine, then waits >= 12 s:
    # counted against the 6 s limit, that wait alone would time the candidate out.
    holder = _hold_lock(tmp_path, "cpu", 20.0)
    result = evaluate(tiny_problem(), broken("correct"), cpu_config(timeout=6, lock_dir=str(tmp_path)))
    holder.wait(timeout=30)
    assert result.outcome is Outcome.CORRECT, result.message
    assert result.stage_seconds["wait_lock"] > 6.0


def test_a_lock_never_released_ends_as_a_result(tmp_path):
    holder = _hold_lock(tmp_path, "cpu", 60.0)
    try:
        result = evaluate(tiny_problem(), broken("correct"), cpu_config(lock_dir=str(tmp_path), lock_timeout=2))
    finally:
        holder.kill()
    assert result.outcome is Outcome.HARNESS_ERROR and result.reward is None  # the judge's failure, not the candidate's
    assert "device lock" in result.message and "2 s" in result.message


def test_warm_up_size_comes_from_shapes_alone():
    """--mode compile warms up without the lock only when one input set is small; sizing it allocates nothing."""
    import types

    import torch

    from pytest_kernelbench.judge.supervisor import WARMUP_UNLOCKED_BYTES, input_bytes

    big = types.SimpleNamespace(get_inputs=lambda: [torch.rand(4096, 393216), 3, torch.randint(0, 9, (10,))])
    assert input_bytes(big) == 4096 * 393216 * 4 + 10 * 8 > WARMUP_UNLOCKED_BYTES
    odd = types.SimpleNamespace(get_inputs=lambda: [torch.rand(3).numpy()])  # needs real data
    assert input_bytes(odd) == float("inf")
