"""``--kb-strict``: which traced ATen operators count as PyTorch doing the work.

The runner traces one call of ``ModelNew.forward`` with torch.profiler on every thread
(``Trace``); custom kernels (``load_inline`` extensions, Triton launches) do not go through the
ATen dispatcher, so what shows up is the PyTorch work a candidate still does. Anything outside the
allocation, view and metadata operators below is compute.

The trace is made in the candidate's own process: it holds for a candidate that falls back to
PyTorch by accident or by design, not for one that subverts the tracer (docs/judge.md).
"""

from __future__ import annotations

# Operators that allocate, copy, or reinterpret memory without computing anything new.
NON_COMPUTE = frozenset(
    {
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
        "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_", "zero_",
        "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "permute", "transpose", "t",
        "squeeze", "unsqueeze", "flatten", "unflatten", "select", "slice", "narrow", "split", "split_with_sizes",
        "chunk", "unbind", "alias", "detach", "contiguous", "clone", "copy_", "_to_copy", "to", "lift_fresh",
        "resize_", "set_", "is_same_size", "size", "stride", "numel", "sym_size", "sym_stride", "sym_numel",
        "_local_scalar_dense", "item", "arange", "resolve_conj", "resolve_neg", "view_as", "expand_as",
        "record_stream", "_has_compatible_shallow_copy_type", "is_nonzero", "result_type",
    }
)


def compute_ops(counts: dict[str, int]) -> dict[str, int]:
    return {op: n for op, n in counts.items() if op.removeprefix("aten.") not in NON_COMPUTE}
