"""One-pass seals and comparisons of big CUDA float32 outputs, in Triton: the supervisor's side only.

:mod:`.compare` does both in PyTorch: a seal is three kernels over the output (xor, multiply, sum:
about 5 passes over memory), a comparison a copy, a digest of the copy and about 12 more passes. On
the H100 that was about 100 ms per checked call of a 6.4 GB level-1 output, most of a candidate's
timing (docs/history/performance-log.md, "Eleventh session"). The kernels here read each element once: the seal
computes the same keyed digest (the sum, in int64, of ``(w ^ k1) * k2`` over the 32-bit words, the
product wrapping in int32), and the comparison reads the slot once into registers and both digests
and compares those values, so what it compares is what it digests. It takes the common case only:
every difference finite and within ``atol + rtol * |ref|``; anything else is left to
:mod:`.compare`'s exact path, which reads the slot again.

Used where triton imports, for float32 tensors of at least :data:`MIN_ELEMENTS` on a GPU; the kernels
compile into the judge's own cache folder unless ``TRITON_CACHE_DIR`` is set (read-only to sandboxed
candidates, like the build cache; every runner gets a ``TRITON_CACHE_DIR`` of its own: sandbox.runner_env).
"""

from __future__ import annotations

import functools
import os
from typing import Any

MIN_ELEMENTS = 1 << 22  # 16 MB of float32: below this the PyTorch path is as fast and triton need not be imported
BLOCK = 4096


def _kernels() -> Any:
    """(digest, compare) Triton kernels, or None where triton is not there (never on a CPU-only judge) or
    ``KB_FUSED_COMPARE=0`` turns them off (the PyTorch path for every output). They compile into the judge's cache."""
    if os.environ.get("KB_FUSED_COMPARE", "1") == "0":
        return None
    if "TRITON_CACHE_DIR" not in os.environ:  # called for every seal: the folder is worked out once
        from ..config import default_cache_dir

        os.environ["TRITON_CACHE_DIR"] = str(default_cache_dir() / "triton-judge")
    return defined()


@functools.cache
def defined() -> Any:
    """The kernels' definitions (triton imported, nothing compiled, no device touched: a GPU judges' fork server makes
    them once for every supervisor it forks), or None where triton is not there."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    # sizes and keys vary from call to call: one compiled variant each (no specialisation on their values)
    @triton.jit(do_not_specialize=["n", "k1", "k2"])
    def digest(w_ptr, n, k1, k2, out_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        w = tl.load(w_ptr + offs, mask=mask, other=0)
        v = tl.where(mask, (w ^ k1) * k2, 0)
        tl.store(out_ptr + pid, tl.sum(v.to(tl.int64), axis=0))

    @triton.jit(do_not_specialize=["n", "k1", "k2"])
    def compare(x_ptr, y_ptr, n, k1, k2, rtol, digest_ptr, worst_ptr, slack_ptr, bad_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)  # the slot, read once
        y = tl.load(y_ptr + offs, mask=mask, other=0.0)
        w = x.to(tl.int32, bitcast=True)
        v = tl.where(mask, (w ^ k1) * k2, 0)
        tl.store(digest_ptr + pid, tl.sum(v.to(tl.int64), axis=0))
        d = tl.abs(x - y)
        finite = (d == d) & (d < float("inf"))  # NaN fails the first, an infinite difference the second
        ok = mask & finite
        tl.store(bad_ptr + pid, tl.sum(tl.where(mask, tl.where(finite, 0, 1), 0), axis=0))
        tl.store(worst_ptr + pid, tl.max(tl.where(ok, d, 0.0), axis=0))
        tl.store(slack_ptr + pid, tl.max(tl.where(ok, d - rtol * tl.abs(y), -float("inf")), axis=0))

    return digest, compare


def usable(t: Any) -> bool:
    """Whether ``t`` takes the fused path: a contiguous float32 (or 4-byte word) CUDA tensor, big enough."""
    import torch

    return (t.is_cuda and t.element_size() == 4 and t.dtype in (torch.float32, torch.int32) and t.is_contiguous()
            and t.numel() >= MIN_ELEMENTS and _kernels() is not None)  # fmt: skip


def warm(device: Any, k1: int, k2: int) -> bool:
    """Compile (or load from the cache) both kernels on a small tensor, so that a locked phase does not; False
    where triton is not there. Safe from any thread (the supervisor runs it beside the reference's set-up)."""
    import torch

    if _kernels() is None:
        return False
    with torch.cuda.device(device):  # Triton launches on the calling thread's device, which may be another thread's
        x = torch.zeros(BLOCK + 16, dtype=torch.float32, device=device)
        digest(x, k1, k2)
        compare(x, x, k1, k2, 0.01)
        torch.cuda.synchronize(device)
    return True


def _grid(n: int) -> tuple[int]:
    return (-(-n // BLOCK),)


def digest(t: Any, k1: int, k2: int) -> Any:
    """The keyed digest of ``t``'s 32-bit words as a 0-d int64 tensor, queued on the current stream."""
    import torch

    words = t.detach().reshape(-1).view(torch.int32)
    n = words.numel()
    parts = torch.empty(_grid(n)[0], dtype=torch.int64, device=t.device)
    _kernels()[0][_grid(n)](words, n, k1, k2, parts, BLOCK=BLOCK)
    return parts.sum()


def compare(new: Any, ref: Any, k1: int, k2: int, rtol: float) -> tuple[Any, float, float, int]:
    """(digest tensor, max |new - ref|, max of |new - ref| - rtol * |ref|, count of non-finite differences), the
    maxima over the finite differences; ``new`` and ``ref`` float32 of the same size, ``new`` read once."""
    import torch

    a, b = new.detach().reshape(-1), ref.detach().reshape(-1).contiguous()
    n = a.numel()
    blocks = _grid(n)[0]
    digests = torch.empty(blocks, dtype=torch.int64, device=a.device)
    worst, slack = (torch.empty(blocks, dtype=torch.float32, device=a.device) for _ in range(2))
    bad = torch.empty(blocks, dtype=torch.int32, device=a.device)
    _kernels()[1][(blocks,)](a, b, n, k1, k2, rtol, digests, worst, slack, bad, BLOCK=BLOCK)
    summary = torch.stack([worst.max().double(), slack.max().double(), bad.sum().double()]).tolist()
    return digests.sum(), summary[0], summary[1], int(summary[2])
