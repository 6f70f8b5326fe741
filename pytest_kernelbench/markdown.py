"""Markdown tables from JSON reports, so that docs are generated rather than typed."""

from __future__ import annotations

from typing import Any

from .result import EvalResult
from .summary import summarize


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def report_table(data: dict[str, Any], results: list[EvalResult]) -> str:
    env = data.get("environment", {})
    opts = data.get("options", {})
    device = env.get("gpu") or (results[0].device_name if results else "") or env.get("device", "")
    lines = [
        f"Device: {device}; torch {env.get('torch', '?')}"
        + (f", CUDA {env['cuda']}" if env.get("cuda") else "")
        + f"; candidates: {opts.get('solutions', '?')}; reference mode: {opts.get('mode', 'eager')}; "
        f"report created {data.get('created', '?')}",
        "",
        "| problem | outcome | reference ms (median) | candidate ms (median) | speedup | spread (IQR/median, cand.) | rounds |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        spread = r.new.iqr / r.new.median if r.new and r.new.median else None
        flag = " (near-constant output)" if r.extra.get("suspect_constant_output") else ""
        lines.append(
            f"| {r.problem}{flag} | {r.outcome.value} | {_num(r.ref_ms, '.4g')} | {_num(r.new_ms, '.4g')} | "
            f"{_num(r.speedup, '.3f')} | {_num(spread, '.1%')} | {r.new.rounds if r.new else '-'} |"
        )
    stats = summarize(results)
    geo = stats["geomean_speedup"]
    fast = ", ".join(f"{k} {v:.0%}" for k, v in stats["fast_p"].items())
    lines += ["", f"{stats['total']} judged; geomean speedup {_num(geo, '.3f')}; {fast}."]
    return "\n".join(lines) + "\n"
