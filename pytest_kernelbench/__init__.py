"""pytest-kernelbench: KernelBench problems as pytest items, and a judge for ModelNew candidates.

The data flow: problem -> candidate source -> isolated evaluation -> result -> report.
"""

from .candidates import Candidate, find_candidate
from .config import EvalConfig
from .evaluate import evaluate
from .outcome import Outcome
from .problems import Problem
from .result import EvalResult, TimingStats

__all__ = ["Candidate", "EvalConfig", "EvalResult", "Outcome", "Problem", "TimingStats", "evaluate", "find_candidate"]
__version__ = "0.1.0"
