"""Comparing outputs (issue 48): every dtype as torch.testing.assert_close would, within the tolerance of its
dtype; the tolerance rules themselves and how a config picks one."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from helpers import DATA, cpu_config, tiny_problem
from pytest_kernelbench.candidates import Candidate, load_candidate_file
from pytest_kernelbench.config import EvalConfig, default_tolerance
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.judge.compare import Sealer, close_together, compare_chunked, compare_tensors, values_equal
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.outcome import Outcome
from pytest_kernelbench.problems import problem_from_path
from pytest_kernelbench.tolerance import parse

KB, PIKE = parse("kernelbench"), parse("pike")


# --- the rules ---------------------------------------------------------------------------------------


def test_compare_tolerance_rules_give_each_dtype_its_projects_numbers():
    assert KB.at(torch.float32) == (1e-4, 1e-4) and KB.at("float64") == (1e-4, 1e-4)
    assert KB.at(torch.float16) == KB.at(torch.bfloat16) == (1e-2, 1e-2)
    assert KB.at(torch.complex64) == KB.at(torch.float32) and KB.at(torch.complex128) == KB.at(torch.float64)
    for rule in (PIKE, parse("backendbench")):
        assert {rule.at(d) for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64)} == {(1e-2, 1e-2)}
    assert parse("1e-3").at(torch.float32) == (1e-3, 1e-3) and parse("1e-3,1e-5").at(torch.float16) == (1e-3, 1e-5)
    loose = KB.replaced(atol=0.5, rtol=None)
    assert loose.at(torch.float32) == (0.5, 1e-4) and loose.at(torch.float16) == (0.5, 1e-2)
    assert loose.label == "kernelbench --atol 0.5" and loose.to_dict()["float32"] == [0.5, 1e-4]
    assert KB.describe() == ("atol=rtol=0.0001 for float32 and float64 outputs; atol=rtol=0.01 for float16, bfloat16 and "
                             "other floating outputs")  # fmt: skip
    assert PIKE.describe() == "atol=rtol=0.01" and parse("1e-3,1e-5").describe() == "atol=0.001 and rtol=1e-05"


def test_a_tolerance_tighter_than_tf32s_rounding_has_both_runners_compute_float32_without_tf32():
    assert KB.wants_ieee_float32 and parse("1e-4").wants_ieee_float32  # cuDNN's default TF32 is 1e-3 off
    assert not PIKE.wants_ieee_float32 and not parse("backendbench").wants_ieee_float32 and not parse("1e-2").wants_ieee_float32
    # both runners, the reference's and the candidate's, are told (the flag is torch's on any device; on a GPU it matters)
    probe = "        if torch.backends.cudnn.allow_tf32 != WANTED:\n            raise RuntimeError('allow_tf32')\n"
    source = tiny_problem().source.replace("    def forward(self, x):\n", "    def forward(self, x):\n" + probe)
    for tolerance, wanted in (("kernelbench", "False"), ("pike", "True")):
        problem = dataclasses.replace(tiny_problem(), source=source.replace("WANTED", wanted))
        candidate = Candidate(source.replace("WANTED", wanted).replace("class Model(", "class ModelNew("), "", "probe")
        result = evaluate(problem, candidate, cpu_config(tolerance=tolerance, trials=1))
        assert result.outcome is Outcome.CORRECT, (tolerance, result.message)


@pytest.mark.parametrize("spec", ["loose", "", "1e-3,1e-4,1e-5", "-1e-3", "nan", "1e-3,inf", "kernelbench,1e-3"])
def test_compare_tolerance_that_does_not_exist_is_a_usage_error_naming_the_choices(spec):
    with pytest.raises(KernelBenchUsageError, match=r"choose kernelbench, pike, backendbench, or ATOL\[,RTOL\]"):
        parse(spec)


def test_compare_tolerance_defaults_by_level_and_yields_to_atol_and_rtol():
    assert [default_tolerance(level) for level in ("1", "2", "3", "4", "mini", "")] == ["kernelbench"] * 6
    assert [default_tolerance(level) for level in ("0", "3-metr", "5")] == ["pike"] * 3
    assert [default_tolerance(level) for level in ("smoke", "opinfo")] == ["backendbench"] * 2
    assert EvalConfig().for_level("3-metr").tol.at(torch.float32) == (1e-2, 1e-2)
    assert EvalConfig().for_level("1").tol.at(torch.float32) == (1e-4, 1e-4)
    assert EvalConfig(tolerance="pike").for_level("1").tol.name == "pike"  # given: kept whatever the level
    assert EvalConfig(rtol=0.1).for_level("1").tol.at(torch.float16) == (1e-2, 0.1)
    for bad in ({"tolerance": "tight"}, {"atol": -1.0}, {"rtol": math.nan}):
        with pytest.raises(KernelBenchUsageError):
            EvalConfig(**bad)


# --- tensors -----------------------------------------------------------------------------------------


def test_compare_complex_outputs_by_both_parts():
    ref = torch.fft.rfft(torch.randn(4, 64))
    wrong = torch.complex(ref.real, ref.imag + 0.5)  # the real parts right: an upcast to a real dtype saw no difference
    why, diff = compare_tensors(wrong, ref, KB)
    # float32 parts of up to about 30 round the added 0.5 by a few ulps (0.5000009 in one CI rehearsal)
    assert f"{ref.numel()} of {ref.numel()} values outside atol=0.0001" in why and diff == pytest.approx(0.5, abs=1e-5)
    assert compare_tensors(ref.clone(), ref, KB) == ("", 0.0)
    conj = ref.conj().resolve_conj()  # imaginary parts negated
    assert compare_tensors(conj, ref, PIKE)[0] and compare_chunked(conj, ref, PIKE)[1] > 0
    nan_imag = ref.clone()
    nan_imag.imag[0, 3] = math.nan
    assert compare_tensors(nan_imag, ref, PIKE)[0] == "1 NaN/Inf values where the reference is finite"


def test_compare_integers_and_bools_exactly_without_overflow():
    big = torch.tensor([2**53, -(2**63), 2**63 - 1, 7])
    off_by_one = big.clone()
    off_by_one[0] += 1  # the same double as 2**53: a comparison through float64 saw no difference
    why, diff = compare_tensors(off_by_one, big, parse("1000"))  # a tolerance does not apply to integers
    assert why == "1 of 4 values differ (torch.int64 outputs are compared exactly; max abs diff 1)" and diff == 1.0
    flipped = big.flip(0)  # differences of 2**64 - 1: int64 arithmetic would wrap
    assert compare_tensors(flipped, big, KB)[1] == pytest.approx(2.0**64)
    assert compare_tensors(big.clone(), big, KB) == ("", 0.0)
    mask = torch.rand(1000) > 0.5
    wrong = mask.clone()
    wrong[::100] = ~wrong[::100]
    assert compare_tensors(wrong, mask, parse("1"))[0].startswith("10 of 1000 values differ (torch.bool")
    small = torch.arange(300, dtype=torch.uint8)
    assert compare_chunked(small + 1, small, KB)[1] == 300 and compare_chunked(small, small, KB)[1] == 0


def test_compare_each_dtype_within_its_own_tolerance():
    ref32 = torch.rand(1000) + 1
    off = ref32 + 1e-3  # outside float32's 1e-4, inside float16's 1e-2
    assert "outside atol=0.0001 rtol=0.0001" in compare_tensors(off, ref32, KB)[0]
    assert compare_tensors(off, ref32, PIKE)[0] == ""
    assert compare_tensors(off.half(), ref32.half(), KB)[0] == ""
    assert compare_tensors(off.bfloat16(), ref32.bfloat16(), KB)[0] == ""
    assert compare_tensors(off, ref32, 1e-2, 1e-2)[0] == ""  # numbers: one tolerance for every dtype


def test_compare_a_sealed_complex_or_bool_output_and_notice_a_late_change():
    sealer = Sealer()
    for out in (torch.fft.rfft(torch.randn(256)), torch.rand(256) > 0.5, torch.arange(256, dtype=torch.int16)):
        seal = sealer.seal(out)
        assert compare_tensors(out.clone(), out, KB, sealer=sealer, seal=seal)[0] == ""
        late = out.clone()
        late.view(torch.uint8)[5] ^= 1
        assert "changed after the call returned" in compare_tensors(late, out, KB, sealer=sealer, seal=seal)[0]


# --- values that are not tensors ------------------------------------------------------------------------


def test_a_rounds_calls_are_told_right_together_only_where_each_would_be_alone():
    """Issue 46 (H200, 1871134: a round of 64 small calls compared one by one took as long as the calls): a round's
    checked calls compared in one pass say 'all right' only where compare_tensors says so of each, the slots are what was
    sealed and the inputs as given; anything else (a value out of tolerance, a NaN, a slot changed after its seal, an
    input written to, dtypes a pass cannot take) sends each call to be checked alone."""
    sealer, tol = Sealer(), KB
    refs = [torch.randn(4, 33) for _ in range(5)]
    inputs = [(torch.randn(4, 8), torch.randn(4, 8)) for _ in range(5)]

    # each input of every call: as the candidate's runner left it, and as it was given
    pristine = [([pair[k] for pair in inputs], [pair[k].clone() for pair in inputs]) for k in range(2)]

    def told(news):
        return close_together([(news, refs, sealer.take_many(news))], pristine, tol, sealer)

    close = [r + 5e-5 * torch.randn_like(r).clamp(-1, 1) for r in refs]
    assert told(close) and all(compare_tensors(n, r, tol)[0] == "" for n, r in zip(close, refs, strict=True))
    far = [c.clone() for c in close]
    far[3][2, 7] += 0.01
    assert not told(far) and compare_tensors(far[3], refs[3], tol)[0]
    nan = [c.clone() for c in close]
    nan[0][0, 0] = float("nan")
    assert not told(nan)
    late = [c.clone() for c in close]
    seals = sealer.take_many(late)
    late[4][1, 1] += 1e-6  # within tolerance, but not what was sealed
    assert not close_together([(late, refs, seals)], pristine, tol, sealer)
    pristine[1][0][3][0, 0] += 1.0  # the fourth call's second input written to in place
    assert not told(close)
    ints = [torch.randint(0, 9, (4, 33)) for _ in range(5)]
    assert not close_together([(ints, ints, sealer.take_many(ints))], [], tol, sealer)  # exact dtypes: each alone
    half = [r.half() for r in refs]
    assert close_together([(half, half, sealer.take_many(half))], [], tol, sealer)  # 2-byte words digest as sealed
    shapes = [torch.randn(4, 33), torch.randn(4, 32)]
    assert not close_together([(shapes, shapes, sealer.take_many(shapes))], [], tol, sealer)


def test_compare_values_huge_ints_exactly_and_never_raise():
    huge = 10**400
    assert values_equal(huge, huge, KB) and not values_equal(huge + 1, huge, KB)
    assert not values_equal(huge, 1e300, KB) and not values_equal(1e300, huge, KB)  # a float() of it overflows
    assert not values_equal(huge, 2.5, PIKE) and not values_equal(-huge, huge, PIKE)
    assert values_equal(2**64 + 1, 2**64 + 1, PIKE) and not values_equal(2**64 + 1, 2**64, PIKE)
    assert values_equal(3, 3.0, KB)  # an int where the reference has a float: numbers still


def test_compare_values_floats_within_the_float64_tolerance():
    assert values_equal(1.00005, 1.0, KB) and not values_equal(1.001, 1.0, KB)
    assert values_equal(1.001, 1.0, PIKE) and not values_equal(1.05, 1.0, PIKE)
    assert not values_equal(1e308, -1e308, PIKE)  # the difference overflows to inf: not close, no error
    assert values_equal(1.001, 1.0, 1e-2, 1e-2)


def test_compare_values_bools_only_equal_bools():
    assert values_equal(True, True, KB) and not values_equal(True, False, KB)
    assert not values_equal(True, 1, PIKE) and not values_equal(1, True, PIKE) and not values_equal(0.0, False, PIKE)


def test_compare_values_nested_structures_item_by_item():
    ref = {"a": [1, 2.0, (True, None)], "b": "text"}
    assert values_equal({"a": [1, 2.00001, [True, None]], "b": "text"}, ref, KB)
    assert not values_equal({"a": [1, 2.1, [True, None]], "b": "text"}, ref, KB)
    assert not values_equal({"a": [1, 2.0, [True]], "b": "text"}, ref, KB)  # a shorter sequence
    assert not values_equal({"a": [1, 2.0, [True, None]]}, ref, KB)  # a key missing
    assert not values_equal([1, 2], {"0": 1, "1": 2}, KB) and not values_equal("1", 1, KB) and values_equal(None, None, KB)
    deep: list = []
    for _ in range(10_000):  # a forged reply nested beyond any output: not equal, no RecursionError
        deep = [deep]
    assert not values_equal(deep, deep, KB)


# --- judged end to end on the CPU -----------------------------------------------------------------------

DTYPES = DATA / "dtypes"


@pytest.mark.parametrize(
    ("problem", "candidate", "outcome", "says"),
    [
        ("1_Spectrum", "spectrum_right", Outcome.CORRECT, ""),
        ("1_Spectrum", "spectrum_conjugate", Outcome.INCORRECT, "of 2064 values outside atol="),
        ("1_Spectrum", "spectrum_count_off", Outcome.INCORRECT, "output 1: 1 of 16 values differ (torch.int64 outputs are compared"),
        ("2_BigCount", "bigcount_right", Outcome.CORRECT, ""),
        ("2_BigCount", "bigcount_float", Outcome.INCORRECT, "output values [1e+300], expected [1000000000"),
    ],
)
def test_compare_complex_integer_and_huge_outputs_when_judged(problem, candidate, outcome, says):
    """A wrong rfft whose real parts are right is incorrect; so is an integer output one off; a float where the reference
    returns 10**400 is the candidate's incorrect, not the harness's OverflowError."""
    judged = problem_from_path(DTYPES / "level9" / f"{problem}.py")
    result = evaluate(judged, load_candidate_file(DTYPES / "candidates" / f"{candidate}.py"), cpu_config(trials=2, max_time=0.1))
    assert result.outcome is outcome, result.message
    assert says in result.message


@pytest.mark.parametrize(("given", "outcome", "recorded"), [({}, Outcome.INCORRECT, "kernelbench"),
                                                            ({"tolerance": "pike"}, Outcome.CORRECT, "pike"),
                                                            ({"atol": 2e-3}, Outcome.CORRECT, "kernelbench --atol 0.002")])  # fmt: skip
def test_compare_holds_a_judged_output_to_its_levels_tolerance(given, outcome, recorded):
    """A float32 output 1e-3 off: incorrect at a KernelBench level's 1e-4 (the tiny problem's level 9 is KernelBench's),
    correct with --tolerance pike or --atol 2e-3; the result records the tolerance it was held to."""
    result = evaluate(tiny_problem(), load_candidate_file(DTYPES / "candidates" / "tiny_shifted.py"), cpu_config(trials=1, **given))
    assert result.outcome is outcome, result.message
    assert result.tolerance["name"] == recorded
    assert result.tolerance["float32"] == list(EvalConfig(**given).for_level("9").tol.at("float32"))


def test_a_seal_and_a_comparison_in_cache_sized_chunks_find_what_one_pass_finds(monkeypatch):
    from pytest_kernelbench.judge import compare

    sealer, x = Sealer(), torch.randn(3 * 1000 + 7)
    y = x.clone()
    y[2500] += 0.5  # in the third chunk of 1000
    whole = (compare.digest_value(sealer.take(x)), compare_tensors(y, x, KB))
    monkeypatch.setattr(compare, "_CHUNK", 1000)
    assert (compare.digest_value(sealer.take(x)), compare_tensors(y, x, KB)) == whole
    assert "1 of 3007 values" in whole[1][0] and whole[1][1] == pytest.approx(0.5, abs=1e-6)
