"""The per-device timing lock: two processes never hold it at once, and waiting for it is not a timeout."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from filelock import Timeout

from helpers import REPO, broken, cpu_config, small_build, tiny_problem
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


def _release_after_a_wait(holder, lock_dir, key, seconds):
    """Ends ``holder`` ``seconds`` after another process announced that it waits for the lock (``<key>.wanted/<pid>``),
    or after 60 s: the wait is as long as the test needs however long the waiter took to get there."""

    def watch():
        deadline = time.monotonic() + 60
        wanted = Path(lock_dir) / f"{key}.wanted"
        while time.monotonic() < deadline and not (wanted.is_dir() and any(wanted.iterdir())):
            time.sleep(0.05)
        time.sleep(seconds)
        holder.kill()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_waiting_for_the_lock_does_not_count_against_the_timeout(tmp_path):
    # The supervisor reaches the lock after its runners' start (uncharged: forked from the runner zygote, or a fresh
    # interpreter importing torch), says it waits, and waits 8 s more: counted against the 6 s limit, that wait alone
    # would time the candidate out.
    holder = _hold_lock(tmp_path, "cpu", 120.0)
    watcher = _release_after_a_wait(holder, tmp_path, "cpu", 8.0)
    result = evaluate(tiny_problem(), broken("correct"), cpu_config(timeout=6, lock_dir=str(tmp_path)))
    watcher.join(timeout=70)
    holder.wait(timeout=60)
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

    from pytest_kernelbench.judge.supervisor.plan import WARMUP_UNLOCKED_BYTES, input_bytes

    big = types.SimpleNamespace(get_inputs=lambda: [torch.rand(4096, 393216), 3, torch.randint(0, 9, (10,))])
    assert input_bytes(big) == 4096 * 393216 * 4 + 10 * 8 > WARMUP_UNLOCKED_BYTES
    odd = types.SimpleNamespace(get_inputs=lambda: [torch.rand(3).numpy()])  # needs real data
    assert input_bytes(odd) == float("inf")


SHARER = textwrap.dedent(
    """
    import sys, time
    from pytest_kernelbench.judge.locking import device_lock
    lock_dir, mode, at, hold = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    time.sleep(max(0.0, at - time.time()))
    lock = device_lock(lock_dir, "gpu-rw").acquire(shared=mode == "shared")
    start = time.time()
    time.sleep(hold)
    end = time.time()
    lock.release()
    print(mode, start, end, flush=True)
    """
)


def _windows(tmp_path, plan):
    t0 = time.time() + 3.0  # every process started and imported by then, even on a loaded machine
    procs = [subprocess.Popen([sys.executable, "-c", SHARER, str(tmp_path), mode, str(t0 + delay), str(hold)],
                              stdout=subprocess.PIPE, text=True) for mode, delay, hold in plan]  # fmt: skip
    found = []
    for proc in procs:
        mode, start, end = proc.communicate(timeout=60)[0].split()
        found.append((mode, float(start), float(end)))
    return found


def test_shared_holders_overlap_an_exclusive_one_overlaps_nobody_and_a_waiting_writer_is_not_starved(tmp_path):
    # Two readers start together; a writer comes while they hold it; a third reader comes after the writer asked.
    first, second, writer, late = _windows(tmp_path, [("shared", 0, 2.5), ("shared", 0, 2.5), ("exclusive", 1.2, 0.5),
                                                      ("shared", 2.0, 0.3)])  # fmt: skip
    assert first[1] < second[2] and second[1] < first[2], "shared holders did not share"
    for reader in (first, second, late):
        assert reader[2] <= writer[1] or reader[1] >= writer[2], f"a shared holder overlapped the exclusive one: {reader} {writer}"
    assert late[1] >= writer[2], "a reader that came after the waiting writer went first"


def test_admission_waits_for_memory_and_forgets_a_dead_holders_reservation(tmp_path):
    from pytest_kernelbench.judge.locking import admitted

    lock = device_lock(tmp_path, "gpu-mem")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "gpu-mem.admitted").mkdir()
    (tmp_path / "gpu-mem.admitted" / dead).write_text(str(70 << 30))  # a judge that died holding 70 GiB
    with admitted(lock, 10 << 30, lambda: 16 << 30):  # alone once the dead one is dropped: admitted whatever it needs
        assert not (tmp_path / "gpu-mem.admitted" / dead).exists()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "gpu-mem.admitted" / str(other.pid)).write_text(str(8 << 30))
        with admitted(lock, 6 << 30, lambda: 16 << 30, timeout=5):  # 16 - 8 >= 6: fits beside the other
            pass
        started = time.monotonic()
        with pytest.raises(Timeout):
            with admitted(lock, 10 << 30, lambda: 16 << 30, timeout=1):  # 16 - 8 < 10: waits, then gives up
                pass
        assert time.monotonic() - started >= 1.0
    finally:
        other.kill()
        other.wait()
    with admitted(lock, 10 << 30, lambda: 16 << 30, timeout=5):  # the other is gone: admitted
        pass


def test_the_build_pool_starts_no_build_while_another_evaluation_times_on_the_cpu(tmp_path, monkeypatch):
    """Issue 15: a build's supervisor and build step import torch (seconds of CPU): none starts inside a CPU timing window."""
    import threading

    from pytest_kernelbench.build import pool as pool_module
    from pytest_kernelbench.candidates import Candidate
    from pytest_kernelbench.judge.locking import mark_cpu_timing

    started = threading.Event()
    monkeypatch.setattr(pool_module, "evaluate", lambda *a, **k: started.set())
    config = cpu_config(lock_dir=str(tmp_path / "locks"), build_dir=str(tmp_path / "builds"))
    mark_cpu_timing(config.lock_dir, True)  # this process times on the CPU now
    prebuilder = pool_module.Prebuilder(config, 1)
    assert prebuilder.submit(tiny_problem(), Candidate("load_inline(cpp_sources='')\nclass ModelNew: pass\n", "", "ext"))
    assert not started.wait(0.6), "a build started inside the timing window"
    mark_cpu_timing(config.lock_dir, False)
    assert started.wait(5), "the build never started after the window"
    prebuilder.close()


_LONG_FIRST_CALL = """
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.first = True

    def forward(self, x):
        if self.first:  # as an inductor compile or an autotune would: seconds in the first call, untimed
            self.first = False
            deadline = time.perf_counter() + 6.0
            while time.perf_counter() < deadline:
                pass
        return torch.relu(self.linear(x))
"""


def test_a_long_first_call_steps_aside_for_another_judges_timing_and_is_still_judged(tmp_path):
    import concurrent.futures

    from pytest_kernelbench.candidates import Candidate

    config = cpu_config(lock_dir=str(tmp_path / "locks"), timeout=60)
    assert evaluate(tiny_problem(), broken("correct"), config).correct  # the supervisors' fork server is up
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = pool.submit(evaluate, tiny_problem(), Candidate(_LONG_FIRST_CALL, "", "long-first-call"), config)
        time.sleep(2.5)  # the slow one is in its first trial (it lasts 6 s) when the other one wants to time
        quick = pool.submit(evaluate, tiny_problem(), broken("correct"), config)
        quick_result = quick.result(timeout=120)
        quick_done = time.monotonic()
        slow_result = slow.result(timeout=120)
        slow_done = time.monotonic()
    assert quick_result.correct and slow_result.correct, (quick_result.message, slow_result.message)
    assert (slow_result.extra.stepped_aside or 0) >= 1  # it let the lock go while its first call ran
    # ... stopped meanwhile, charged to no one: about the other judge's timing phase (max_time 0.2 s: 0.099-0.2 s seen)
    assert slow_result.stage_seconds.get("stepped_aside", 0) > 0.05
    assert quick_done < slow_done - 1.0  # the other judge timed and finished while the first call was still going
    assert quick_result.stage_seconds.get("wait_lock", 0) < 3.0  # not the whole 6 s first call


def test_the_candidates_module_is_imported_holding_the_device_lock(tmp_path):
    """What a module does as it is imported runs in the shared ``init`` phase, never beside another judge's timing
    (before: in the ``compile`` stage, holding no lock), and is still the ``compile`` stage's time."""
    from pytest_kernelbench.candidates import Candidate

    config = cpu_config(lock_dir=str(tmp_path / "locks"), trials=1)
    # as a module that tunes or fills tables on the device as it is imported would
    slow = Candidate("import time\ntime.sleep(1.5)\n" + broken("correct").source, "", "slow-import")
    result = evaluate(tiny_problem(), slow, config)
    assert result.correct, result.message
    assert result.extra.split_s["init.load"] >= 1.5
    assert result.extra.lock_held_s["init"] >= 1.5  # the import inside the phase's hold
    assert result.stage_seconds["compile"] >= 1.5 and result.stage_seconds["init"] < 1.5


@pytest.mark.parametrize("rank", [None, 3], ids=["the judge's own build", "a pool build with 3 queued ahead"])
def test_a_build_step_and_its_compilers_run_at_a_lower_priority_than_the_judges(tmp_path, rank):
    """A pool build is a step lower for each build queued ahead of it, so that a cold pool's first builds finish first."""
    from pytest_kernelbench.candidates import Candidate
    from pytest_kernelbench.judge.runner import BUILD_NICE
    from pytest_kernelbench.problems import problem_from_path

    # its build step compiles a small library (a torch extension would take half a minute and more on 2 cores)
    source = (REPO / "problems" / "mini" / "1_LeakyReluScale.py").read_text().replace("class Model(", "class ModelNew(")
    source += small_build("kb_nice")
    probe = ("import os as _os, pathlib as _pl\ntry:\n"
             "    _pl.Path(_os.environ['TORCH_EXTENSIONS_DIR'], 'nice.txt').write_text(str(_os.nice(0)))\n"
             "except OSError:\n    pass  # the judged runner sees the build folder read-only\n")  # fmt: skip
    config = cpu_config(lock_dir=str(tmp_path / "locks"), build_dir=str(tmp_path / "builds"), timeout=300.0)
    problem, candidate = problem_from_path(REPO / "problems" / "mini" / "1_LeakyReluScale.py"), Candidate(probe + source, "", "nice")
    if rank is not None:  # as build.pool.Prebuilder runs it; the judge below then finds the build cached
        built = evaluate(problem, candidate, config, build_only=True, build_rank=rank)
        assert built.correct, built.message
    result = evaluate(problem, candidate, config)
    assert result.correct, result.message
    assert bool(result.extra.build_cached) == (rank is not None)
    found = list((tmp_path / "builds").rglob("nice.txt"))
    assert found and int(found[0].read_text()) == min(19, os.nice(0) + BUILD_NICE + (rank or 0))


def test_build_slots_are_one_limit_for_every_judge_process_of_the_machine(tmp_path):
    """Two processes sharing the lock folder, one slot: the second build waits for the first to finish, and waiting
    past its limit is a Timeout, not a build (locking.build_slot)."""
    import subprocess
    import sys

    from filelock import Timeout

    from pytest_kernelbench.judge.locking import build_slot

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pytest_kernelbench.judge.locking import build_slot\n"
                               f"with build_slot({str(tmp_path)!r}, 10, slots=1):\n    print('held', flush=True)\n    time.sleep(1.5)"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(Timeout):
        with build_slot(tmp_path, 0.3, slots=1):
            pass
    started = time.monotonic()
    with build_slot(tmp_path, 30, slots=1) as slot:
        waited = time.monotonic() - started
    holder.wait(10)
    assert slot == 0 and 0.5 < waited < 10
    with build_slot(tmp_path, 0.3, slots=2) as first, build_slot(tmp_path, 0.3, slots=2) as second:
        assert {first, second} == {0, 1}  # two slots: two builds at once


@pytest.mark.parametrize(("cores", "slots"), [(1, 1), (2, 1), (4, 3), (8, 7), (16, 14), (32, 28)])
def test_build_slots_default_to_the_cores_less_one_in_eight(monkeypatch, cores, slots):
    """A CUDA build keeps one core busy at a time: the machine builds on all but a few cores, and one at a time on two."""
    from pytest_kernelbench.judge.locking import BUILD_SLOTS_ENV, build_slots

    monkeypatch.delenv(BUILD_SLOTS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert build_slots() == slots
    monkeypatch.setenv(BUILD_SLOTS_ENV, "5")
    assert build_slots() == 5


_WAITING_READER = """
import sys, time
from pytest_kernelbench.judge.locking import device_lock
lock = device_lock(sys.argv[1], "fake-gpu")
print("waiting", flush=True)
lock.acquire(timeout=60, shared=True)
print(time.time(), flush=True)
lock.release()
"""


def test_a_gpu_kept_busy_past_a_turn_gives_the_lock_back_for_a_while_and_the_wait_is_charged_to_no_one(tmp_path, monkeypatch):
    """Device.settle: another judge's kernel longer than its owner's step aside keeps the GPU busy. The phase waiting for
    a quiet GPU lets the lock go between turns (the owner, queued behind it, goes on, charged), takes it back, and the
    wait is stage ``settle``: not the candidate's time, not the phase's lock time. Past the setup limit: harness_error."""
    from types import SimpleNamespace

    from pytest_kernelbench.judge.supervisor import device as dev
    from pytest_kernelbench.judge.supervisor.plan import Footprint
    from pytest_kernelbench.judge.supervisor.record import Findings, Status, Verdict

    monkeypatch.setattr(dev, "SETTLE_TURN_S", 0.3)
    monkeypatch.setattr(dev, "SETTLE_AWAY_S", 1.0)
    cfg = SimpleNamespace(lock_dir=str(tmp_path), lock_timeout=30.0, setup_timeout=60.0, device_index=0)
    ctx = SimpleNamespace(on_gpu=True, cfg=cfg, status=Status(str(tmp_path / "status")), found=Findings(), fp=Footprint(True), problem=None)
    device = dev.Device(ctx)
    monkeypatch.setattr(device, "key", lambda: "fake-gpu")
    monkeypatch.setattr(device, "free_bytes", lambda: 2**36)
    probes: list[tuple[float, float]] = []  # (when, how long it may wait)

    def busy_twice(deadline: float, pause: float = 0.0, tick=None) -> float | None:
        assert device._lock.is_locked and ctx.status.stage == "settle"
        probes.append((time.time(), deadline - time.monotonic()))
        return None if len(probes) < 3 else 0.0

    monkeypatch.setattr(device, "until_quiet", busy_twice)
    reader = subprocess.Popen([sys.executable, "-c", _WAITING_READER, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        with device.hold("time"):
            assert reader.stdout.readline().strip() == "waiting"
            time.sleep(0.5)  # it queued behind this phase
            held_from = time.time()
            device.settle()
            settled = time.time()
            assert ctx.status.stage == "time"
            device.close_phase()
        got = float(reader.stdout.readline())
    finally:
        reader.kill()
    assert probes[0][1] <= 0.31 and probes[1][1] <= 0.31  # a turn each, not the setup limit
    assert ctx.found.extra.settle_gave_way == 2
    assert held_from < probes[0][0] < got < probes[1][0] < settled  # the waiting reader had the device between turns
    seconds = ctx.status.stage_seconds
    assert seconds["settle"] + seconds.get("wait_lock", 0) > 2.5 and seconds.get("time", 0) < 1.0
    assert ctx.status.charged() < 1.0 and ctx.found.extra.lock_held_s["time"] < 1.5  # the 1 s and 2 s away are not held

    monkeypatch.setattr(device, "until_quiet", lambda deadline, pause=0.0, tick=None: None)
    cfg.setup_timeout = 0.2
    with pytest.raises(Verdict, match="stayed busy with other work for 0.2 s") as failed, device.hold("time"):
        device.settle()
    assert failed.value.outcome == "harness_error" and "KB_PROBE_FLOOR_MAX_US raises the limit" in failed.value.message


def test_a_problems_footprint_measured_alone_is_remembered_and_its_next_judges_call_the_reference_shared(tmp_path):
    """supervisor/memo.py: the reference's first call holds the device alone once per problem and setting on a machine;
    later judges run it in a shared phase, admitted for the footprint remembered. Another seed is another footprint; one
    that cannot be read is measured again."""
    config = cpu_config(lock_dir=str(tmp_path / "locks"))
    first, second = (evaluate(tiny_problem(), broken("correct"), config) for _ in range(2))
    assert first.correct and second.correct, (first.message, second.message)
    assert first.extra.reference_shared is None and second.extra.reference_shared is True
    kept = sorted((tmp_path / "locks").glob("cpu.footprints/*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["io_bytes"][0] > 0
    other_seed = evaluate(tiny_problem(), broken("correct"), cpu_config(lock_dir=str(tmp_path / "locks"), seed=7))
    assert other_seed.correct and other_seed.extra.reference_shared is None
    assert len(list((tmp_path / "locks").glob("cpu.footprints/*.json"))) == 2
    kept[0].write_text('{"io_bytes": [')
    again = evaluate(tiny_problem(), broken("correct"), config)
    assert again.correct and again.extra.reference_shared is None and json.loads(kept[0].read_text())["ref_ms"] > 0


def test_a_remembered_footprint_that_no_measurement_gives_is_measured_again(tmp_path):
    """memo.recall reads the lock folder as untrusted input (without bwrap it is not hidden from candidates): a quiet
    GPU's floor of 0 or of seconds, negative bytes, a time of 0, a CPU floor on a GPU: measured again."""
    from pytest_kernelbench.judge.supervisor.memo import recall

    path = tmp_path / "memo.json"
    good = {"io_bytes": [4096, 4096], "ref_peak_bytes": 1 << 20, "ref_ms": 0.5, "quiet_s": 1e-4}
    path.write_text(json.dumps(good))
    assert recall(path, on_gpu=True).quiet_s == 1e-4 and recall(path, on_gpu=True).fp.io_bytes == (4096, 4096)
    assert recall(path, on_gpu=False) is None  # a GPU's floor for a CPU judge
    for bad in ({"quiet_s": 0.0}, {"quiet_s": 2.0}, {"quiet_s": None}, {"ref_peak_bytes": -1}, {"io_bytes": [-1, 0]}, {"ref_ms": 0}):
        path.write_text(json.dumps({**good, **bad}))
        assert recall(path, on_gpu=True) is None, bad


def test_a_probe_floor_measured_beside_another_processs_kernel_does_not_take_that_busy_gpu_for_quiet(monkeypatch):
    """Device.probe_floor: probes that wait for another context's time slices (2.4 ms at the median beside one long
    kernel, 211 us the fastest, on the H200) give no floor above PROBE_FLOOR_MAX_S, so until_quiet still waits; on a
    quiet GPU (14 us) the floor is the rule's, and a quiet probe passes at once."""
    import itertools
    from types import SimpleNamespace

    from pytest_kernelbench.judge.supervisor import device as dev

    device = dev.Device(SimpleNamespace(on_gpu=True))
    busy = itertools.cycle([2.4e-3, 2.38e-3, 211e-6, 2.41e-3])
    monkeypatch.setattr(device, "_probe", lambda: next(busy))
    assert device.probe_floor() == dev.PROBE_FLOOR_MAX_S
    assert device.until_quiet(time.monotonic() + 0.05) is None
    device.quiet_s = None
    monkeypatch.setattr(device, "_probe", lambda: 14e-6)
    assert device.until_quiet(time.monotonic() + 0.05) == 0.0 and device.quiet_s == pytest.approx(114e-6)


def test_a_long_timing_lets_a_waiting_judge_time_between_its_rounds(tmp_path, monkeypatch):
    """Issue 46: a long candidate does not stall short ones. Judge A times for 8 s (its medians never precise enough to
    stop sooner); judge B, started on the same lock once A's time phase holds it, needs the lock for each of its phases.
    A's phase, past KB_TIME_TURN_S, lets the lock go between two rounds until B has it, then queues again: B is judged
    before A, and the time A was away is neither its time lock nor its time stage."""
    from pytest_kernelbench.candidates import baseline_candidate

    monkeypatch.setenv("KB_TIME_TURN_S", "0.5")
    problem, ended = tiny_problem(), {}

    def judge(name: str, **config) -> None:
        ended[name] = (evaluate(problem, baseline_candidate(problem), cpu_config(lock_dir=str(tmp_path), **config)), time.monotonic())

    long = threading.Thread(target=judge, args=("long",), kwargs={"max_time": 8.0, "rel_err": 1e-9, "max_reps": 10**6})
    long.start()
    timing, waited = tmp_path / "cpu.timing", time.monotonic() + 60  # A's CPU time phase marks the lock folder
    while not timing.exists() and time.monotonic() < waited and long.is_alive():
        time.sleep(0.01)
    judge("short")  # from A's time phase on: its start-up on a busy machine is no longer a race
    long.join(timeout=120)
    (a, a_end), (b, b_end) = ended["long"], ended["short"]
    assert a.outcome is Outcome.CORRECT and b.outcome is Outcome.CORRECT, (a.message, b.message)
    assert b_end < a_end and a.extra.time_turns >= 1 and not b.extra.time_turns, (a.extra.time_turns, b.extra.time_turns)
    away = a.extra.split_s["time/turn"]
    assert away >= b.extra.lock_held_s["time"] > 0  # A was away at least while B timed
    assert a.extra.lock_held_s["time"] < a.stage_seconds["time"] + 0.5 and a.extra.timing_stop == "max_time"


def test_a_turn_that_leaves_the_gpu_busy_for_longer_than_a_turn_is_the_phases_last(monkeypatch):
    """Device.take_turn (PIKE corpus, one H200, 452f413: a time phase took five turns and after each waited 14 s for the
    kernels a judge let in had queued, 68 s of lock for 10 s of timing). The turn's clock starts at the quiet GPU, not
    at taking the lock back; a turn whose settle outlasts a turn is the phase's last, until the phase closes."""
    from types import SimpleNamespace

    from pytest_kernelbench.judge.supervisor import device as dev

    turn = 0.1
    monkeypatch.setattr(dev, "TIME_TURN_S", turn)
    monkeypatch.setattr(dev, "exclusive_need", lambda *args: None)
    busy_for, busy_until = [0.08], [0.0]  # how long the GPU stays busy after each take back, and until when

    class Lock:  # a judge waits whenever this phase holds the lock; its kernels run on after it is stopped
        waiting = True

        def queued(self):
            return self.waiting

        def wanted(self):
            return None

        def release(self):
            self.waiting = False

        def acquire(self, timeout, shared, announce):
            assert not shared
            self.waiting, busy_until[0] = True, time.monotonic() + busy_for[0]

    counts = {}
    found = SimpleNamespace(count=lambda key: counts.__setitem__(key, counts.get(key, 0) + 1), tally=lambda *args: None)
    status = SimpleNamespace(stage="time", enter=lambda stage: None)
    device = dev.Device(SimpleNamespace(on_gpu=True, found=found, status=status, cfg=SimpleNamespace(setup_timeout=60.0, lock_timeout=60.0),
                                        fp=None, problem=None))  # fmt: skip
    monkeypatch.setattr(device, "_probe", lambda: 1e-3 if time.monotonic() < busy_until[0] else 14e-6)
    device.quiet_s, device._lock, device._phase = 114e-6, Lock(), "time"
    device._since = dev._perf_counter() - 2 * turn

    assert device.take_turn() > 0 and counts == {"time_turns": 1}  # quiet again after 0.08 s: turns go on
    time.sleep(0.04)
    assert device.take_turn() == 0.0  # 0.12 s since it took the lock back, 0.04 s since the GPU was quiet: not yet
    time.sleep(turn)
    busy_for[0] = 3 * turn
    assert device.take_turn() > 0 and counts == {"time_turns": 2, "time_turns_ended": 1}
    time.sleep(turn)
    assert device.take_turn() == 0.0 and counts["time_turns"] == 2  # the phase's last turn was taken
    device.close_phase()
    device._lock, device._since = Lock(), dev._perf_counter() - 2 * turn
    assert device.take_turn() > 0 and counts["time_turns"] == 3  # the next phase takes turns again
