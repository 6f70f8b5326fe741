"""Hooks other plugins implement to take part in a KernelBench run (``kbagent`` supplies candidates)."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_kernelbench_candidate(problem, session, request):
    """Return the :class:`~pytest_kernelbench.candidates.Candidate` to judge for ``problem``, or None.

    ``session`` is the run's ``KernelBenchSession`` (eval config, solutions folder) and
    ``request`` the item's fixture request. The first non-None answer wins; with none,
    the candidate comes from ``--solutions``. kbagent implements this to run an agent
    search per item when ``--model`` is given.
    """
