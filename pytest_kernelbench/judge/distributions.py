"""``--inputs varied``: correctness trials on other input distributions than ``get_inputs()``'s own.

Each call's inputs are fresh, but always drawn from the problem's distribution, so an analytical shortcut that holds
for it passes: the mean of a long row of ``torch.rand`` values is 0.5 within any tolerance, a ``randn`` batch's
statistics are 0 and 1 (KernelBench PR #118). With ``varied``, the correctness trials after the first draw the
problem's inputs as usual and then reshape their floating-point tensors' distribution, one variant a trial in turn
(with the default 5 trials, the first four):

- ``scaled up``: every value times 8 (signs kept, so a positive-only domain stays);
- ``shifted``: plus the tensor's spread (its standard deviation, or 1), so a zero mean is no longer given;
- ``uniform``: uniform over the same tensor's own range (its minimum to its maximum): other statistics, same domain;
- ``special values``: about one value in eight replaced, with its own sign, by one of the values kernels get wrong:
  zero (a negative value's is ``-0.0``), one, the tensor's largest magnitude (ties at a row's maximum, which
  ``get_inputs()``'s continuous draws never have: an argmax must answer the first of them, as torch's does) and a
  subnormal (flushed to zero by fast math, harmless within any tolerance; a division by it is not). Not values far
  outside the problem's scale (an exponential's overflow edge, 89 in float32): an honest attention kernel's rounding,
  amplified by logits that large, failed KernelBench's 1e-4 on them (the bundled ``8_MultiHeadAttention``, H200);
- ``small integers``: the values times 4, rounded to whole numbers (exact sums, ties, zeros);
- ``scaled down``: every value divided by 8.

Integer and bool tensors (indices, masks, sizes) and every non-tensor value are left as ``get_inputs()`` made them, and
every value ``get_inputs()`` made exactly zero stays zero: that is the problem's structure (a triangular matrix, a padded
or sparse input, a zero initial state), which a kernel may rely on as the reference's docstring and inputs promise. An
upper-triangular matmul that skips the zero half was judged incorrect on shifted inputs (H200, 2026-11-29) before this.
Before each varied trial the supervisor has the reference alone answer another draw of the variant; where it raises
or answers values that are not all finite (a log of a shifted value, an overflow), the variant is dropped for the rest
of the evaluation before the candidate sees it, and that trial runs on the standard inputs (``Timer.judged_pair``): a
candidate is held only to what the reference itself answers.

The timed calls, too: each takes, with probability 1/:data:`TIMED_ONE_IN` drawn apart from whether it is checked (so
that a varied call tells the candidate nothing about being checked), one of the variants the trials checked (of
:data:`TIMED_VARIANTS`; input sets up to :data:`TIMED_MAX_BYTES`), the same values for both sides; a checked one is
compared as a varied trial is. A shortcut the candidate takes only once the trials are over, right for the problem's
own distribution alone, meets the other values in the timed calls that are checked.

A varied trial asks no more, for the size of its outputs, than the standard one: where the reference's outputs come out
larger (their mean absolute value, against the first trial's), ``atol`` grows by that ratio (:func:`atol_scale`;
``rtol`` is relative already). Values scaled up 8 times, a linear model's outputs too: an error of the size the standard
trial allowed, scaled with them, passes; a wrong answer does not.

Nor does a varied call fail on a few strays of rounding (:func:`strays`): on varied inputs, at most one value in
:data:`STRAY_SHARE` of an output (one at least) may lie outside the tolerance, none beyond :data:`STRAY_WIDEN` times it.
The inputs scaled up sharpen a softmax: the bundled ``8_MultiHeadAttention`` (torch's fused attention against the
reference's matmul, softmax and matmul) had 1 of 262,144 values outside on a timed call's scaled-up inputs (H200,
0cfdabd: 0.00326 against an atol of 0.00279). A shortcut that holds for ``get_inputs()``'s distribution alone misses
far more values, or by far more; a special value mishandled is a NaN or a difference of the value's size. The standard
inputs allow no stray: every value within the tolerance, as KernelBench's ``allclose``. Pure functions of the trusted
side: the supervisor calls them on inputs and outputs it holds.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..tolerance import Tolerance
from .compare import Sealer, sealed_counts

STANDARD = "standard"
CHUNK = 1 << 20  # elements summed at once by output_size (a copy this big at most, in the CPU's cache)
VARIANTS = ("scaled up", "shifted", "uniform", "special values", "small integers", "scaled down")  # in the order trials take them
MOVES_ZEROS = ("shifted", "uniform", "special values")  # the variants that would make a zero value non-zero
SPECIAL_SHARE = 8  # one value in this many is made special
# the floating-point dtypes redrawn (float8 and the like have no arithmetic for it: left as get_inputs() made them)
VARIED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# The variants a timed call may take (supervisor.timing.Timer.timed_variant): not special values, whose subnormals slow
# the CPU's arithmetic for whichever side does not flush them to zero (a timing difference that is not the kernel's).
TIMED_VARIANTS = ("scaled up", "shifted", "uniform", "small integers", "scaled down")
TIMED_ONE_IN = 4  # a timed call takes one of the evaluation's checked variants with probability 1/TIMED_ONE_IN
STRAY_SHARE = 100_000  # on varied inputs, one value in this many (one at least) may lie outside the tolerance ...
STRAY_WIDEN = 2.0  # ... within this many times it (strays)
# Redrawing takes up to 1.7 times an input set's bytes more in the supervisor (_vary_tensor): in a time phase (device
# memory planned without it: judge/footprint.py) only for input sets up to this size
TIMED_MAX_BYTES = 1 << 30


class Variants:
    """The distributions one evaluation's trials take: the first trial always the problem's own, then each variant in
    turn (cycling when there are more trials); a dropped one is not taken again and the next trial takes the one after
    it. With ``--inputs standard`` every trial is standard."""

    def __init__(self, inputs: str):
        self.left = list(VARIANTS) if inputs == "varied" else []
        self.turn = 0
        self.checked: list[str] = []
        self.dropped: dict[str, str] = {}  # variant: why
        self.atol_scale: dict[str, float] = {}  # variant: the largest factor its trials' atol took (atol_scale), over 1

    def for_trial(self, trial: int) -> str:
        return STANDARD if trial == 0 or not self.left else self.left[self.turn % len(self.left)]

    def passed(self, variant: str, scale: float = 1.0) -> None:
        if variant != STANDARD:
            self.checked.append(variant)
            self.turn += 1
            shown = round(max(scale, self.atol_scale.get(variant, 1.0)), 3)
            if shown > 1.0:
                self.atol_scale[variant] = shown

    def to_dict(self) -> dict[str, Any]:
        """What a result keeps (Extra.input_variants)."""
        return {"checked": self.checked, "dropped": self.dropped, **({"atol_scale": self.atol_scale} if self.atol_scale else {})}

    def drop(self, variant: str, why: str) -> None:
        self.left.remove(variant)
        self.dropped[variant] = why


def vary(values: list[Any], variant: str) -> list[Any]:
    """``values`` with each floating-point tensor (also inside lists and tuples) redrawn as ``variant`` says."""
    if variant == STANDARD:
        return values
    return [_vary_value(v, variant) for v in values]


def _vary_value(value: Any, variant: str) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_vary_value(v, variant) for v in value)
    if not isinstance(value, torch.Tensor) or value.dtype not in VARIED_DTYPES or value.numel() == 0:
        return value
    varied = _vary_tensor(value, variant)
    if variant in MOVES_ZEROS:
        varied = varied.masked_fill_(value == 0, 0.0)  # the problem's structure kept: its zeros stay zeros
    return varied.to(value.dtype)


def _vary_tensor(x: torch.Tensor, variant: str) -> torch.Tensor:
    """A new tensor of ``x``'s shape, made with at most 1.7 times ``x``'s bytes at once (measured: 1.0 scaled, 1.26
    shifted and uniform, 1.64 special values): a level-1 input set is up to 7.5 GB, and a trial redraws in a phase other
    judges share. Five copies at once ran the H200 out of memory for level 1's 37_FrobeniusNorm_ (2026-11-29)."""
    if variant == "scaled up":
        return x * 8
    if variant == "scaled down":
        return x / 8
    if variant == "uniform":  # in float32, as a draw's values would be; the caller casts back
        lo, hi = float(x.min()), float(x.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):  # a range with no width to draw from: the values as they are
            return x.clone()
        return torch.empty(x.shape, dtype=torch.float32, device=x.device).uniform_(lo, hi)
    if variant == "shifted":
        spread = float(x.std()) if x.numel() > 1 else 0.0
        return x + (spread if math.isfinite(spread) and spread > 0 else 1.0)
    if variant == "small integers":
        return (x * 4).round_()
    if variant == "special values":
        return _special_values(x)
    raise ValueError(f"unknown input variant {variant!r}; choose from {', '.join(VARIANTS)}")


def _special_values(x: torch.Tensor) -> torch.Tensor:
    """About one value of ``x`` in :data:`SPECIAL_SHARE` replaced by a special one, with the sign of the value it replaces
    (each special value an equal share of the replaced ones; the places and values are the supervisor's own draw)."""
    out = x.clone(memory_format=torch.contiguous_format)
    flat = out.view(-1)
    top = float(torch.maximum(flat.max(), -flat.min()))
    top = top if math.isfinite(top) and top > 0 else 1.0
    info = torch.finfo(x.dtype)
    specials = torch.tensor((0.0, 1.0, top, info.smallest_normal / 4), dtype=x.dtype, device=x.device)
    count = max(1, flat.numel() // SPECIAL_SHARE)
    places = torch.randint(flat.numel(), (count,), device=x.device)
    values = specials[torch.randint(len(specials), (count,), device=x.device)]
    flat[places] = torch.copysign(values, flat[places])
    return out


def output_size(outputs: list[torch.Tensor]) -> float:
    """The mean absolute value of the floating-point outputs' elements (0.0 without any), in chunks: a varied trial's
    ``atol`` follows it."""
    total, count = 0.0, 0
    for t in outputs:
        if not (t.is_floating_point() or t.is_complex()) or t.numel() == 0:
            continue
        flat = t.detach().reshape(-1)
        for start in range(0, flat.numel(), CHUNK):
            total += float(flat[start : start + CHUNK].abs().sum(dtype=torch.float64))
        count += flat.numel()
    return total / count if count else 0.0


def atol_scale(standard: float, varied: float) -> float:
    """How much ``atol`` grows for a varied trial whose reference outputs are ``varied`` in size, against ``standard``
    (the first trial's): their ratio, never below 1."""
    return max(1.0, varied / standard) if standard > 0 and math.isfinite(varied) else 1.0


def finite(outputs: list[torch.Tensor]) -> bool:
    """Whether every floating-point value of the reference's outputs is finite."""
    wide = (t if t.dtype in VARIED_DTYPES or t.is_complex() else t.float() for t in outputs if t.is_floating_point() or t.is_complex())
    return all(bool(torch.isfinite(t).all()) for t in wide)  # float8 has no isfinite: its values in float32


def strays(new: torch.Tensor, ref: torch.Tensor, tol: Tolerance, sealer: Sealer, seal: int) -> int | None:
    """How many values of a varied call's output lie outside ``tol`` where they are few strays of rounding: all finite
    where the reference is, all within :data:`STRAY_WIDEN` times ``tol``, at most one in :data:`STRAY_SHARE` (one at
    least); None where they are not (the output is wrong) or where the output is no longer what ``seal`` sealed at the
    call's reply (each count reads it once, digested as it is compared: compare.sealed_counts)."""
    if new.shape != ref.shape or not new.is_floating_point():
        return None
    counts = sealed_counts(new, ref, tol, sealer, seal)
    if counts is None or counts[0] or counts[1] > max(1, new.numel() // STRAY_SHARE):
        return None
    wide = sealed_counts(new, ref, tol.times(STRAY_WIDEN), sealer, seal)
    return counts[1] if wide is not None and wide[:2] == (0, 0) else None
