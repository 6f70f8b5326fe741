"""The rich summary table printed at the end of a session (and by ``kbagent``)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from ..result import EvalResult
from .summary import FAST_P, capped_mark, is_noisy, summarize
from .text import markup

_STYLE = {"correct": "green", "built": "cyan", "incorrect": "red", "timeout": "magenta", "rejected": "bold red"}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_summary(results: list[EvalResult], *, verbose: bool, width: int = 100, color: bool = False) -> str:
    """The summary as text (with ANSI colour when ``color``), ready to write to a terminal."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, color_system="standard" if color else None)
    stats = summarize(results)
    if verbose:
        console.print(_results_table(results, console, width))
    table = Table(title=f"kernelbench summary: {stats['total']} judged")
    table.add_column("outcome", overflow="fold")
    table.add_column("count", justify="right", overflow="fold")
    for outcome, count in stats["outcomes"].items():
        if count:
            table.add_row(f"[{_STYLE.get(outcome, 'yellow')}]{outcome}[/]", str(count))
    for p in FAST_P:
        table.add_row(f"fast_{p:g}", f"{stats['fast_p'][f'fast_{p:g}']:.1%}")
    geo = stats["geomean_speedup"]
    table.add_row("geomean speedup (correct)", "-" if geo is None else f"{geo:.3f}x")
    if "speed_of_light" in stats:
        light = stats["speed_of_light"]
        table.add_row(f"speed of light, median share ({light['results']} on a GPU)", f"{light['median_share']:.1%}")
    _op_rows(table, stats.get("op_suite"))
    console.print(table)
    if stats["suspect_constant_output"]:
        console.print(
            f"[yellow]near-constant reference output (speedups suspect):[/] {', '.join(map(markup, stats['suspect_constant_output']))}",
            highlight=False,
        )
    if stats["noisy_speedup"]:
        noisy = ", ".join(map(markup, stats["noisy_speedup"]))
        console.print(f"[yellow]noisy speedups (x~, not counted as gains in fast_p):[/] {noisy}", highlight=False)
    return buffer.getvalue()


_COLUMNS = ("problem", "outcome", "ref ms", "new ms", "speedup", "reward", "stage")
_DROPPED_FIRST = ("stage", "reward", "ref ms")  # where the rows are wider than the terminal: the stage is in the failure's
# message, the reward follows from the outcome and speedup, the reference's time from the two others


def _results_table(results: list[EvalResult], console: Console, width: int) -> Table:
    """Per-item rows; columns left out (:data:`_DROPPED_FIRST`) while the rows are wider than ``width``, so that a name
    stays on one line in a CI log's 80 columns; beyond that every column folds, never "…"."""
    columns = list(_COLUMNS)
    table = _rows(results, columns)
    unbounded = console.options.update_width(10 * width)
    for name in _DROPPED_FIRST:
        if console.measure(table, options=unbounded).maximum <= width:
            break
        columns.remove(name)
        table = _rows(results, columns)
    return table


def _rows(results: list[EvalResult], columns: list[str]) -> Table:
    table = Table(title="kernelbench results", show_lines=False)
    for column in columns:
        justify = "right" if "ms" in column or column in ("speedup", "reward") else "left"
        table.add_column(column, justify=justify, overflow="fold")
    for r in results:
        style = _STYLE.get(r.outcome.value, "yellow")
        suspect = " [yellow](near-constant output: speedup suspect)[/]" if r.extra.suspect_constant_output else ""
        cells = {"problem": markup(r.problem) + suspect, "outcome": f"[{style}]{r.outcome.value}[/]", "ref ms": _ms(r.ref_ms),
                 "new ms": _ms(r.new_ms), "speedup": _speedup(r), "reward": "-" if r.reward is None else f"{r.reward:+.2f}",
                 "stage": "" if r.correct else markup(r.stage)}  # fmt: skip
        table.add_row(*(cells[c] for c in columns))
    return table


def _speedup(result: EvalResult) -> str:
    if result.speedup is None:
        return "-"
    if is_noisy(result):
        low, high = (result.extra.speedup_interval or [None, None])[:2]
        span = f" {low:.2f}-{high:.2f}" if low is not None and high is not None else ""
        return f"[yellow]{result.speedup:.2f}x~{span}[/]" + _capped(result)
    return f"{result.speedup:.2f}x" + _capped(result)


def _capped(result: EvalResult) -> str:
    mark = capped_mark(result, digits=2)
    return f" [yellow]{mark.strip()}[/]" if mark else ""


def _op_rows(table: Table, scores: dict | None) -> None:
    """BackendBench's scores of a ``--suite`` run."""
    if not scores:
        return
    table.add_row("op correctness score", f"{scores['correctness_score']:.2f} ({scores['correct_ops']}/{scores['ops']} ops)")
    table.add_row("op performance score", f"{scores['performance_score']:.3f}x (geomean, failures 1.0)")
    for name, value in scores["perf_at_p"].items():
        table.add_row(name, f"{value:.1%}")
