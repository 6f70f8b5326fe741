"""What the plugin keeps for a run, in one module every side of the plugin may import (no import cycles)."""

from __future__ import annotations

import dataclasses

import pytest

from ..config import EvalConfig
from ..problems import Problem
from ..result import EvalResult


@dataclasses.dataclass
class KernelBenchSession:
    problems: list[Problem]
    solutions: str
    eval_config: EvalConfig
    min_speedup: float


session_key = pytest.StashKey[KernelBenchSession]()
result_key = pytest.StashKey[EvalResult]()
