"""``--inputs varied`` (issue 48): correctness trials on other distributions than ``get_inputs()``'s own."""

from __future__ import annotations

import re
import textwrap

import pytest
import torch

from helpers import cpu_config
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.judge.compare import Sealer
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.judge.distributions import STANDARD, VARIANTS, Variants, atol_scale, finite, output_size, strays, vary
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import Problem
from pytest_kernelbench.tolerance import OTHER, Tolerance

DOMAIN_CHECK = 'if bool((x > 1.2).any()):\n    raise ValueError("outside the domain this model is defined on")\n'


def _source(cls: str, forward: str, inputs: str = "") -> str:
    """A problem's (``inputs`` given) or a candidate's module: one forward over ``x``, no init arguments."""
    body = textwrap.indent(forward, " " * 8)
    source = f"import torch\nimport torch.nn as nn\n\n\nclass {cls}(nn.Module):\n    def forward(self, x):\n{body}\n"
    if inputs:
        source += f"\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n"
    return source


def _problem(name: str, forward: str, inputs: str) -> Problem:
    return Problem("mini", 90, name, _source("Model", forward, inputs), "tests/test_distributions.py")


def _candidate(forward: str) -> Candidate:
    return Candidate(_source("ModelNew", forward), "", "test")


ROW_MEAN = _problem("90_RowMean", "return x.mean(dim=1)", "torch.rand(16, 65536)")
# The analytical shortcut: the mean of 65536 values of torch.rand is 0.5 within PIKE's 0.01 (a near-constant output).
CONSTANT_HALF = _candidate("return torch.full((x.shape[0],), 0.5, dtype=x.dtype)")
HONEST_MEAN = _candidate("return x.sum(dim=1) / x.shape[1]")


def test_each_variant_keeps_shapes_dtypes_and_leaves_integers_alone():
    values = [torch.randn(3, 5), torch.rand(4, dtype=torch.float16), torch.arange(6), torch.ones(2, dtype=torch.bool), 7,
              [torch.randn(2)], torch.empty(0)]  # fmt: skip
    for variant in VARIANTS:
        out = vary(values, variant)
        for before, after in zip(values, out, strict=True):
            if isinstance(before, torch.Tensor):
                assert (after.shape, after.dtype, after.device) == (before.shape, before.dtype, before.device), variant
        assert torch.equal(out[2], values[2]) and torch.equal(out[3], values[3]) and out[4] == 7, variant
        assert not torch.equal(out[0], values[0]), variant  # the floating-point values did change
    assert vary(values, STANDARD) is values
    uniform = vary([torch.rand(10_000) + 3.0], "uniform")[0]
    assert 3.0 <= float(uniform.min()) and float(uniform.max()) < 4.0  # the tensor's own range: its domain kept
    assert torch.equal(vary([torch.tensor([0.3, -0.2])], "small integers")[0], torch.tensor([1.0, -1.0]))
    odd = torch.tensor([float("inf"), float("nan"), 1.0, -2.0])  # a problem's own infinities and NaNs: never an exception
    eight = torch.ones(4).to(torch.float8_e4m3fn)  # a dtype without the arithmetic: left alone
    for variant in VARIANTS:
        assert vary([odd], variant)[0].shape == odd.shape, variant
        assert vary([eight], variant)[0] is eight, variant


def test_the_zeros_get_inputs_made_stay_zero_under_every_variant():
    """A problem's structure (triangular inputs, padding, a zero initial state) is kept: a kernel may rely on it."""
    upper = torch.triu(torch.rand(64, 64)) + torch.triu(torch.ones(64, 64)) * 0.1
    state = torch.zeros(8)
    for variant in VARIANTS:
        varied, zero = vary([upper, state], variant)
        assert torch.equal(varied.tril(-1), torch.zeros(64, 64)) and torch.equal(zero, state), variant
        assert not torch.equal(varied.triu(), upper.triu()), variant  # the rest did change


def test_special_values_keep_signs_and_take_each_value_in_a_share():
    x = torch.randn(64, 1024)
    special = vary([x], "special values")[0]
    changed = special != x
    assert 0.08 < float(changed.float().mean()) < 0.17
    assert torch.equal(torch.signbit(special), torch.signbit(x))  # -0.0 where a negative value became zero
    top = float(x.abs().max())
    for value in (0.0, 1.0, top, torch.finfo(torch.float32).smallest_normal / 4):
        assert int((special.abs() == value).sum()) > 0.015 * x.numel(), value
    assert float(special.abs().max()) == top  # no value outside the tensor's own scale
    half = vary([torch.randn(4096).half()], "special values")[0]
    assert half.dtype == torch.float16 and bool(((half != 0) & (half.abs() < torch.finfo(torch.float16).smallest_normal)).any())


# An argmax that answers the last of equal maxima (torch answers the first): right while a row's values are distinct, as
# randn's, scaled, shifted or uniform, nearly always are (a uniform set ties a row's maximum rarely: none in 2,000 sets
# of 16 rows here, but a CI rehearsal drew one); wrong where special values put the tensor's largest value twice in a row.
ARGMAX = _problem("94_RowArgMax", "return torch.argmax(x, dim=1)", "torch.randn(16, 1024)")
LAST_ARGMAX = _candidate("return x.shape[1] - 1 - torch.argmax(x.flip(1), dim=1)")


def test_special_values_catch_an_answer_that_holds_only_while_a_rows_values_are_distinct():
    assert evaluate(ARGMAX, LAST_ARGMAX, cpu_config(inputs="standard", trials=5)).outcome is Outcome.CORRECT
    result = evaluate(ARGMAX, LAST_ARGMAX, cpu_config(inputs="varied", trials=5))
    caught_by = ("trial 5/5 (inputs special values)", "(inputs uniform)")  # the second: a drawn tie, caught as well
    assert result.outcome is Outcome.INCORRECT and any(why in result.message for why in caught_by), result.message
    first = _candidate("return torch.argmax(x.clone(), dim=1)")
    honest = evaluate(ARGMAX, first, cpu_config(inputs="varied", trials=5))
    assert honest.outcome is Outcome.CORRECT, honest.message
    assert honest.extra.input_variants["checked"][-1] == "special values"


TRIANGULAR = _problem("92_UpperMatmul", "return torch.triu(x @ x)", "torch.triu(torch.rand(32, 32))")
# Skips the zero half, as the problem's inputs allow (KernelBench level 1's 14_Matmul_for_upper_triangular_matrices).
UPPER_ONLY = _candidate(
    "n = x.shape[0]\nout = torch.zeros_like(x)\nfor i in range(n):\n    out[i, i:] = x[i, i:] @ x[i:, i:]\nreturn out"
)


def test_a_kernel_that_relies_on_the_problems_zeros_passes_varied_trials():
    result = evaluate(TRIANGULAR, UPPER_ONLY, cpu_config(trials=5))
    assert result.outcome is Outcome.CORRECT, result.message
    assert result.extra.input_variants["checked"] == ["scaled up", "shifted", "uniform", "special values"]


def test_trials_take_the_variants_in_turn_after_a_standard_first_and_skip_dropped_ones():
    cycle = Variants("varied")
    taken = []
    for trial in range(len(VARIANTS) + 2):
        taken.append(cycle.for_trial(trial))
        cycle.passed(taken[-1])
    assert taken == [STANDARD, *VARIANTS, VARIANTS[0]] and cycle.checked == taken[1:]
    cycle = Variants("varied")
    assert cycle.for_trial(1) == VARIANTS[0]
    cycle.drop(VARIANTS[0], "why")
    assert cycle.for_trial(2) == VARIANTS[1] and cycle.dropped == {VARIANTS[0]: "why"}  # the next one, none skipped
    for variant in VARIANTS[1:]:
        cycle.drop(variant, "")
    assert cycle.for_trial(3) == STANDARD  # every variant dropped: the problem's own
    assert {Variants("standard").for_trial(i) for i in range(6)} == {STANDARD}
    with pytest.raises(KernelBenchUsageError, match="--inputs other: choose standard or varied"):
        cpu_config(inputs="other")


def test_a_shortcut_that_holds_for_the_problems_own_distribution_fails_on_varied_inputs():
    standard = evaluate(ROW_MEAN, CONSTANT_HALF, cpu_config(tolerance="pike", inputs="standard"))
    assert standard.outcome is Outcome.CORRECT, standard.message  # the blind spot the option closes
    assert standard.extra.suspect_constant_output
    varied = evaluate(ROW_MEAN, CONSTANT_HALF, cpu_config(tolerance="pike"))  # the default: varied
    assert cpu_config().inputs == "varied"
    assert varied.outcome is Outcome.INCORRECT
    assert "trial 2/3 (inputs scaled up)" in varied.message
    honest = evaluate(ROW_MEAN, HONEST_MEAN, cpu_config(inputs="varied"))
    assert honest.outcome is Outcome.CORRECT, honest.message
    found = honest.extra.input_variants
    assert (found["checked"], found["dropped"]) == (["scaled up", "shifted"], {})
    # atol grew with the reference's outputs: rows' means of 8 x rand are 8 times as large, of rand + its spread ~1.58
    assert found["atol_scale"] == pytest.approx({"scaled up": 8.0, "shifted": 1.577}, rel=0.01)


# Honest in its first calls (the trials, the trace, the warm-up), then the shortcut that holds for rand's values alone.
LATE_CONSTANT = _candidate(
    'self.calls = getattr(self, "calls", 0) + 1\nif self.calls > 12:\n    return torch.full((x.shape[0],), 0.5, dtype=x.dtype)\n'
    "return x.sum(dim=1) / x.shape[1]"
)


def test_timed_calls_take_the_checked_variants_too_and_catch_a_shortcut_taken_after_the_trials():
    """About one timed call in four takes a variant the trials checked (a draw apart from whether it is checked); 40
    timed calls, all checked (the outputs are small): one of them is varied but with probability 0.75**40 = 1e-5."""
    timed = {"tolerance": "pike", "trials": 3, "min_reps": 40, "max_reps": 40, "warmup": 2}
    standard = evaluate(ROW_MEAN, LATE_CONSTANT, cpu_config(inputs="standard", **timed))
    assert standard.outcome is Outcome.CORRECT, standard.message  # every check on the problem's own distribution passes
    assert standard.extra.varied_checked_calls is None
    varied = evaluate(ROW_MEAN, LATE_CONSTANT, cpu_config(inputs="varied", **timed))
    assert varied.outcome is Outcome.INCORRECT, varied.message
    assert re.search(r"timed call \d+ \(inputs (scaled up|shifted)\)", varied.message), varied.message
    honest = evaluate(ROW_MEAN, HONEST_MEAN, cpu_config(inputs="varied", **timed))
    assert honest.outcome is Outcome.CORRECT, honest.message
    assert 1 <= honest.extra.varied_checked_calls < honest.extra.checked_calls


def test_a_variant_on_which_the_reference_is_not_finite_is_dropped_and_that_trial_runs_on_standard_inputs():
    """log(x) of x in [0.1, 1.1): with special values some are 0, and the reference answers -inf there."""
    log = _problem("91_Log", "return torch.log(x)", "torch.rand(64, 64) + 0.1")
    result = evaluate(log, _candidate("return torch.log(x.clone())"), cpu_config(inputs="varied", trials=5))
    assert result.outcome is Outcome.CORRECT, result.message
    found = result.extra.input_variants
    assert found["checked"] == ["scaled up", "shifted", "uniform"]
    assert found["dropped"] == {"special values": "the reference's output is not all finite"}


def test_a_variant_the_reference_raises_on_is_dropped_not_a_harness_error():
    """A reference that checks its domain (values up to 1.2; its inputs are in [0, 1)) raises on the scaled-up and
    shifted values: no fault of the candidate's (which checks the same and would raise first, being called first), nor a
    judge failure: those variants are dropped, with why, before the candidate sees them."""
    problem = _problem("92_CheckedLog", DOMAIN_CHECK + "return torch.log(x + 1)", "torch.rand(64, 64)")
    candidate = _candidate(DOMAIN_CHECK + "return torch.log1p(x)")  # the same domain check as the reference's
    result = evaluate(problem, candidate, cpu_config(inputs="varied", trials=4))
    assert result.outcome is Outcome.CORRECT, result.message
    assert result.extra.input_variants["checked"] == ["uniform"]
    assert set(result.extra.input_variants["dropped"]) == {"scaled up", "shifted"}
    assert result.extra.input_variants["dropped"]["scaled up"] == "ValueError: outside the domain this model is defined on"


DIFFERENCE = _problem("93_HalfDifference", "return x[:, :32] - x[:, 32:]", "torch.randn(64, 64)")


def test_a_varied_trial_grows_atol_with_the_references_outputs_and_still_fails_a_wrong_answer():
    """An error the size of the inputs (a reduced-precision kernel's), within PIKE's atol on the problem's own inputs:
    scaled up 8 times, the outputs and the error grow 8 times, and so does atol for that trial (the error no larger, for
    the outputs' size, than the standard trial allowed); shifted, the difference's outputs keep their size and atol
    stays (within the draws' noise). A candidate wrong only on large values still fails on the scaled-up trial."""
    rounding = _candidate("a, b = x[:, :32], x[:, 32:]\nreturn a - b + 0.0008 * (a.abs() + b.abs())")
    result = evaluate(DIFFERENCE, rounding, cpu_config(tolerance="pike", inputs="varied", trials=3))
    assert result.outcome is Outcome.CORRECT, result.message
    scale = result.extra.input_variants["atol_scale"]
    assert 7.0 < scale["scaled up"] < 9.0 and scale.get("shifted", 1.0) < 1.2, result.extra.input_variants
    wrong_when_large = _candidate("a, b = x[:, :32], x[:, 32:]\nreturn a - b + (a.abs() > 10).to(x.dtype)")
    result = evaluate(DIFFERENCE, wrong_when_large, cpu_config(tolerance="pike", inputs="varied", trials=3))
    assert result.outcome is Outcome.INCORRECT and "(inputs scaled up)" in result.message, result.message
    named = re.search(r"atol=([0-9.e-]+) ", result.message)
    assert named and 0.07 < float(named.group(1)) < 0.09, result.message  # the grown atol is the one named


def _off_when_scaled_up(values: int, times: float) -> Candidate:
    """The honest difference, but on scaled-up inputs (values beyond 12; the standard and shifted ones stay below) the
    first ``values`` outputs off by ``times`` the tolerance PIKE's rule grows to there (atol 0.01 times about 8)."""
    return _candidate("a, b = x[:, :32], x[:, 32:]\nout = a - b\nif bool((x.abs() > 12).any()):\n"
                      f"    out.view(-1)[:{values}] += {times} * (0.08 + 0.01 * out.view(-1)[:{values}].abs())\nreturn out")


def test_a_varied_call_counts_a_stray_of_rounding_and_fails_more_or_bigger_ones():
    """On varied inputs one value in 100,000 (one at least) may lie outside the tolerance, within twice it: a sharp
    softmax's rounding on scaled-up inputs (H200, 0cfdabd: the bundled attention, 1 of 262,144 values). The standard
    inputs allow none; two values of these 2,048, or one by ten times the tolerance, are wrong."""
    tight = cpu_config(tolerance="pike", inputs="varied", trials=3)
    stray = evaluate(DIFFERENCE, _off_when_scaled_up(1, 1.5), tight)
    assert stray.outcome is Outcome.CORRECT, stray.message
    assert stray.extra.varied_strays >= 1 and stray.extra.input_variants["checked"] == ["scaled up", "shifted"]
    for values, times in ((2, 1.5), (1, 10.0)):
        wrong = evaluate(DIFFERENCE, _off_when_scaled_up(values, times), tight)
        assert wrong.outcome is Outcome.INCORRECT and "(inputs scaled up)" in wrong.message, (values, times, wrong.message)
    ref = torch.randn(300_000)
    rule = Tolerance("test", ((OTHER, 1e-3, 1e-3),))
    sealer = Sealer()

    def counted(new: torch.Tensor) -> int | None:  # the output as it was sealed at its reply
        return strays(new, ref, rule, sealer, sealer.seal(new))

    off = ref.clone()
    off[:3] += 1.5e-3 * (1 + ref[:3].abs())  # 1.5 times the tolerance: three strays, three allowed in 300,000
    assert counted(off) == 3 and counted(ref.clone()) == 0
    assert strays(off, ref, rule, sealer, sealer.seal(ref)) is None  # no longer what was sealed: not counted
    four = off.clone()
    four[3] += 1.5e-3 * (1 + ref[3].abs())
    assert counted(four) is None
    wide = ref.clone()
    wide[0] += 3e-3 * (1 + ref[0].abs())
    assert counted(wide) is None  # beyond twice the tolerance
    nan = ref.clone()
    nan[0] = float("nan")
    assert counted(nan) is None and strays(torch.arange(4), torch.arange(4), rule, sealer, sealer.seal(torch.arange(4))) is None


def test_atol_scale_output_size_and_a_tolerance_times_a_factor():
    assert atol_scale(2.0, 16.0) == 8.0 and atol_scale(2.0, 1.0) == 1.0 and atol_scale(0.0, 5.0) == 1.0
    assert atol_scale(1.0, float("nan")) == 1.0
    assert output_size([torch.tensor([1.0, -3.0]), torch.arange(5), torch.empty(0)]) == 2.0  # integers left out
    assert output_size([torch.arange(3)]) == 0.0
    assert finite([torch.ones(2).to(torch.float8_e4m3fn), torch.ones(2)]) and not finite([torch.tensor([1.0, float("inf")])])
    rule = Tolerance("test", (("float32", 1e-2, 1e-3), (OTHER, 1e-4, 1e-4)))
    assert rule.atol_times(8.0).at(torch.float32) == (8e-2, 1e-3) and rule.atol_times(1.0) is rule
    assert rule.times(2.0).at(torch.float32) == (2e-2, 2e-3) and rule.times(2.0).at(torch.int64) == (2e-4, 2e-4)
    trials = Variants("varied")
    trials.passed("scaled up", 1.0004)  # shown as 1.0: not a growth worth recording
    trials.passed("shifted", 2.5)
    assert trials.to_dict() == {"checked": ["scaled up", "shifted"], "dropped": {}, "atol_scale": {"shifted": 2.5}}
    assert "atol_scale" not in Variants("varied").to_dict()
