"""Fitting pytest-benchmark: device-measured samples go into its stats, GPU facts into its machine info.

Its table, ``--benchmark-json``, ``--benchmark-autosave`` and ``--benchmark-compare``
then show the candidate's device time (CUDA events on GPU), not host time around
a subprocess. Registered only when pytest-benchmark is active.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..result import EvalResult

MODE = "pytest-kernelbench (device samples)"


# pytest-benchmark's table shows ten columns by default (about 230 characters a row); a kernelbench run shows these,
# unless --benchmark-columns says otherwise
COLUMNS = ["min", "median", "iqr", "rounds"]


def narrow_table(config: pytest.Config) -> None:
    """Before pytest-benchmark reads its options (its pytest_configure runs last): our columns, where none were asked for."""
    if getattr(config.option, "benchmark_columns", "") is None:
        config.option.benchmark_columns = list(COLUMNS)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    from ..report.writer import environment
    from .session import session_key

    session = config.stash.get(session_key, None)
    if session is not None:
        machine_info["kernelbench"] = environment(session.eval_config.device_label)


def record(benchmark: Any, result: EvalResult) -> None:
    """Feed the candidate's timing samples (ms) into pytest-benchmark's fixture as seconds.

    pytest-benchmark has no public call for externally measured samples; we use the
    fixture's own stats factory, as its ``pedantic`` mode does internally.
    """
    benchmark._mode = MODE  # marks the fixture as used (no "fixture not used" warning)
    if benchmark.disabled or not result.correct or result.new is None:
        return
    benchmark.extra_info.update(
        {
            "kb_outcome": result.outcome.value,
            "kb_speedup": result.speedup,
            "kb_ref_median_ms": result.ref_ms,
            "kb_new_median_ms": result.new_ms,
            "kb_device": result.device_name or result.device,
            "kb_mode": result.mode,
            "kb_source_hash": result.source_hash,
        }
    )
    stats = benchmark._make_stats(1)
    for ms in result.new.samples:
        stats.update(ms / 1e3)
