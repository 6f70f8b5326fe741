"""Output comparison: structure, shape, dtype, non-finite values, then tolerance."""

from __future__ import annotations

from typing import Any

import torch


def flatten(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in flatten(item)]
    if isinstance(out, dict):
        return [leaf for key in sorted(out) for leaf in flatten(out[key])]
    return [out]


def compare_outputs(new: Any, ref: Any, atol: float, rtol: float) -> tuple[bool, str, float]:
    """(ok, reason, max_abs_diff) for a candidate's output against the reference's."""
    new_leaves, ref_leaves = flatten(new), flatten(ref)
    if len(new_leaves) != len(ref_leaves):
        return False, f"output structure differs: {len(new_leaves)} values, expected {len(ref_leaves)}", float("inf")
    worst = 0.0
    for i, (n, r) in enumerate(zip(new_leaves, ref_leaves, strict=True)):
        where = f"output {i}" if len(ref_leaves) > 1 else "output"
        if not isinstance(r, torch.Tensor):
            if n != r:
                return False, f"{where}: {n!r} != expected {r!r}", float("inf")
            continue
        if not isinstance(n, torch.Tensor):
            return False, f"{where}: got {type(n).__name__}, expected a tensor", float("inf")
        if type(n) is not torch.Tensor and type(n) is not type(r):
            return False, f"{where}: a {type(n).__name__} (tensor subclass), expected a plain tensor", float("inf")
        if n.shape != r.shape:
            return False, f"{where}: shape {tuple(n.shape)}, expected {tuple(r.shape)}", float("inf")
        if n.dtype != r.dtype:
            return False, f"{where}: dtype {n.dtype}, expected {r.dtype}", float("inf")
        if n.device != r.device:
            return False, f"{where}: on {n.device}, expected {r.device}", float("inf")
        if n.numel() == 0:
            continue
        nonfinite, over, diff_max = compare_chunked(n, r, atol, rtol)
        if nonfinite:
            return False, f"{where}: {nonfinite} NaN/Inf values where the reference is finite", float("inf")
        worst = max(worst, diff_max)
        if over:
            return (
                False,
                f"{where}: {over} of {n.numel()} values outside atol={atol:g} rtol={rtol:g} (max abs diff {diff_max:.4g})",
                worst,
            )
    return True, "", worst


_CHUNK = 1 << 24  # elements compared at a time: bounded extra memory for huge outputs


def compare_chunked(n: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> tuple[int, int, float]:
    """(values non-finite where the reference is finite, values outside tolerance, max finite abs diff)."""
    a, b = n.detach().reshape(-1), r.detach().reshape(-1)
    nonfinite = over = 0
    diff_max = 0.0
    for start in range(0, a.numel(), _CHUNK):
        x, y = a[start : start + _CHUNK].double(), b[start : start + _CHUNK].double()
        nonfinite += int((~torch.isfinite(x) & torch.isfinite(y)).sum())
        diff = (x - y).abs()
        finite = torch.isfinite(diff)
        if bool(finite.any()):
            diff_max = max(diff_max, float(diff[finite].max()))
        over += int((~torch.isclose(x, y, atol=atol, rtol=rtol, equal_nan=True)).sum())
    return nonfinite, over, diff_max


def shares_memory(out: Any, inputs: list[Any]) -> bool:
    ptrs = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
    return any(
        isinstance(t, torch.Tensor) and t.numel() and t.untyped_storage().data_ptr() in ptrs for t in flatten(out)
    )
