"""How close a candidate's output must be to the reference's: ``atol`` and ``rtol`` by the output's dtype.

``--tolerance`` names a project's rule or gives numbers:

- ``kernelbench``: KernelBench's ``get_tolerance_for_precision``: 1e-4 for float32 (and float64), 1e-2 for
  float16 and bfloat16, atol and rtol alike;
- ``pike``: PIKE's evaluator, 1e-2 for every dtype;
- ``backendbench``: BackendBench's ``allclose``, 1e-2 for every dtype;
- ``ATOL[,RTOL]``: these numbers for every dtype (RTOL defaults to ATOL).

Unset, the problem's level picks (:func:`pytest_kernelbench.config.default_tolerance`); ``--atol``/``--rtol`` then replace one of the
two for every dtype. A complex output is held to its parts' dtype (complex64: float32's); integer and bool
outputs are compared exactly whatever the tolerance (``torch.testing.assert_close`` does the same).

No torch here: dtypes are named as torch prints them without ``torch.`` (``float32``, ``bfloat16``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .errors import KernelBenchUsageError

OTHER = "other"  # the row of floating dtypes a rule does not name (float8 kinds)
FLOATS = ("float32", "float64", "float16", "bfloat16")  # the dtypes a report lists
# a complex dtype is held to its parts' dtype
_PARTS = {"complex32": "float16", "chalf": "float16", "complex64": "float32", "cfloat": "float32", "complex128": "float64",
          "cdouble": "float64"}  # fmt: skip


def _uniform(value: float) -> dict[str, tuple[float, float]]:
    return {OTHER: (value, value)}


PRESETS: dict[str, dict[str, tuple[float, float]]] = {
    "kernelbench": {"float32": (1e-4, 1e-4), "float64": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
                    OTHER: (1e-2, 1e-2)},  # fmt: skip
    "pike": _uniform(1e-2),
    "backendbench": _uniform(1e-2),
}


TF32_REL = 1e-3  # TF32's rounding (10 mantissa bits), relative: what a cuDNN convolution in PyTorch's default mode is off by


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """One rule: ``(atol, rtol)`` for each named dtype and for the others (:data:`OTHER`)."""

    name: str  # a preset's name, or the numbers as given ("1e-3,1e-5")
    rows: tuple[tuple[str, float, float], ...]  # (dtype, atol, rtol), OTHER among them
    overridden: str = ""  # "--atol 0.001" and/or "--rtol ...": what replaced the rule's numbers

    def at(self, dtype: Any) -> tuple[float, float]:
        """(atol, rtol) for an output of ``dtype`` (a torch dtype or its name); a complex one's parts' dtype."""
        key = str(dtype).removeprefix("torch.")
        key = _PARTS.get(key, key)
        table = {d: (a, r) for d, a, r in self.rows}
        return table.get(key, table[OTHER])

    @property
    def wants_ieee_float32(self) -> bool:
        """Whether float32 is held closer than TF32 computes (about 1e-3 relative: KernelBench's 1e-4): then both runners
        compute float32 convolutions and matmuls at full precision (``Setup.ieee_float32``), or the reference itself
        would sit outside the tolerance it holds the candidate to."""
        return min(self.at("float32")) < TF32_REL

    @property
    def label(self) -> str:
        """What a report shows: ``kernelbench``, ``1e-3,1e-5``, ``kernelbench --atol 0.001``."""
        return f"{self.name} {self.overridden}" if self.overridden else self.name

    def describe(self) -> str:
        """In words, dtypes of equal numbers together: ``atol=rtol=0.0001 for float32 and float64 outputs, ...``."""
        groups: dict[tuple[float, float], list[str]] = {}
        for dtype, atol, rtol in self.rows:
            groups.setdefault((atol, rtol), []).append(dtype)
        if len(groups) == 1:
            return _pair(*next(iter(groups)))
        parts = []
        for (atol, rtol), dtypes in groups.items():
            names = [d if d != OTHER else "other floating" for d in dtypes]
            where = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            parts.append(f"{_pair(atol, rtol)} for {where} outputs")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """For a result or report: the label and ``[atol, rtol]`` of each floating dtype, and of the others (:data:`OTHER`)."""
        return {"name": self.label, **{dtype: list(self.at(dtype)) for dtype in (*FLOATS, OTHER)}}

    def atol_times(self, factor: float) -> Tolerance:
        """This rule with every ``atol`` ``factor`` times as large (a varied input trial's: judge/distributions.py)."""
        if factor == 1.0:
            return self
        return dataclasses.replace(self, rows=tuple((d, a * factor, r) for d, a, r in self.rows))

    def times(self, factor: float) -> Tolerance:
        """This rule with every ``atol`` and ``rtol`` ``factor`` times as large (judge/distributions.py's strays)."""
        return dataclasses.replace(self, rows=tuple((d, a * factor, r * factor) for d, a, r in self.rows))

    def replaced(self, atol: float | None, rtol: float | None) -> Tolerance:
        """This rule with ``atol`` and/or ``rtol`` (when not None) for every dtype."""
        if atol is None and rtol is None:
            return self
        rows = tuple((d, a if atol is None else atol, r if rtol is None else rtol) for d, a, r in self.rows)
        said = " ".join(f"--{k} {v:g}" for k, v in (("atol", atol), ("rtol", rtol)) if v is not None)
        return Tolerance(self.name, rows, said)


def _pair(atol: float, rtol: float) -> str:
    return f"atol=rtol={atol:g}" if atol == rtol else f"atol={atol:g} and rtol={rtol:g}"


def check_number(flag: str, value: float) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise KernelBenchUsageError(f"{flag} {value}: give a finite number of at least 0 (e.g. 1e-2)")
    return float(value)


def parse(spec: str) -> Tolerance:
    """``kernelbench``, ``pike``, ``backendbench`` or ``ATOL[,RTOL]``; a usage error naming the choices otherwise."""
    key = spec.strip().lower()
    if key in PRESETS:
        return Tolerance(key, tuple((d, a, r) for d, (a, r) in PRESETS[key].items()))
    numbers = key.split(",")
    try:
        values = [float(n) for n in numbers]
    except ValueError:
        values = []
    if not 1 <= len(values) <= 2 or not all(math.isfinite(v) and v >= 0 for v in values):
        raise KernelBenchUsageError(f"--tolerance {spec}: choose {', '.join(PRESETS)}, or ATOL[,RTOL] (numbers of at least 0, "
                                    "e.g. 1e-3 or 1e-3,1e-5)")  # fmt: skip
    atol, rtol = values[0], values[-1]
    return Tolerance(spec.strip(), ((OTHER, atol, rtol),))

