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
        n64, r64 = n.detach().double(), r.detach().double()
        bad_new = ~torch.isfinite(n64) & torch.isfinite(r64)
        if bool(bad_new.any()):
            return False, f"{where}: {int(bad_new.sum())} NaN/Inf values where the reference is finite", float("inf")
        diff = (n64 - r64).abs()
        diff = torch.where(torch.isfinite(diff), diff, torch.zeros_like(diff))
        worst = max(worst, float(diff.max()))
        if not torch.allclose(n64, r64, atol=atol, rtol=rtol, equal_nan=True):
            over = int((~torch.isclose(n64, r64, atol=atol, rtol=rtol, equal_nan=True)).sum())
            return (
                False,
                f"{where}: {over} of {n.numel()} values outside atol={atol:g} rtol={rtol:g} (max abs diff {float(diff.max()):.4g})",
                worst,
            )
    return True, "", worst


def shares_memory(out: Any, inputs: list[Any]) -> bool:
    ptrs = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
    return any(
        isinstance(t, torch.Tensor) and t.numel() and t.untyped_storage().data_ptr() in ptrs for t in flatten(out)
    )
