"""The judge's outcome for deliberately broken candidates: one per outcome, plus crashes that must stay results."""

import os
import signal
import time

import pytest

from helpers import broken, cpu_config, tiny_problem
from pytest_kernelbench.candidates import baseline_candidate
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.outcome import Outcome


def judge(name, **config):
    return evaluate(tiny_problem(), broken(name), cpu_config(**config))


def test_correct_candidate_has_speedup_timings_and_metadata():
    result = judge("correct")
    assert result.outcome is Outcome.CORRECT, result.message
    assert "min_free_gib_at_lock" not in result.extra  # a CUDA-only figure
    assert result.speedup == pytest.approx(result.ref.median / result.new.median)
    assert result.reward == pytest.approx(result.speedup - 1)
    assert result.ref.rounds == len(result.ref.samples) >= 5
    assert result.new.rounds == len(result.new.samples) >= 5
    assert result.ref.min <= result.ref.median <= result.ref.max
    assert result.trials == 3 and result.max_abs_diff < 1e-4
    assert result.versions["torch"] and result.device == "cpu" and result.device_name
    assert {"compile", "init", "run", "compare", "time"} <= set(result.stage_seconds)
    assert len(result.source_hash) == 16


def test_baseline_is_correct_with_speedup_near_one():
    result = evaluate(tiny_problem(), baseline_candidate(tiny_problem()), cpu_config(max_time=0.5))
    assert result.outcome is Outcome.CORRECT, result.message
    assert 0.33 < result.speedup < 3.0  # CPU timings under a loaded CI machine are noisy; this catches gross errors


@pytest.mark.parametrize(
    ("name", "outcome", "stage", "says", "reward"),
    [
        ("incorrect", Outcome.INCORRECT, "compare", "values outside atol=0.01 rtol=0.01", -2),
        ("compile_error", Outcome.COMPILE_ERROR, "compile", "SyntaxError", -5),
        ("init_error", Outcome.INIT_ERROR, "init", "cannot build this kernel for 128 features", -4),
        ("runtime_error", Outcome.RUNTIME_ERROR, "run", "invalid configuration argument", -3),
        ("rejected", Outcome.REJECTED, "compare", "modified input 0 in place", -2),
        ("unknown_error", Outcome.UNKNOWN_ERROR, "run", "exited with code 0 during stage 'run' without reporting", -6),
        ("segfault", Outcome.RUNTIME_ERROR, "run", "SIGSEGV", -3),
    ],
)
def test_broken_candidates_get_their_outcome(name, outcome, stage, says, reward):
    result = judge(name)
    assert result.outcome is outcome, result.message
    assert result.stage == stage
    assert says in result.message
    assert result.reward == reward
    assert result.speedup is None and result.ref is None


def _slow_reference(seconds):
    """The tiny problem with a reference that takes ``seconds`` to build: harness time, not the candidate's."""
    import dataclasses

    problem = tiny_problem()
    slow = problem.source.replace("super().__init__()", f"super().__init__(); __import__('time').sleep({seconds})")
    return dataclasses.replace(problem, source=slow)


def test_building_the_reference_does_not_count_against_the_candidates_timeout():
    result = evaluate(_slow_reference(8), baseline_candidate(tiny_problem()), cpu_config(timeout=6))
    assert result.outcome is Outcome.CORRECT, result.message
    assert result.stage_seconds["reference"] > 8


def test_a_reference_slower_than_the_setup_limit_is_reported_as_the_harness_fault():
    # 15 s: python and torch start in ~3 s, more on a loaded CI machine; the reference needs 120 s
    result = evaluate(_slow_reference(120), baseline_candidate(tiny_problem()), cpu_config(setup_timeout=15))
    assert result.outcome is Outcome.UNKNOWN_ERROR
    assert "harness took more than 15 s" in result.message and result.stage == "reference"
    assert result.wall_seconds < 60


def test_hang_times_out_and_the_timeout_excludes_nothing_else():
    started = time.monotonic()
    result = judge("timeout", timeout=6)
    assert result.outcome is Outcome.TIMEOUT and result.reward == -7
    assert "timed out after 6 s during stage 'run'" in result.message
    assert time.monotonic() - started < 20


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_forked_children_are_killed_with_the_worker(tmp_path):
    marker = tmp_path / "child.pid"
    source = broken("fork_hang").source.replace(
        "time.sleep(3600)  # an orphan", f"open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(3600)  # an orphan"
    )
    from pytest_kernelbench.candidates import Candidate

    result = evaluate(tiny_problem(), Candidate(source, "", "fork"), cpu_config(timeout=6))
    assert result.outcome is Outcome.TIMEOUT
    child = int(marker.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the candidate's forked child outlived the evaluation")


def test_log_flood_is_truncated_and_still_a_result():
    result = judge("log_flood", log_chars=5000)
    assert result.outcome is Outcome.RUNTIME_ERROR
    assert "after the flood" in result.message
    assert "[log truncated: last 5000 of" in result.message
    assert len(result.message) < 12_000


def test_candidate_without_modelnew_is_a_compile_error(tmp_path):
    from pytest_kernelbench.candidates import Candidate

    result = evaluate(tiny_problem(), Candidate("import torch\nclass Model2: pass\n", "", "x"), cpu_config())
    assert result.outcome is Outcome.COMPILE_ERROR and "defines no ModelNew" in result.message


def test_patched_clock_is_rejected():
    from pytest_kernelbench.candidates import Candidate

    source = broken("correct").source + "\nimport time\n_real = time.perf_counter\ntime.perf_counter = lambda: _real() * 0.5\n"
    result = evaluate(tiny_problem(), Candidate(source, "", "clock"), cpu_config())
    assert result.outcome is Outcome.REJECTED
    assert "time.perf_counter" in result.message


def test_result_round_trips_through_json():
    from pytest_kernelbench.result import EvalResult

    result = judge("correct")
    again = EvalResult.from_dict(result.to_dict())
    assert again.to_dict() == result.to_dict()
    assert again.outcome is Outcome.CORRECT and again.new.samples == result.new.samples


def test_host_memory_limit_turns_a_hoarder_into_a_runtime_error():
    result = judge("host_oom", max_memory_gb=4)
    assert result.outcome is Outcome.RUNTIME_ERROR
    assert "can't allocate memory" in result.message



def test_a_lock_kept_by_a_failed_phase_is_released_once_its_memory_is_dropped(tmp_path):
    """worker.main releases the device locks a failing phase kept (after dropping the phase's tensors)."""
    from filelock import FileLock, Timeout

    from pytest_kernelbench import worker

    held = FileLock(str(tmp_path / "dev.lock"), is_singleton=False)
    held.acquire()
    worker.LOCKS_HELD_AFTER_FAILURE.append(held)
    other = FileLock(str(tmp_path / "dev.lock"), is_singleton=False)
    with pytest.raises(Timeout):
        other.acquire(timeout=0)
    worker._release_locks_after_failure()
    other.acquire(timeout=0)
    other.release()
    assert not worker.LOCKS_HELD_AFTER_FAILURE


def test_no_earlier_input_set_outlives_its_phase():
    """Each phase frees its inputs before the lock goes to another worker (on a GPU, a leaked set is GBs)."""
    from pytest_kernelbench.candidates import Candidate

    source = broken("correct").source.replace(
        "    def forward(self, x):",
        """    def forward(self, x):
        import weakref
        seen = globals().setdefault("_SEEN", [])
        alive = [r() for r in seen if r() is not None and r() is not x]
        if alive:
            raise RuntimeError(f"{len(alive)} input tensors of earlier calls are still alive")
        seen.append(weakref.ref(x))
""",
    )
    result = evaluate(tiny_problem(), Candidate(source, "", "watcher"), cpu_config(trials=3))
    assert result.outcome is Outcome.CORRECT, result.message


_LOGGING_MODEL = '''
import torch
import torch.nn as nn


class {name}(nn.Module):
    def forward(self, x):
        with open({log!r}, "a") as f:
            f.write(f"{name} {{x.data_ptr()}}\\n")
        return x * 2.0
'''
_LOGGING_PROBLEM_TAIL = '''

def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("placement", ["separate", "shared"])
def test_shared_placement_times_both_sides_on_one_input_buffer(tmp_path, placement):
    from pytest_kernelbench.candidates import Candidate
    from pytest_kernelbench.problems import problem_from_path

    log = tmp_path / "calls.log"
    path = tmp_path / "1_Double.py"
    path.write_text(_LOGGING_MODEL.format(name="Model", log=str(log)) + _LOGGING_PROBLEM_TAIL)
    candidate = Candidate(_LOGGING_MODEL.format(name="ModelNew", log=str(log)), "", "logs its input's address")
    result = evaluate(problem_from_path(path), candidate, cpu_config(placement=placement))
    assert result.outcome is Outcome.CORRECT, result.message
    calls = [line.split() for line in log.read_text().splitlines()]
    # Most calls are the timed ones (warm-up + repetitions): each side's most common input address is its timed one.
    timed = {side: max(ptrs := [p for s, p in calls if s == side], key=ptrs.count) for side in ("Model", "ModelNew")}
    if placement == "shared":
        assert timed["Model"] == timed["ModelNew"]
        assert result.extra["placement"] == "shared"
    else:
        assert timed["Model"] != timed["ModelNew"]
        assert "placement" not in result.extra


def test_a_before_hook_runs_ahead_of_every_call_and_outputs_are_freed_between_calls():
    import weakref

    import torch

    from pytest_kernelbench.timing import Clocks, time_interleaved

    events, alive_at_call, discarded = [], [], []
    outputs = []

    def make(name):
        def fn():
            events.append(("call", name))
            alive_at_call.append(sum(ref() is not None for ref in outputs))
            out = torch.ones(4)
            outputs.append(weakref.ref(out))
            return out
        return fn

    samples, last = time_interleaved(
        Clocks(torch.device("cpu")), {"new": make("new"), "ref": make("ref")},
        warmup=1, min_reps=3, max_reps=3, max_time=10.0, before=lambda name: events.append(("before", name)),
        discard=lambda out: discarded.append(out.sum().item()) or out.fill_(float("nan")),
    )
    assert len(discarded) == len(events) // 2 - 1 and all(v == 4.0 for v in discarded)  # all but the last output
    assert not torch.isnan(next(iter(last.values()))).any()
    assert len(samples["new"]) == len(samples["ref"]) == 3
    assert all(events[i][0] == "before" and events[i + 1] == ("call", events[i][1]) for i in range(0, len(events), 2))
    assert alive_at_call[2:] == [0] * (len(alive_at_call) - 2)  # timed calls: no earlier output alive
    assert list(last) == [events[-1][1]]  # only the last call's output is left


def test_placement_defaults_to_shared_except_under_the_graph_timer():
    from pytest_kernelbench.config import EvalConfig

    assert EvalConfig(device="cpu").placement == "shared"
    assert EvalConfig(device="cuda").placement == "shared"
    assert EvalConfig(device="cuda", timer="cuda-graph").placement == "separate"
    assert EvalConfig(device="cpu", placement="separate").placement == "separate"


def test_an_unknown_placement_is_a_usage_error_naming_the_choices():
    from pytest_kernelbench.config import EvalConfig
    from pytest_kernelbench.errors import KernelBenchUsageError

    with pytest.raises(KernelBenchUsageError, match="choose separate or shared"):
        cpu_config(placement="random")
    with pytest.raises(KernelBenchUsageError, match="needs --kb-timer events"):
        EvalConfig(device="cuda", timer="cuda-graph", placement="shared")
