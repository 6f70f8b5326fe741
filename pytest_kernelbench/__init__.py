"""pytest-kernelbench: KernelBench problems as pytest items, and a judge for ModelNew candidates.

The data flow: problem -> candidate source -> isolated evaluation -> result -> report.

The names below load on first use, so that ``python -m pytest_kernelbench.judge.runner`` (the
process that imports candidate code) imports nothing of this package but the judge's protocol.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Candidate": "candidates", "find_candidate": "candidates", "EvalConfig": "config", "evaluate": "judge.controller",
    "Outcome": "outcome", "Problem": "problems", "EvalResult": "result", "TimingStats": "result",
}  # fmt: skip
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pytest_kernelbench' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
