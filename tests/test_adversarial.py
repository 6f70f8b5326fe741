"""The adversarial suite: candidates that cheat, each refused with a message naming the reason.

Every file in tests/adversarial/ is a candidate for tests/data/tiny/level9/1_TinyLinear.py.
"""

import pytest

from helpers import DATA, TESTS, cpu_config, tiny_problem
from pytest_kernelbench.candidates import load_candidate_file
from pytest_kernelbench.evaluate import evaluate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import problem_from_path

ADVERSARIAL = TESTS / "adversarial"
INCORRECT, REJECTED = Outcome.INCORRECT, Outcome.REJECTED

CASES = {
    # name: (outcome, words the message must contain)
    "memoised_by_shape": (INCORRECT, "trial 2/3"),
    "right_only_first_calls": (INCORRECT, "a call made like the timed ones, after them, is wrong"),
    "memoised_by_identity": (INCORRECT, "refilled in place with new values"),
    "modifies_input": (REJECTED, "modified input 0 in place"),
    "scans_memory_for_answers": (INCORRECT, "values outside atol"),
    "uninitialised_memory": (INCORRECT, "trial 1/3"),
    "work_on_another_thread": (INCORRECT, "values outside atol"),
    "lazy_tensor_subclass": (INCORRECT, "LazyTensor (tensor subclass)"),
    "patches_clock": (REJECTED, "time.perf_counter"),
    "patches_torch": (REJECTED, "torch.nn.functional.linear"),
    "patches_harness": (REJECTED, "pytest_kernelbench.timing.Clocks.time_once"),
    "nan_output": (INCORRECT, "NaN/Inf values where the reference is finite"),
    "wrong_shape": (INCORRECT, "shape (1, 32, 128), expected (32, 128)"),
    "wrong_dtype": (INCORRECT, "dtype torch.float64, expected torch.float32"),
    "aliases_input": (REJECTED, "modified input 0 in place"),
}
STRICT_ONLY = ["reference_from_harness_files", "try_except_fallback", "modelnew_is_model"]


def judge(name, **config):
    return evaluate(tiny_problem(), load_candidate_file(ADVERSARIAL / f"{name}.py"), cpu_config(**config))


def test_every_adversarial_candidate_has_a_case():
    assert {p.stem for p in ADVERSARIAL.glob("*.py")} == set(CASES) | set(STRICT_ONLY)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cheat_is_refused(name):
    outcome, says = CASES[name]
    result = judge(name)
    assert result.outcome is outcome, f"{name}: {result.outcome} {result.message[:500]}"
    assert says in result.message
    assert result.speedup is None


def test_with_separate_placement_the_last_timed_call_itself_is_checked():
    result = judge("right_only_first_calls", placement="separate")
    assert result.outcome is INCORRECT and "the output of the last timed call is wrong" in result.message


@pytest.mark.parametrize("name", STRICT_ONLY)
def test_pytorch_fallbacks_pass_plain_but_are_rejected_under_strict(name):
    plain = judge(name)
    assert plain.outcome is Outcome.CORRECT, plain.message
    assert "aten.addmm" in plain.extra["aten_ops"]
    strict = judge(name, strict=True)
    assert strict.outcome is REJECTED
    assert "--strict: ModelNew.forward runs PyTorch compute ops:" in strict.message and "aten.addmm x1" in strict.message
    assert "aten.addmm" in strict.extra["aten_ops"]  # the breakdown is kept for refused candidates too


def test_op_breakdown_is_reported_for_every_candidate():
    result = evaluate(tiny_problem(), load_candidate_file(DATA / "broken" / "correct.py"), cpu_config())
    assert result.extra["aten_ops"] == {"aten.t": 1, "aten.addmm": 1, "aten.clamp_min": 1}


def test_near_constant_problems_are_flagged_as_suspect():
    problem = problem_from_path(DATA / "constant" / "level9" / "1_NearConstant.py")
    result = evaluate(problem, load_candidate_file(DATA / "constant" / "solution.py"), cpu_config())
    assert result.outcome is Outcome.CORRECT
    assert result.extra["suspect_constant_output"] is True and result.extra["output_sensitivity"] < 1e-5
    ordinary = evaluate(tiny_problem(), load_candidate_file(DATA / "broken" / "correct.py"), cpu_config())
    assert ordinary.extra["suspect_constant_output"] is False and ordinary.extra["output_sensitivity"] > 0.1
