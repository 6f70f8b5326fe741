"""Markdown tables from JSON reports, so that docs are generated rather than typed."""

from __future__ import annotations

from typing import Any

from ..result import EvalResult
from .summary import capped_mark, is_noisy, summarize
from .text import printable


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def report_table(data: dict[str, Any], results: list[EvalResult]) -> str:
    env = data.get("environment", {})
    opts = data.get("options", {})
    device = env.get("gpu") or (results[0].device_name if results else "") or env.get("device", "")
    lines = [
        f"Device: {device}; torch {env.get('torch', '?')}"
        + (f", CUDA {env['cuda']}" if env.get("cuda") else "")
        + f"; candidates: {opts.get('solutions', '?')}; reference run as: {opts.get('mode', 'eager')} (--mode); "
        f"models in: {opts.get('ref_mode') or 'the level default'} mode (--ref-mode); report created {data.get('created', '?')}",
        "",
        "| problem | outcome | reference ms (median) | candidate ms (median) | speedup | spread (IQR/median, cand.) | rounds |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        spread = r.new.iqr / r.new.median if r.new and r.new.median else None
        flag = " (near-constant output)" if r.extra.suspect_constant_output else ""
        lines.append(
            f"| {printable(r.problem)}{flag} | {r.outcome.value} | {_num(r.ref_ms, '.4g')} | {_num(r.new_ms, '.4g')} | "
            f"{_speedup(r)} | {_num(spread, '.1%')} | {r.new.rounds if r.new else '-'} |"
        )
    stats = summarize(results)
    geo = stats["geomean_speedup"]
    fast = ", ".join(f"{k} {v:.0%}" for k, v in stats["fast_p"].items())
    lines += ["", f"{stats['total']} judged; geomean speedup {_num(geo, '.3f')}; {fast}."]
    if stats["noisy_speedup"]:
        lines.append(f"Noisy speedups (their timing cannot tell them from 1.0 or from a process's offset; not gains in fast_p): "
                     f"{', '.join(stats['noisy_speedup'])}.")  # fmt: skip
    if data.get("pending"):
        lines.append(f"Unfinished run: {len(data['pending'])} selected items have no result ({', '.join(data['pending'][:10])}).")
    return "\n".join(lines) + "\n"


def _speedup(r: EvalResult) -> str:
    """The speedup, and for a noisy one that it is, with its interval; a capped one says so with the claim."""
    if r.speedup is None or not is_noisy(r):
        return _num(r.speedup, ".3f") + capped_mark(r)
    low, high = (r.extra.speedup_interval or [None, None])[:2]
    span = f", {low:.2f}-{high:.2f}" if low is not None and high is not None else ""
    return f"{r.speedup:.3f} (noisy{span})" + capped_mark(r)


def _geomean(values: list[float]) -> float | None:
    import math

    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def solutions_tables(eager: list[tuple[dict[str, Any], list[EvalResult]]],
                     compiled: list[tuple[dict[str, Any], list[EvalResult]]],
                     keep: Any = None) -> str:
    """One table per level: eager ms, torch.compile ms, ours ms and both speedups.

    ``eager`` are reports of ``--solutions DIR --mode eager`` runs (reference = eager),
    ``compiled`` of ``--mode compile`` runs of the same solutions (reference = torch.compile);
    each speedup comes from its own interleaved timing window. ``keep(result)`` filters rows.
    """
    by_level: dict[str, dict[str, dict[str, Any]]] = {}
    meta: dict[str, str] = {}
    for kind, reports in (("eager", eager), ("compile", compiled)):
        for data, results in reports:
            env = data.get("environment", {})
            meta.setdefault("device", env.get("gpu") or env.get("device", "?"))
            meta.setdefault("torch", env.get("torch", "?"))
            meta.setdefault("date", str(data.get("created", "?"))[:10])
            for r in results:
                if keep is not None and not keep(r):
                    continue
                row = by_level.setdefault(r.level, {}).setdefault(r.problem, {"problem_id": r.problem_id})
                row[kind] = r
    out = [f"Device: {meta.get('device', '?')}; torch {meta.get('torch', '?')}; measured {meta.get('date', '?')}.", ""]
    for level in sorted(by_level, key=lambda lv: (len(lv), lv)):
        rows = sorted(by_level[level].items(), key=lambda kv: kv[1]["problem_id"])
        out += [
            f"### Level {level}",
            "",
            "| problem | outcome | eager ms | torch.compile ms | ours ms | vs eager | vs torch.compile |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        vs_eager, vs_compile = [], []
        for name, row in rows:
            e: EvalResult | None = row.get("eager")
            c: EvalResult | None = row.get("compile")
            outcome = e.outcome.value if e else "-"
            if c and c.outcome.value != outcome:
                outcome += f" / compile run: {c.outcome.value}"
            if e and e.correct and e.speedup:
                vs_eager.append(e.speedup)
            if c and c.correct and c.speedup:
                vs_compile.append(c.speedup)
            flag = " (near-constant output)" if e and e.extra.suspect_constant_output else ""
            out.append(
                f"| {printable(name)}{flag} | {outcome} | {_num(e.ref_ms if e else None, '.4g')} | "
                f"{_num(c.ref_ms if c else None, '.4g')} | "
                f"{_num(e.new_ms if e else None, '.4g')} | {_num(e.speedup if e and e.correct else None, '.2f')}x"
                f"{capped_mark(e) if e and e.correct else ''} | "
                f"{_num(c.speedup if c and c.correct else None, '.2f')}x |"
            )
        out += [
            "",
            f"Geomean over correct solutions: {_num(_geomean(vs_eager), '.2f')}x vs eager ({len(vs_eager)} problems), "
            f"{_num(_geomean(vs_compile), '.2f')}x vs torch.compile ({len(vs_compile)} problems).",
            "",
        ]
    return "\n".join(out)
