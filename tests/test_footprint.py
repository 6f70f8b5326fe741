"""The footprint check before judging: a problem whose data cannot fit is skipped with one line, never killed."""

import dataclasses
import time

import pytest
import torch  # imported before pytester snapshots sys.modules: torch must not be imported twice

from helpers import cpu_config, tiny_problem
from pytest_kernelbench.candidates import baseline_candidate
from pytest_kernelbench.judge import footprint
from pytest_kernelbench.judge.controller import _footprint, evaluate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import Problem

HUGE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

rows, cols = 1 << 24, 1 << 24

def get_inputs():
    return [torch.rand(rows, cols)]

def get_init_inputs():
    return []
"""

# get_inputs kills its process when it makes real data: the supervisor dies as an out-of-memory kill would kill it
KILLED = """
import os, signal
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    x = torch.rand(4, 4)
    if x.device.type != "meta":
        os.kill(os.getpid(), signal.SIGKILL)
    return [x]

def get_init_inputs():
    return []
"""


def test_a_problem_is_measured_on_the_meta_device_in_a_child_of_the_fork_server():
    problem = tiny_problem()
    found = _footprint(problem, cpu_config())
    assert footprint.remembered(problem.source, lambda: None) == found  # measured once per process
    features = 128  # tests/data/tiny: Linear(128, 128) on a (32, 128) input
    assert found == footprint.Footprint(inputs=32 * features * 4, outputs=32 * features * 4, params=(features + 1) * features * 4,
                                        flops=2 * 32 * features * features)  # the linear layer's multiply-adds (judge/sol.py)
    assert found.need() == 6 * found.inputs + 12 * found.outputs + 2 * found.params + footprint.MARGIN_BYTES


def test_outputs_stand_in_as_the_inputs_when_the_forward_has_no_meta_kernel():
    source = HUGE.replace("return torch.relu(x)", "return torch.tensor(x.tolist())")  # needs data
    found = footprint.measure_here(source)
    assert found.outputs_measured is False and found.outputs == found.inputs == (1 << 48) * 4


def test_host_memory_is_read_from_the_kernel():
    available = footprint.host_available()
    total = int(open("/proc/meminfo").read().split("MemTotal:")[1].split()[0]) * 1024
    assert 0 < available <= total


def test_a_problem_too_big_for_the_host_is_skipped_before_any_process_starts():
    problem = Problem("9", 1, "1_Huge", HUGE)
    started = time.monotonic()
    result = evaluate(problem, baseline_candidate(problem), cpu_config())
    assert time.monotonic() - started < 20  # no supervisor: the estimate alone
    line = result.extra.skipped
    assert result.outcome is Outcome.HARNESS_ERROR and result.message == line and "\n" not in line
    assert line.startswith("L9-1_Huge needs about ") and "of host memory" in line and "--device cpu-check" in line
    assert f"one input set {footprint.gib(1 << 50)}" in line


def _verdicts(found, config):
    """The verdict at each GPU capacity from 200 GiB down to 1 GiB: 'as is', 'lean' (one call a round) or 'skip'."""
    kinds = []
    for capacity in range(200 << 30, 1 << 30, -(64 << 20)):
        fit = footprint.plan_device("p", found, config, capacity)
        kinds.append("skip" if fit.skip else "lean" if fit.note else "as is")
        assert (fit.config.round_calls == 1) == (fit.note != "") or config.round_calls == 1
    return kinds


def test_a_gpu_that_fits_the_data_only_without_a_rounds_extra_calls_gets_one_call_a_round():
    found = footprint.Footprint(inputs=4 << 30, outputs=4 << 30, params=0)
    config = dataclasses.replace(cpu_config(), device="cuda", inputs="standard")  # no varied draws to leave out
    kinds = _verdicts(found, config)
    first_lean, first_skip = kinds.index("lean"), kinds.index("skip")
    assert kinds == ["as is"] * first_lean + ["lean"] * (first_skip - first_lean) + ["skip"] * (len(kinds) - first_skip)
    assert first_lean > 0 and first_skip > first_lean
    assert "lean" not in _verdicts(found, dataclasses.replace(config, round_calls=1))  # one call a round already
    small = footprint.plan_device("p", found, config, 8 << 30)
    assert "of GPU memory and the GPU has 8.0 GiB" in small.skip and small.config is config
    assert "held 5, 6 and 4 times at once" in small.skip  # a GPU judge's copies, not the host's


def _host_verdicts(found, config):
    """The verdict at each amount of host memory from 64 GiB down to 1 GiB: 'as is', 'standard' or 'skip'."""
    kinds = []
    for available in range(64 << 30, 1 << 30, -(64 << 20)):
        fit = footprint.plan_host("p", found, config, available)
        kinds.append("skip" if fit.skip else "standard" if fit.config.inputs == "standard" and config.inputs != "standard" else "as is")
        assert (kinds[-1] == "standard") == (fit.note != "")
    return kinds


def test_a_host_that_fits_the_data_only_without_the_varied_draws_judges_on_the_problems_own_inputs():
    """Issue 49: fewer copies instead of a skip. The varied trials hold three outputs more on the CPU (measured:
    footprint.HOST_VARIED); where only they do not fit, the trials run on get_inputs()'s own distribution, and the
    result says so."""
    found = footprint.Footprint(inputs=4 << 30, outputs=1 << 30, params=0)
    kinds = _host_verdicts(found, cpu_config())
    first_standard, first_skip = kinds.index("standard"), kinds.index("skip")
    assert kinds == ["as is"] * first_standard + ["standard"] * (first_skip - first_standard) + ["skip"] * (len(kinds) - first_skip)
    assert 0 < first_standard < first_skip
    assert "standard" not in _host_verdicts(found, dataclasses.replace(cpu_config(), inputs="standard"))
    # the skip names what the leanest judge needs: six input sets, twelve outputs, a margin
    line = footprint.plan_host("p", found, cpu_config(), 8 << 30).skip
    assert line.startswith(f"p needs about {footprint.gib(found.need())} of host memory and 8.0 GiB is available")


def test_a_gpu_tries_one_call_a_round_then_the_problems_own_inputs_before_a_skip():
    found = footprint.Footprint(inputs=4 << 30, outputs=4 << 30, params=0)
    config = dataclasses.replace(cpu_config(), device="cuda")
    seen = []
    for capacity in range(200 << 30, 1 << 30, -(64 << 20)):
        fit = footprint.plan_device("p", found, config, capacity)
        kind = ("skip" if fit.skip else "standard" if fit.config.inputs == "standard"
                else "one call" if fit.config.round_calls == 1 else "as is")  # fmt: skip
        if not seen or seen[-1] != kind:
            seen.append(kind)
    assert seen == ["as is", "one call", "standard", "skip"]


def test_an_evaluation_that_fits_only_on_the_problems_own_inputs_says_so_and_is_judged(monkeypatch):
    problem = tiny_problem()
    found = footprint.measure_here(problem.source)
    assert found is not None and found.held(footprint.HOST_VARIED) > 0
    room = found.need() + found.held(footprint.HOST_VARIED) // 2  # the leanest judge fits, the varied draws do not
    monkeypatch.setattr(footprint, "host_available", lambda: room)
    result = evaluate(problem, baseline_candidate(problem), cpu_config())
    assert result.outcome is Outcome.CORRECT, result.message
    assert result.extra.footprint.startswith(f"{problem.id}: --inputs standard") and "varied trials'" in result.extra.footprint
    assert not (result.extra.input_variants or {}).get("checked")  # no varied trial ran
    monkeypatch.setattr(footprint, "host_available", lambda: room * 4)
    again = evaluate(problem, baseline_candidate(problem), cpu_config())
    assert again.extra.footprint is None and (again.extra.input_variants or {}).get("checked")


def test_a_problem_that_kills_its_measuring_process_is_not_measured_and_the_driver_lives_on():
    source = KILLED.replace('if x.device.type != "meta"', "if True")
    assert _footprint(Problem("9", 3, "3_KillsAlways", source), cpu_config()) is None


def test_a_supervisor_killed_by_sigkill_is_a_skip_that_names_memory():
    problem = Problem("9", 2, "2_Killed", KILLED)
    result = evaluate(problem, baseline_candidate(problem), cpu_config())
    line = result.extra.skipped or ""
    assert result.outcome is Outcome.HARNESS_ERROR and result.message == line, result.message
    assert "killed by SIGKILL during stage 'reference'" in line and "out-of-memory" in line and "--device cpu-check" in line


def test_pytest_skips_an_item_that_cannot_fit_with_one_line(pytester):
    level = pytester.path / "data" / "level9"
    level.mkdir(parents=True)
    (level / "1_Huge.py").write_text(HUGE)
    report = pytester.path / "kb.json"
    result = pytester.runpytest_subprocess("--level", "9", "--dataset", str(pytester.path / "data"), "--solutions", "baseline",
                                           "--device", "cpu", "-rs", "-p", "no:cacheprovider", f"--kb-report={report}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *L9-1_Huge needs about * of host memory and * is available*--device cpu-check*"])
    assert "SIGKILL" not in result.stdout.str()


@pytest.fixture(autouse=True)
def _extra_level(monkeypatch):
    monkeypatch.setenv("KB_EXTRA_LEVELS", "9")
    monkeypatch.delenv("KB_FOOTPRINT", raising=False)
    assert torch.__version__
