"""Output comparison in the supervisor: non-finite values, then tolerance, chunk by chunk.

As ``torch.testing.assert_close`` compares: floating outputs within ``atol + rtol * |ref|`` (the tolerance of
their dtype, :class:`~pytest_kernelbench.tolerance.Tolerance`), complex ones by the modulus of the complex
difference (so both parts count) within their parts' dtype's tolerance, integer and bool outputs exactly
(never through a float that could overflow). NaN matches NaN and an infinity the same infinity.

Structure, shape, dtype and device were checked when the runner copied its output into the slots
(a mismatch arrives as the reply's ``mismatch``); what lands in a slot is only ever compared here.

A slot lies in memory the candidate's process also maps, so it is sealed: right after a call, the
supervisor takes a keyed digest of every slot (:class:`Sealer`); when it compares, it copies each
chunk to its own memory once and both compares and digests that copy. A candidate that writes its
answer after the call was sealed (work left running, a thread, a late kernel) changes the digest.
The key is secret to the supervisor, so no chosen content can keep the digest while changing values.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import torch

from ..tolerance import OTHER, Tolerance
from . import fused

LEGACY = 1e-2  # atol and rtol of a call that gives neither a Tolerance nor numbers (a caller not yet passing cfg.tol)

# elements sealed or compared at a time on CPU: bounded extra memory for huge outputs, and each chunk's temporaries in
# the CPU's cache. Sealing on this 2-core machine, 1M / 4M / 16M float32 values: 1.8 / 18.8 / 96 ms in chunks of 16M,
# 0.7 / 2.5 / 17 ms in chunks of 1M; comparing 16M: 157 ms -> 44 ms
_CHUNK = 1 << 20
_CHUNK_CUDA = 1 << 26  # on a GPU (a 6 GB output in 24 chunks; a few hundred MB of temporaries)


def _chunk(t: torch.Tensor) -> int:
    return _CHUNK_CUDA if t.is_cuda else _CHUNK
_MASK = (1 << 63) - 1


def flatten(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in flatten(item)]
    if isinstance(out, dict):
        return [leaf for key in sorted(out) for leaf in flatten(out[key])]
    return [out]


class Sealer:
    """A keyed digest of a tensor's bytes: the sum, in int64, of ``(w ^ k1) * k2`` over its 32-bit words
    (wrapping), with ``k1`` and ``k2`` drawn from the OS and never leaving the supervisor."""

    def __init__(self) -> None:
        self.k1 = secrets.randbits(31)
        self.k2 = secrets.randbits(30) * 2 + 1

    def words(self, t: torch.Tensor) -> torch.Tensor:
        flat = t.detach().reshape(-1)
        if flat.element_size() == 4 and flat.numel():
            return flat.view(torch.int32)
        return flat.view(torch.uint8).to(torch.int32)

    def digest_words(self, words: torch.Tensor) -> torch.Tensor:
        """A 0-d int64 tensor on the words' device, queued on the current stream (:func:`digest_value` reads it)."""
        return self._mixed(words).sum(dtype=torch.int64)

    def _mixed(self, words: torch.Tensor) -> torch.Tensor:
        """``(w ^ k1) * k2`` of every 32-bit word (wrapping), what a digest sums."""
        mixed = torch.bitwise_xor(words, self.k1)
        mixed.mul_(self.k2)
        return mixed

    def take(self, t: torch.Tensor) -> torch.Tensor:
        """The digest of ``t``'s bytes as they are when the stream gets to it, not read back (no GPU sync of its
        own: the supervisor synchronises once after sealing every slot of a call). One pass for a big CUDA
        float32 tensor (:mod:`.fused`)."""
        flat = t.detach().reshape(-1)
        if t.is_cuda and fused.usable(flat):
            return fused.digest(flat, self.k1, self.k2)
        step = _chunk(flat)
        parts = [self.digest_words(self.words(flat[start : start + step])) for start in range(0, flat.numel(), step)]
        if not parts:
            return torch.zeros((), dtype=torch.int64)
        return parts[0] if len(parts) == 1 else torch.stack(parts).sum()  # int64 sums wrap, as the chunks' do

    def take_many(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each tensor's digest, as :meth:`take` gives it, with one pass for each group of tensors of one dtype, device
        and size that fits a chunk (a timing round's outputs): a few launches for a round instead of three a tensor,
        inside the round's wall window."""
        digests: list[torch.Tensor | None] = [None] * len(tensors)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, t in enumerate(tensors):
            flat = t.detach().reshape(-1)
            if 0 < flat.numel() <= _chunk(flat) and t.is_contiguous() and not (t.is_cuda and fused.usable(flat)):
                groups.setdefault((t.dtype, t.device, flat.numel()), []).append(i)
            else:
                digests[i] = self.take(t)
        for members in groups.values():
            if len(members) == 1:
                digests[members[0]] = self.take(tensors[members[0]])
                continue
            sums = self.digest_rows(torch.stack([self.words(tensors[i]) for i in members]))
            for row, i in enumerate(members):
                digests[i] = sums[row]
        return digests  # type: ignore[return-value]

    def digest_rows(self, words: torch.Tensor) -> torch.Tensor:
        """:meth:`digest_words` of each row of a 2-d int32 tensor: a 1-d int64 tensor, queued on the current stream."""
        return self._mixed(words).sum(dim=1, dtype=torch.int64)

    def seal(self, t: torch.Tensor) -> int:
        return digest_value(self.take(t))


def digest_value(digest: torch.Tensor) -> int:
    """A digest as a number (modulo 2**63, so that chunk sums add the same however they are grouped)."""
    return int(digest) & _MASK


def as_tolerance(tol: Tolerance | float | None, rtol: float | None = None) -> Tolerance:
    """A :class:`Tolerance` as given, or ``atol`` and ``rtol`` numbers as one for every dtype (the supervisor's
    ``self.cfg.atol, self.cfg.rtol``: None where unset, meaning :data:`LEGACY`, until its calls pass ``self.cfg.tol``)."""
    if isinstance(tol, Tolerance):
        return tol
    atol = LEGACY if tol is None else float(tol)
    return Tolerance("atol/rtol", ((OTHER, atol, LEGACY if rtol is None else float(rtol)),))


def exact(dtype: torch.dtype) -> bool:
    """Whether outputs of ``dtype`` are compared exactly: integers and bools (no tolerance applies)."""
    return not (dtype.is_floating_point or dtype.is_complex)


def compare_tensors(new: torch.Tensor, ref: torch.Tensor, tol: Tolerance | float | None, rtol: float | None = None,
                    sealer: Sealer | None = None, seal: int | None = None) -> tuple[str, float]:  # fmt: skip
    """('' or why not, max abs diff) for one output leaf, within ``tol``'s tolerance for the reference's dtype (a
    Tolerance; numbers: :func:`as_tolerance`); with ``seal``, also that ``new`` is what was sealed. A big CUDA float32
    output is first compared in one pass (:mod:`.fused`); what that pass cannot call close (a non-finite or
    out-of-tolerance difference) is compared again below, chunk by chunk."""
    atol, rtol = as_tolerance(tol, rtol).at(ref.dtype)
    a, b = new.detach().reshape(-1), ref.detach().reshape(-1)
    if a.is_cuda and a.dtype == b.dtype == torch.float32 and a.numel() == b.numel() and fused.usable(a):
        keys = (sealer.k1, sealer.k2) if sealer is not None else (0, 1)
        digest, worst, slack, bad = fused.compare(a, b, *keys, rtol)
        if sealer is not None and seal is not None and digest_value(digest) != seal:
            return "the output changed after the call returned (work still running when the call was over?)", math.inf
        if not bad and slack <= atol:
            return "", worst
    counts = _counts(a, b, atol, rtol, sealer, seal)
    if counts is None:
        return "the output changed after the call returned (work still running when the call was over?)", math.inf
    nonfinite, over, diff_max = counts
    if nonfinite:
        return f"{nonfinite} NaN/Inf values where the reference is finite", math.inf
    if over and exact(b.dtype):
        return f"{over} of {a.numel()} values differ ({b.dtype} outputs are compared exactly; max abs diff {diff_max:.4g})", diff_max
    if over:
        return f"{over} of {a.numel()} values outside atol={atol:g} rtol={rtol:g} (max abs diff {diff_max:.4g})", diff_max
    return "", diff_max


def close_together(groups: list[tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]],
                   unchanged: list[tuple[list[torch.Tensor], list[torch.Tensor]]], tol: Tolerance, sealer: Sealer) -> bool:
    """Whether the checked calls of a timing round are all right, told with one read of each slot and one sync: each
    group (one output leaf of every call: the candidate's slots, the reference's, and the digests sealed at the
    candidate's replies) is what was sealed and within ``tol`` everywhere, as :func:`compare_tensors` would find, and
    each input of every call is as it was given (``unchanged``: one input of every call, as the candidate's runner left
    it and as it was given). False where any of it is not, or a group cannot be taken together (other
    shapes or dtypes in one group, an exact or complex dtype, more than a chunk): the caller then checks each call alone,
    which says why (a round of 64 small calls compared one by one took as long as the calls, H200)."""
    flags: list[torch.Tensor] = []
    for news, refs, seals in groups:
        group = _group_flags(news, refs, seals, tol, sealer)
        if group is None:
            return False
        flags.append(group)
    for after, before in unchanged:
        first = before[0]
        if any(t.shape != first.shape or t.dtype != first.dtype or t.device != first.device for t in (*after, *before)):
            return False
        flags.append(torch.eq(torch.stack(after), torch.stack(before)).all().reshape(1))
    if not flags or len({f.device for f in flags}) != 1:
        return False
    return bool(torch.cat(flags).all())


def _group_flags(news: list[torch.Tensor], refs: list[torch.Tensor], seals: list[torch.Tensor], tol: Tolerance,
                 sealer: Sealer) -> torch.Tensor | None:  # fmt: skip
    """One output leaf of every checked call of a round, stacked: whether each is what its digest sealed, every difference
    finite and within ``atol + rtol * |ref|`` (a 1-d bool tensor, not read); None where they cannot be stacked."""
    first = refs[0]
    same = all(t.dtype == first.dtype and t.shape == first.shape and t.device == first.device for t in (*news, *refs))
    if not same or not first.dtype.is_floating_point or not first.numel() or first.numel() * len(refs) > _chunk(first):
        return None
    if len(seals) != len(news) or any(s.device != first.device for s in seals):
        return None
    atol, rtol = tol.at(first.dtype)
    x = torch.stack([n.detach().reshape(-1) for n in news])  # one read of every slot: compared and digested alike
    y = torch.stack([r.detach().reshape(-1) for r in refs])
    words = sealer.words(x).reshape(len(news), -1)  # each row's words, as each slot's were sealed
    sealed = (sealer.digest_rows(words) & _MASK) == (torch.stack(seals).reshape(-1) & _MASK)
    worst, slack = _worst_and_slack(*_widened(x, y), rtol, dim=1)
    return torch.cat([sealed, torch.isfinite(worst), slack <= atol])


def _compare_chunk(x: torch.Tensor, y: torch.Tensor, atol: float, rtol: float) -> tuple[int, int, float]:
    """(values non-finite where the reference is finite, values outside tolerance, max finite abs diff) of one chunk."""
    if exact(y.dtype):
        return _compare_exact(x, y)
    return _compare_close(*_widened(x, y), atol, rtol)


def _widened(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both in float32 for float32 and narrower floats (upcast), complex64 for complex64 and narrower; float64 and
    complex128 as they are. A complex tensor stays complex: both its parts are compared."""
    if y.dtype.is_complex:
        wide = torch.complex128 if y.dtype == torch.complex128 else torch.complex64
    else:
        wide = torch.float64 if y.dtype == torch.float64 else torch.float32
    return x.to(wide), y.to(wide)


def _compare_close(x: torch.Tensor, y: torch.Tensor, atol: float, rtol: float) -> tuple[int, int, float]:
    """First the common case in few passes over memory (a level-1 output is 6 GB): when every difference is finite
    and within ``atol + rtol * |ref|``, that is the answer. Otherwise the exact counts below. ``|.|`` of a complex
    difference is its modulus (``torch.isclose``'s rule)."""
    if x.numel():
        worst, slack = _worst_and_slack(x, y, rtol)
        fine, worst = torch.stack([slack <= atol, torch.isfinite(worst)]).all().item(), float(worst)
        if fine:
            return 0, 0, worst
    nonfinite = int((~torch.isfinite(x) & torch.isfinite(y)).sum())
    diff = (x - y).abs()
    diff_max = float(torch.nan_to_num(diff, nan=0.0, posinf=0.0).max()) if diff.numel() else 0.0
    over = int((~torch.isclose(x, y, atol=atol, rtol=rtol, equal_nan=True)).sum())
    return nonfinite, over, diff_max


def _worst_and_slack(x: torch.Tensor, y: torch.Tensor, rtol: float, dim: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The largest ``|x - y|`` (NaN where any difference is: NaN or infinite values on either side) and the largest
    ``|x - y| - rtol * |y|``, over all values or along ``dim``, not read: the values are close where both are finite and
    the second is within ``atol``."""
    diff = torch.sub(x, y).abs()
    worst = diff.max() if dim is None else diff.amax(dim=dim)
    diff.sub_(y.abs(), alpha=rtol)
    return worst, diff.max() if dim is None else diff.amax(dim=dim)


def _compare_exact(x: torch.Tensor, y: torch.Tensor) -> tuple[int, int, float]:
    """Integers and bools: equal or not (no arithmetic in their own dtype, which could wrap); the max abs diff in float64,
    at least 1 (two integers that differ by less than a double's step look equal there)."""
    differ = torch.ne(x, y)
    over = int(differ.sum())
    if not over:
        return 0, 0, 0.0
    if y.dtype == torch.bool:
        return 0, over, 1.0
    return 0, over, max(1.0, float((x[differ].to(torch.float64) - y[differ].to(torch.float64)).abs().max()))


def compare_chunked(n: torch.Tensor, r: torch.Tensor, tol: Tolerance | float | None, rtol: float | None = None) -> tuple[int, int, float]:
    """(values non-finite where the reference is finite, values outside tolerance, max finite abs diff), within ``tol``'s
    tolerance for ``r``'s dtype (:func:`compare_tensors`)."""
    atol, rtol = as_tolerance(tol, rtol).at(r.dtype)
    counts = _counts(n.detach().reshape(-1), r.detach().reshape(-1), atol, rtol)
    assert counts is not None  # no seal to differ from
    return counts


def sealed_counts(n: torch.Tensor, r: torch.Tensor, tol: Tolerance, sealer: Sealer, seal: int) -> tuple[int, int, float] | None:
    """:func:`compare_chunked`'s counts of ``n`` as it was sealed (``seal``: the digest of the call's output at its
    reply), or None where ``n`` no longer is: the values counted are the values sealed, read once."""
    atol, rtol = tol.at(r.dtype)
    return _counts(n.detach().reshape(-1), r.detach().reshape(-1), atol, rtol, sealer, seal)


def _counts(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float, sealer: Sealer | None = None,
            seal: int | None = None) -> tuple[int, int, float] | None:  # fmt: skip
    """(non-finite, outside tolerance, max finite abs diff) of flat ``a`` against flat ``b``, chunk by chunk; with a
    ``sealer``, each chunk read once (compared and digested alike) and None where ``a`` is not what ``seal`` sealed."""
    nonfinite = over = 0
    diff_max = 0.0
    digest = 0
    step = _chunk(a)
    for start in range(0, a.numel(), step):
        x = a[start : start + step]
        if sealer is not None:
            x = x.clone()  # one read of the shared slot: compared and digested alike
            digest = (digest + digest_value(sealer.digest_words(sealer.words(x)))) & _MASK
        nf, ov, dm = _compare_chunk(x, b[start : start + step], atol, rtol)
        nonfinite, over, diff_max = nonfinite + nf, over + ov, max(diff_max, dm)
    if sealer is not None and seal is not None and digest != seal:
        return None
    return int(nonfinite), int(over), float(diff_max)


def values_equal(new: Any, ref: Any, tol: Tolerance | float | None, rtol: float | None = None) -> bool:
    """A non-tensor output leaf as the runner sent it (JSON: numbers, strings, bools, None; lists and dicts only from a
    runner that does not follow the protocol): floats within ``tol``'s float64 tolerance (Python floats are doubles),
    ints and bools exactly (a bool equals only a bool), numbers too big for a float exactly, sequences and dicts item by
    item, anything else by ``==``. Never raises for what a candidate could send."""
    atol, rtol = as_tolerance(tol, rtol).at("float64")
    return _equal(new, ref, atol, rtol, depth=0)


_MAX_DEPTH = 64  # deeper nesting than any output has: not equal (and no recursion limit reached on a forged reply)


def _equal(new: Any, ref: Any, atol: float, rtol: float, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(ref, bool) or isinstance(new, bool):
        return type(new) is type(ref) and new == ref
    if isinstance(ref, (list, tuple)) or isinstance(new, (list, tuple)):
        return (isinstance(new, (list, tuple)) and isinstance(ref, (list, tuple)) and len(new) == len(ref)
                and all(_equal(a, b, atol, rtol, depth + 1) for a, b in zip(new, ref, strict=True)))  # fmt: skip
    if isinstance(ref, dict) or isinstance(new, dict):
        return (isinstance(new, dict) and isinstance(ref, dict) and new.keys() == ref.keys()
                and all(_equal(new[k], ref[k], atol, rtol, depth + 1) for k in ref))  # fmt: skip
    if not isinstance(ref, (int, float)) or not isinstance(new, (int, float)):
        return type(new) is type(ref) and new == ref
    if isinstance(ref, int) and isinstance(new, int):
        return new == ref
    try:
        a, b = float(new), float(ref)
    except OverflowError:  # an int beyond a double's range: equal only to itself (Python compares int and float exactly)
        return new == ref
    return abs(a - b) <= atol + rtol * abs(b)
