"""Which ATen operators a forward call dispatches, traced with a TorchDispatchMode.

Custom kernels (``load_inline`` extensions, Triton launches) do not go through the
ATen dispatcher, so what shows up here is the PyTorch work a candidate still does.
``--strict`` rejects a candidate whose forward dispatches any *compute* operator:
anything outside the allocation, view and metadata operators below.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

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
    }
)


def op_base_name(func: Any) -> str:
    """``aten.addmm.default`` -> ``addmm``."""
    return func._schema.name.split("::")[-1]


class _Recorder(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # By default torch wraps a mode's __torch_dispatch__ in torch._disable_dynamo, whose first
        # call imports torch._dynamo: ~2 s per evaluation for a recorder that never compiles.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.counts[f"aten.{op_base_name(func)}"] += 1
        return func(*args, **(kwargs or {}))


def trace_ops(fn: Callable[[], Any]) -> dict[str, int]:
    """ATen operator counts of one call of ``fn``."""
    recorder = _Recorder()
    with recorder:
        fn()
    return dict(recorder.counts.most_common())


def compute_ops(counts: dict[str, int]) -> dict[str, int]:
    return {op: n for op, n in counts.items() if op.removeprefix("aten.") not in NON_COMPUTE}
