"""``--shard I/N``: the deterministic split of a run's items (problems, or ops) over N runs."""

from __future__ import annotations

from typing import TypeVar

from ..errors import KernelBenchUsageError

T = TypeVar("T")


def shard(problems: list[T], spec: str | None) -> list[T]:
    """``I/N``: every N-th problem starting at the I-th, in the stable problem order (level, id)."""
    if not spec:
        return problems
    index, _, count = spec.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not (n >= 1 and 1 <= i <= n):
        raise KernelBenchUsageError(f"--shard {spec}: expected I/N with 1 <= I <= N, e.g. --shard 2/4")
    return problems[i - 1 :: n]
