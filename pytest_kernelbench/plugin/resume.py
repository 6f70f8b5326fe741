"""Interrupted runs: which selected items have no result yet, and ``--kb-resume``, which judges only those.

The report (``--kb-report``) lists the selected items that never ran (``pending``); ``--kb-resume`` reads it back,
keeps its results and deselects their items, in every process that collects (xdist workers too), so the same
command judges what is left. The earlier run's options must be this run's: results judged otherwise are not mixed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ..errors import KernelBenchUsageError
from ..report.writer import ReportError, ReportWriter, load_report
from ..result import EvalResult

_KERNEL_ITEM = re.compile(r"::test_kernel\[(.+)\]$")


def add_option(group: Any) -> None:
    group.addoption(
        "--kb-resume",
        dest="kb_resume",
        action="store_true",
        help="judge only the items that have no result in the --kb-report of an earlier run with the same options; keep its results",
    )


def item_id(nodeid: str) -> str | None:
    """``L1-19_ReLU`` for a node id of one of the kernel items, else None."""
    found = _KERNEL_ITEM.search(nodeid)
    return found.group(1) if found else None


def check_writable(writer: ReportWriter, flag: str = "--kb-report") -> None:
    """Write the report now (empty, or with the results kept), so that a path that cannot be written is said before any work."""
    try:
        writer.write()
    except OSError as exc:
        raise KernelBenchUsageError(f"{flag} {writer.path}: cannot write it ({exc.strerror or exc}); pass a writable path") from None


def earlier_results(config: pytest.Config, options: dict[str, Any]) -> list[EvalResult]:
    """``--kb-resume``: the results in ``--kb-report``, written with ``options``; [] without ``--kb-resume``."""
    path = config.getoption("kb_report")
    if not config.getoption("kb_resume", False):
        _not_unfinished(path)
        return []
    if not path:
        raise KernelBenchUsageError("--kb-resume needs --kb-report PATH: the report of the run to resume")
    if not Path(path).is_file():
        raise KernelBenchUsageError(f"--kb-resume: no report at {path} to resume; run without --kb-resume to start one")
    try:
        data, results = load_report(path)
    except ReportError as exc:
        raise KernelBenchUsageError(f"--kb-resume: {exc}") from None
    before, now = data.get("options", {}), json.loads(json.dumps(options))
    keys = sorted(set(before) | set(now))
    changed = [f"{key} {_said(before.get(key))} -> {_said(now.get(key))}" for key in keys if before.get(key) != now.get(key)]
    if changed:
        raise KernelBenchUsageError(f"--kb-resume: {path} was written with other options ({'; '.join(changed[:4])}); "
                                    "give that run's options, or another --kb-report")  # fmt: skip
    return results


def _said(value: Any) -> str:
    return "unset" if value is None else repr(value)


def _not_unfinished(path: str | None) -> None:
    """A report of a run that stopped with items left is not overwritten by a new run unasked."""
    try:
        data, results = load_report(path) if path and Path(path).is_file() else ({}, [])
    except ReportError:
        return
    if data.get("pending") and not data.get("finished"):
        raise KernelBenchUsageError(f"--kb-report {path}: the report of a run that stopped with {len(data['pending'])} items left "
                                    f"({len(results)} results); --kb-resume judges those and keeps the rest, or remove it to "
                                    "start over")  # fmt: skip


def deselect_judged(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--kb-resume``: leave out the items that have a result in the report."""
    if not config.getoption("kb_resume", False) or not config.getoption("kb_report"):
        return
    try:
        _, results = load_report(config.getoption("kb_report"))
    except ReportError:
        return  # the controller said why at configure
    judged = {r.problem for r in results}
    gone = [item for item in items if item_id(item.nodeid) in judged]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [item for item in items if item_id(item.nodeid) not in judged]


def record(writer: ReportWriter, report: pytest.TestReport) -> None:
    """What an item's report says for the run's report: a result (added by the caller), a skip, or an error."""
    item = item_id(report.nodeid)
    if item is None or getattr(report, "kb_result", None):
        return
    if report.skipped and report.when in ("setup", "call"):
        longrepr = report.longrepr
        writer.skip(item, str(longrepr[2] if isinstance(longrepr, tuple) else longrepr).removeprefix("Skipped: "))
    elif report.failed:
        writer.error(item)


def summary_lines(writer: ReportWriter) -> list[str]:
    """Lines for the end of a run that left items without a result: how many, and how to judge only those."""
    pending = writer.pending
    if not pending:
        return []
    named = ", ".join(pending[:5]) + (" ..." if len(pending) > 5 else "")
    head = f"kernelbench: {len(pending)} of {len(writer.selected)} selected items have no result yet: {named}"
    if writer.path is None:
        return [head, "kernelbench: give --kb-report PATH to keep results, and --kb-resume with it to judge only what has none"]
    kept = f"keeps the {len(writer.results)} results in {writer.path}"
    return [head, f"kernelbench: the same command with --kb-resume judges only those and {kept}"]
