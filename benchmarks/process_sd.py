"""How large an offset does one pair of runner processes draw? (``stats.PROCESS_SD``, from recorded runs)

Each pair of runner processes draws an offset that lasts its whole evaluation, so the interval from its own rounds
cannot see it, and a reference judged against itself then prints a plain gain: the rounds agree that it is 2.9% faster.
This reads recorded self-judgments, one pair each, and for each trial offset (a standard deviation of the log speedup,
added in quadrature to the rounds' half-width, as ``stats._one_pair`` does) counts the intervals that reach 1.0 and the
references still printed as a plain gain; ``stats.PROCESS_SD`` is the smallest that leaves none. With ``--candidates``,
it also lists the real candidates whose plain gain the offset would turn noisy (the cost).

    python3 benchmarks/process_sd.py --gpu docs/data/timing-fidelity-h100-2026-11-27-session16.jsonl \\
        --cpu docs/data/cpu-timing-2vcpu-2026-11-27-session1[67]*.json docs/data/cpu-timing-host16-2026-11-27-session17.json \\
        --candidates docs/data/throughput-2026-11-27-session16.jsonl docs/data/cpu-solutions-*.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_kernelbench.judge.stats import PROCESS_SD, PairTiming, another_pair, combine_pairs, speedup_interval  # noqa: E402

TRIALS = (0.0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03)


def one_pair_rows(path: Path) -> list[tuple[str, float, list[float], list[float]]]:
    """(name, speedup, reference samples, candidate samples) of each result timed in one pair, from a fidelity JSON-lines
    file (timing_fidelity.py), a throughput one (throughput.py's judged lines) or a CPU timing JSON (cpu_timing_under_builds.py)."""
    rows = []
    if path.suffix == ".jsonl":
        for line in path.read_text().splitlines():
            row = json.loads(line)
            row = row.get("judged", row)
            samples = row.get("samples") or {}
            several = len(row.get("pairs") or []) > 1  # its samples are all its pairs': multi_pair_rows reads it
            if row.get("outcome") == "correct" and samples.get("ref") and samples.get("new") and not several:
                speedup = row.get("speedup") or statistics.median(samples["ref"]) / statistics.median(samples["new"])
                rows.append((row.get("problem") or row.get("candidate", "?"), speedup, samples["ref"], samples["new"]))
        return rows
    for run in json.loads(path.read_text())["rows"]:
        for name, speedup in run["speedups"].items():
            if speedup and name not in (run.get("process_pairs") or {}) and name in run.get("samples", {}):
                rows.append((name, speedup, run["samples"][name]["ref"], run["samples"][name]["new"]))
    return rows


def multi_pair_rows(path: Path) -> list[tuple[str, list[PairTiming]]]:
    """(name, each pair's timing) of each result timed in several pairs, from a JSON-lines file whose rows keep their
    pairs (timing_fidelity rows: ``pairs``, as ``extra.process_pairs`` records them)."""
    if path.suffix != ".jsonl":
        return []
    rows = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        found = row.get("pairs") or []
        if row.get("outcome") == "correct" and len(found) > 1 and all(p["interval"][0] for p in found):
            timed = [PairTiming(p["speedup"], p["interval"][0], p["interval"][1] or math.inf, p["noisy"], p["capped"]) for p in found]
            rows.append((row.get("problem") or "?", timed))
    return rows


def pairs(rows: list[tuple[str, float, list[float], list[float]]]) -> list[tuple[str, PairTiming]]:
    """Each result's one pair as the judge sees it (its rounds' interval and noisy flag); those without an interval left out."""
    timed = [(name, PairTiming(s, *speedup_interval(ref, new, s), False)) for name, s, ref, new in rows]
    return [(name, t) for name, t in timed if 0 < t.lo and math.isfinite(t.hi)]


def table(rows: list[tuple[str, float, list[float], list[float]]], device: str) -> list[dict]:
    """For each trial offset: the intervals that reach 1.0, and the plain gains, those the judge would time in another
    pair at that offset (:func:`stats.another_pair`) apart."""
    timed = pairs(rows)
    out = []
    for sd in TRIALS:
        results = [(name, t, combine_pairs([t], sd)) for name, t in timed]  # the judge's widening (stats._one_pair)
        reach = [name for name, _, r in results if r.lo <= 1.0 <= r.hi]
        again, plain = [], []
        for name, t, r in results:
            if t.speedup > 1 and not r.noisy:
                (again if another_pair([t], 0, device, sd) else plain).append(f"{name} {t.speedup:.4f}")
        out.append({"sd": sd, "results": len(timed), "interval_reaches_1": len(reach), "plain_gains": plain, "timed_again": again})
    return out


def multi_table(rows: list[tuple[str, list[PairTiming]]]) -> list[dict]:
    """For each trial offset, the results timed in several pairs that are still printed as a plain gain
    (:func:`stats.combine_pairs` with that ``process_sd``: the least interval, ``stats._shared_offset``)."""
    out = []
    for sd in TRIALS:
        plain = [f"{name} {r.speedup:.4f}" for name, timed in rows for r in [combine_pairs(timed, sd)] if r.speedup > 1 and not r.noisy]
        out.append({"sd": sd, "results": len(rows), "plain_gains": plain})
    return out


def cost(rows: list[tuple[str, float, list[float], list[float]]], sd: float) -> list[str]:
    """Real candidates printed as a plain gain today that the offset ``sd`` turns noisy."""
    return [f"{name} {t.speedup:.3f}" for name, t in pairs(rows) if not t.noisy and combine_pairs([t], sd).noisy]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", nargs="*", default=[], help="self-judgments on a GPU (timing_fidelity.py rows with samples)")
    ap.add_argument("--cpu", nargs="*", default=[], help="self-judgments on a CPU (cpu_timing_under_builds.py JSON)")
    ap.add_argument("--candidates", nargs="*", default=[], help="real candidates' rows: what each offset would cost them")
    a = ap.parse_args()
    missing = [f for f in a.gpu + a.cpu + a.candidates if not Path(f).is_file()]
    if missing:
        sys.exit(f"error: no such file: {', '.join(missing)}: pass recorded rows, e.g. docs/data/timing-fidelity-*.jsonl")
    for kind, files in (("cuda", a.gpu), ("cpu", a.cpu)):
        if not files:
            continue
        rows = [row for f in files for row in one_pair_rows(Path(f))]
        print(f"{kind}: {len(rows)} references judged against themselves in one pair (the judge's PROCESS_SD: {PROCESS_SD[kind]})")
        for t in table(rows, kind):
            shown = ", ".join(t["plain_gains"][:4]) + (" ..." if len(t["plain_gains"]) > 4 else "")
            reach, plain = f"{t['interval_reaches_1']} of {t['results']}", len(t["plain_gains"])
            again = f"; timed in another pair instead: {', '.join(t['timed_again'])}" if t["timed_again"] else ""
            print(f"  sd {t['sd']:.3f}: interval reaches 1.0 in {reach}; plain gains {plain} {shown}{again}")
        several = [row for f in files for row in multi_pair_rows(Path(f))]
        if several:
            print(f"{kind}: {len(several)} references judged against themselves in several pairs")
            for t in multi_table(several):
                print(f"  sd {t['sd']:.3f}: plain gains {len(t['plain_gains'])} {', '.join(t['plain_gains'][:4])}")
    for f in a.candidates:
        rows = one_pair_rows(Path(f))
        kind = "cpu" if "cpu" in Path(f).name else "cuda"
        flipped = cost(rows, PROCESS_SD[kind])
        print(f"{Path(f).name}: {len(rows)} candidates timed in one pair; {len(flipped)} plain gains turn noisy at {PROCESS_SD[kind]}: "
              f"{flipped}")


if __name__ == "__main__":
    main()
