"""The problems a service judges: ``level/id`` looked up in the served data, each level loaded once."""

from __future__ import annotations

import threading

from kbagent.serve.schema import BadRequest, ProblemRef
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.problems import Problem, Subset, parse_levels, select_problems

CLIENT_ORIGIN = "request"  # a Problem's origin when a client sent its code (problem_code): judged with problem_sandbox


class Catalog:
    """``levels``: the levels served (None: any level the data has); ``subset`` narrows them."""

    def __init__(self, levels: list[str] | None, datasets: list[str], subset: Subset | None):
        self.levels = levels
        self.datasets = datasets
        self.subset = subset
        self._loaded: dict[str, list[Problem]] = {}
        self._lock = threading.Lock()

    def preload(self) -> int:
        """Load every served level now (a bad level, dataset or subset stops the start); how many problems."""
        if self.levels is None:
            return 0
        problems = select_problems(self.levels, None, self.datasets, subset=self.subset)
        for level in self.levels:
            self._loaded[level] = [p for p in problems if p.level == level]
        return len(problems)

    def level(self, level: str) -> list[Problem]:
        """The served problems of one level; a 404 names why there are none."""
        if self.levels is not None and level not in self.levels:
            raise BadRequest(f"level {level} is not served here (served: {', '.join(self.levels)})", status=404)
        with self._lock:
            if level not in self._loaded:
                try:
                    parse_levels(level)
                    problems = select_problems([level], None, self.datasets)
                except KernelBenchUsageError as exc:
                    raise BadRequest(str(exc), status=404) from None
                self._loaded[level] = [p for p in problems if self.subset is None or self.subset.selects(p)]
            return self._loaded[level]

    def resolve(self, ref: ProblemRef) -> Problem:
        if ref.source:
            return Problem("file", 0, ref.name, ref.source, CLIENT_ORIGIN)
        problems = self.level(ref.level)
        for problem in problems:
            if problem.problem_id == ref.problem_id:
                return problem
        served = "the served subset of " if self.subset is not None else ""
        ids = ", ".join(str(p.problem_id) for p in problems[:40]) + (" ..." if len(problems) > 40 else "")
        raise BadRequest(f"problem {ref.label}: {served}level {ref.level} has no such problem; its ids: {ids or 'none'}", status=404)

    def listing(self, level: str | None) -> list[dict[str, object]]:
        levels = [level] if level else (self.levels or [])
        if not levels:
            raise BadRequest("this service serves any level: ask for one, e.g. /v1/problems?level=1")
        return [{"problem": f"{p.level}/{p.problem_id}", "name": p.name, "level": p.level, "problem_id": p.problem_id}
                for lv in levels for p in self.level(lv)]  # fmt: skip
