"""``kbagent compare BASE.json NEW.json``: two ``--kb-report`` runs side by side, per item; a CI gate.

Items are matched by their id (``L1-19_ReLU``). For each: both outcomes, speedups and candidate times, and the
change of the speedup (the ratio to the reference timed in the same run, so a machine that runs slower as a whole
moves it less than the times). A regression is an item correct in BASE that is not correct in NEW, or whose speedup
fell by more than the threshold; an item whose speedup is noisy in either run (``speedup_noisy``: its timing cannot
tell that speedup from its neighbours) is marked and never counted as one. With ``--fail-on-regression PCT`` the
exit code is 1 when there is a regression, else 0; bad input is 2.
"""

from __future__ import annotations

import dataclasses
import io
import math
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from pytest_kernelbench.report.summary import capped_mark, geomean_speedup, is_noisy
from pytest_kernelbench.result import EvalResult


@dataclasses.dataclass
class Row:
    item: str
    base: EvalResult | None
    new: EvalResult | None
    change_pct: float | None = None  # of the speedup, NEW against BASE
    noisy: bool = False
    regression: str = ""  # why, when it is one at the threshold

    def to_dict(self) -> dict[str, Any]:
        def side(r: EvalResult | None) -> dict[str, Any] | None:
            if r is None:
                return None
            return {"outcome": r.outcome.value, "speedup": r.speedup, "ref_ms": r.ref_ms, "new_ms": r.new_ms, "noisy": is_noisy(r)}

        return {"item": self.item, "base": side(self.base), "new": side(self.new), "speedup_change_pct": self.change_pct,
                "noisy": self.noisy, "regression": self.regression}  # fmt: skip


def compare(base: list[EvalResult], new: list[EvalResult], threshold_pct: float | None) -> list[Row]:
    """One row per item of either run, BASE's order first; regressions marked at ``threshold_pct`` (None: speedups
    are not held to any threshold, outcomes still are)."""
    before = {r.problem: r for r in base}
    after = {r.problem: r for r in new}
    rows = []
    for item in [*before, *(k for k in after if k not in before)]:
        row = Row(item, before.get(item), after.get(item))
        b, n = row.base, row.new
        row.noisy = bool((b and is_noisy(b)) or (n and is_noisy(n)))
        if b is not None and n is not None and b.correct and n.correct and _finite(b.speedup) and _finite(n.speedup):
            row.change_pct = (n.speedup / b.speedup - 1.0) * 100.0
        if b is not None and b.correct and n is not None and not n.correct:
            row.regression = f"correct in BASE, {n.outcome.value} in NEW"
        elif row.change_pct is not None and threshold_pct is not None and not row.noisy and row.change_pct < -threshold_pct:
            row.regression = f"speedup {row.change_pct:+.1f}% (threshold -{threshold_pct:g}%)"
        rows.append(row)
    return rows


def _finite(value: float | None) -> bool:
    return value is not None and value > 0 and math.isfinite(value)


def render(rows: list[Row], base: list[EvalResult], new: list[EvalResult], *, width: int, color: bool) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, color_system="standard" if color else None)
    table = Table(title="kbagent compare: BASE -> NEW", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("item", no_wrap=True)  # whole, never folded: the name to paste back
    table.add_column("outcome", overflow="fold")
    for column in ("BASE x", "NEW x", "change", "BASE ms", "NEW ms"):
        table.add_column(column, justify="right", overflow="fold")
    for row in rows:
        change = "-" if row.change_pct is None else f"{row.change_pct:+.1f}%"
        if row.regression:
            change = f"[red]{change} regression[/]"
        elif row.noisy:
            change = f"[yellow]{change} noisy[/]"
        table.add_row(row.item, _outcomes(row), _speedup(row.base), _speedup(row.new), change, _ms(row.base), _ms(row.new))
    console.print(table)
    geo_b, geo_n = geomean_speedup(_both(rows, "base")), geomean_speedup(_both(rows, "new"))
    if geo_b and geo_n:
        console.print(f"geomean speedup over the items correct in both: {geo_b:.3f}x -> {geo_n:.3f}x ({(geo_n / geo_b - 1) * 100:+.1f}%)")
    console.print(_counts(rows), highlight=False)
    return buffer.getvalue()


def _both(rows: list[Row], side: str) -> list[EvalResult]:
    return [getattr(r, side) for r in rows if r.base is not None and r.new is not None and r.base.correct and r.new.correct]


def _counts(rows: list[Row]) -> str:
    regressions = [r.item for r in rows if r.regression]
    only = [f"{sum(1 for r in rows if r.new is None)} only in BASE", f"{sum(1 for r in rows if r.base is None)} only in NEW"]
    noisy = sum(1 for r in rows if r.noisy and not r.regression)
    line = f"{len(rows)} items ({', '.join(only)}); {noisy} noisy (x~: not held to the threshold); "
    return line + (f"[red]{len(regressions)} regressions: {', '.join(regressions)}[/]" if regressions else "no regression")


def _outcomes(row: Row) -> str:
    before, after = ("-" if r is None else r.outcome.value for r in (row.base, row.new))
    return before if before == after else f"{before} -> {after}"


def _speedup(r: EvalResult | None) -> str:
    if r is None or r.speedup is None:
        return "-"
    return f"{r.speedup:.3f}x" + ("~" if is_noisy(r) else "") + capped_mark(r)


def _ms(r: EvalResult | None) -> str:
    return "-" if r is None or r.new_ms is None else f"{r.new_ms:.4g}"


def _read(path: Path) -> list[EvalResult]:
    """The results of a report, or one line on stderr and exit code 2."""
    import typer

    from pytest_kernelbench.report.writer import ReportError, load_report

    try:
        return load_report(path)[1]
    except ReportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def register(app: Any) -> None:
    """``kbagent compare`` on the typer ``app``."""
    import typer

    @app.command("compare")
    def compare_command(
        base: Path = typer.Argument(..., help="--kb-report of the earlier run (BASE)"),
        new: Path = typer.Argument(..., help="--kb-report of the run to judge against it (NEW)"),
        fail_on_regression: float | None = typer.Option(
            None, "--fail-on-regression", metavar="PCT",
            help="exit 1 when an item correct in BASE is not in NEW, or its speedup fell by more than PCT percent "
            "(noisy speedups are never held to it)"),
        as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object on stdout"),
    ) -> None:  # fmt: skip
        """Two runs side by side, per item: outcomes, speedups, candidate times, the change; a CI gate. Exit code: 0, 1
        on a regression with --fail-on-regression, 2 bad input."""
        import json
        import shutil

        if fail_on_regression is not None and not fail_on_regression >= 0:
            typer.echo(f"error: --fail-on-regression {fail_on_regression}: give a percentage of 0 or more, e.g. 5", err=True)
            raise typer.Exit(2)
        before, after = (_read(path) for path in (base, new))
        rows = compare(before, after, fail_on_regression)
        if as_json:
            typer.echo(json.dumps({"rows": [r.to_dict() for r in rows], "regressions": [r.item for r in rows if r.regression],
                                   "threshold_pct": fail_on_regression}))  # fmt: skip
        else:
            width = max(80, shutil.get_terminal_size((100, 24)).columns)
            typer.echo(render(rows, before, after, width=width, color=sys.stdout.isatty()), nl=False)
        failed = fail_on_regression is not None and any(r.regression for r in rows)
        raise typer.Exit(1 if failed else 0)
