"""Candidates judged per hour: serial vs the build pool pipeline vs a warm build cache (issue 5).

    python benchmarks/throughput.py --device cuda --count 16 --build-jobs 16 --out OUTDIR
    python benchmarks/throughput.py --device cpu --count 4 --build-jobs 2 --out OUTDIR   # C++ variants
    python benchmarks/throughput.py --device cuda --corpus level3 --dataset DIR --out OUTDIR
    python benchmarks/throughput.py --device cuda --corpus level1-triton --count 64 --out OUTDIR

``--corpus synthetic`` (the default): the candidates are distinct sources of one kernel (the
bundled CUDA solution of mini/1_LeakyReluScale with different block sizes and grid caps; on
CPU the C++ one with different unroll constants), all calling their extension by the same
name, so each one is a real cold build. ``--corpus level3``: the realistic candidates of
benchmarks/corpus/level3 (Triton with autotune, load_inline CUDA, CUDA graphs, fp16,
torch.compile), each judged against the KernelBench problem its ``# problem: <level>/<id>``
line names, looked up in ``--dataset``. ``--corpus level1-cuda`` / ``level1-triton``: ``--count``
distinct sources from benchmarks/corpus/synthetic.py, on a few level-1 problems (see
benchmarks/corpus/README.md). Phases, each with its own empty build cache unless noted:

* pipeline: the plugin's path: a :class:`Prebuilder` with ``--build-jobs`` workers gets
  every candidate up front, the judges take them in the plugin's order (those with nothing to build first:
  ``judging_order``), waiting on a build in flight.
* warm: the same candidates again on the pipeline's cache: no compile at all.
* serial: one candidate at a time, each built inside its own judge (no pool): the first
  ``--serial-count`` candidates only, as each costs a full cold build.

GPU busy fraction: sampled with nvidia-smi every 0.5 s during the pipeline phase, and from
the judges' own stage times (init + run + compare + time) over the phase's wall time. CPU: the
machine's busy fraction over the phase and per 5 s (``cpu_busy_per_5s``: where the cores sat idle),
and the CPU-seconds of each judge's and build's process trees (``cpu_s``).
Writes OUT/throughput.json (a phase at a time, so a cut-off run keeps what it finished)
and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_kernelbench.build.bytecode import bytecode_prefix  # noqa: E402
from pytest_kernelbench.build.pool import Prebuilder, judging_order  # noqa: E402
from pytest_kernelbench.candidates import Candidate  # noqa: E402
from pytest_kernelbench.config import EvalConfig  # noqa: E402
from pytest_kernelbench.errors import KernelBenchUsageError  # noqa: E402
from pytest_kernelbench.judge.controller import evaluate  # noqa: E402
from pytest_kernelbench.problems import Problem, dataset_specs, load_source, parse_id_ranges, problem_from_path, unique_problems  # noqa: E402

PROBLEM = REPO / "problems" / "mini" / "1_LeakyReluScale.py"
CORPUS = REPO / "benchmarks" / "corpus"
CORPORA = ("synthetic", "level3", "level1-cuda", "level1-triton")
DEFAULT_DATASET = "/work/shared/kernelbench"
_PROBLEM_LINE = re.compile(r"^# problem: (\S+)/(\d+)\s*$")
GPU_STAGES = ("init", "run", "compare", "time")
LOCKED_STAGES = (*GPU_STAGES, "trace", "recheck")  # held under the device lock (with a part of 'reference')
CPU_WINDOW_S = 5.0  # the busy-CPU timeline's window


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_fraction(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The share of all CPUs' time that was busy between two :func:`cpu_times` readings."""
    return (after[0] - before[0]) / max(after[1] - before[1], 1.0)


def _summed(results: list, key: str) -> dict[str, float]:
    """A per-result ``extra[key]`` of seconds by name, summed over the results."""
    names = sorted({k for r in results for k in (getattr(r.extra, key) or {})})
    return {k: round(sum((getattr(r.extra, key) or {}).get(k, 0.0) for r in results), 1) for k in names}


def light_headers(source: str) -> str:
    """The bundled CUDA solution with a ``.cu`` that includes only the ATen/c10 headers it uses.

    Same kernels, same launches; ``<torch/extension.h>`` in the ``.cu`` makes nvcc parse all of torch
    (see benchmarks/build_split.py). The binding file keeps it (load_inline adds it there anyway).
    """
    head, cuda = source.split('_cuda_source = r"""', 1)
    cuda = cuda.replace("#include <torch/extension.h>", "#include <ATen/core/Tensor.h>\n#include <ATen/ops/empty_like.h>\n"
                        "#include <ATen/DeviceGuard.h>", 1)  # fmt: skip
    cuda_part, rest = cuda.split('"""', 1)
    cuda_part = cuda_part.replace("torch::Tensor", "at::Tensor").replace("torch::empty_like", "at::empty_like")
    return f'{head}_cuda_source = r"""{cuda_part}"""{rest}'


def variants(device: str, count: int, kernel: str = "mini") -> list[Candidate]:
    if device == "cuda":
        base = (REPO / "solutions" / "mini" / "1_LeakyReluScale.cuda.py").read_text()
        if kernel == "light":
            base = light_headers(base)
        knobs = itertools.product(("-O3", "-O2"), (128, 256, 512, 1024, 64), (4, 8, 16, 32, 64, 128, 2, 256))
        out = []
        for opt, threads, cap in itertools.islice(knobs, count):
            src = base.replace("const int threads = 256;", f"const int threads = {threads};")
            src = src.replace("(int64_t)sms * 32", f"(int64_t)sms * {cap}").replace('"-O3"', f'"{opt}"')
            out.append(Candidate(src, "", f"threads={threads},cap={cap},{opt}"))
    else:
        base = (REPO / "solutions" / "mini" / "1_LeakyReluScale.cpu.py").read_text()
        # distinct C++ too (grain size and a comment): every binding file differs, as an agent's do
        out = [Candidate(base.replace("1 << 16", f"1 << {10 + i % 8}").replace("#include <cmath>", f"#include <cmath>\n// variant {i}"),
                         "", f"variant={i}") for i in range(count)]  # fmt: skip
    assert len({c.source_hash for c in out}) == len(out) == count, "need distinct sources"
    return out


def corpus_pairs(corpus: str, datasets: list[str], count: int | None, only: set[int] | None = None) -> list[tuple[Problem, Candidate, str]]:
    """(problem, candidate, kind) for each candidate of a corpus, problems looked up in the datasets by level and id;
    ``only``: of these problem ids (the first ``count`` candidates, then filtered)."""
    entries = []  # ((level, id), candidate, kind)
    if corpus == "level3":
        files = sorted((CORPUS / "level3").glob("*.py"), key=lambda f: (int(f.name.split("_", 1)[0]), f.name))
        for f in files[:count]:
            text = f.read_text()
            m = _PROBLEM_LINE.match(text.split("\n", 1)[0])
            if not m:
                raise SystemExit(f"error: {f}: the first line must be '# problem: <level>/<id>'")
            entries.append(((m.group(1), int(m.group(2))), Candidate(text, str(f), f.name), f.name.split(".")[-2]))
    else:
        sys.path.insert(0, str(CORPUS))
        import synthetic  # benchmarks/corpus/synthetic.py

        make = synthetic.cuda_variants if corpus == "level1-cuda" else synthetic.triton_variants
        for v in make(count or 16):
            entries.append(((v.level, v.problem_id), Candidate(v.source, "", f"{v.name} {v.kind} {v.label}"), v.kind))
    entries = [e for e in entries if only is None or e[0][1] in only]
    if not entries:
        raise SystemExit(f"error: no candidate of --corpus {corpus} is for --problems {sorted(only or ())}: name ids the corpus has")
    levels = sorted({key[0] for key, _, _ in entries})
    problems = {(p.level, p.problem_id): p for spec in datasets for p in unique_problems(load_source(spec, levels))}
    missing = sorted({f"{k[0]}/{k[1]}" for k, _, _ in entries if k not in problems})
    if missing:
        raise SystemExit(f"error: --dataset {', '.join(datasets)} has no problem {', '.join(missing)} (level/id)")
    pairs = [(problems[key], cand, kind) for key, cand, kind in entries]
    assert len({c.source_hash for _, c, _ in pairs}) == len(pairs), "need distinct sources"
    return pairs


class Sampler:
    """nvidia-smi's utilisation every 0.5 s (on CUDA), and the machine's busy CPU fraction per 5 s from /proc/stat."""

    def __init__(self, device: str):
        self.samples: list[float] = []
        self.cpu_timeline: list[float] = []  # busy fraction of all cores, one per CPU_WINDOW_S
        self._gpu = device == "cuda" and bool(shutil.which("nvidia-smi"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last, window_start = cpu_times(), time.monotonic()
        while not self._stop.wait(0.5):
            if time.monotonic() - window_start >= CPU_WINDOW_S:
                now, window_start = cpu_times(), time.monotonic()
                self.cpu_timeline.append(round(busy_fraction(last, now), 2))
                last = now
            if self._gpu:
                self.samples.extend(_smi_sample())

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def busy(self) -> float | None:
        return sum(1 for s in self.samples if s > 0) / len(self.samples) if self.samples else None


def _smi_sample() -> list[float]:
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=5).stdout  # fmt: skip
        return [float(text.split()[0])]
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return []


def _pch_events(config: EvalConfig, since: float) -> dict[str, int]:
    """What the shared precompiled header did during the phase (pytest_kernelbench/pch.py's log)."""
    path = Path(config.pch_dir) / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()] if config.pch_dir != "off" and path.exists() else []
    counts: dict[str, int] = {}
    for event in events:
        if event["time"] >= since:
            counts[event["event"]] = counts.get(event["event"], 0) + 1
    return counts


def run_phase(name, pairs, config, jobs, device, judges=1, corpus="synthetic", samples=False):
    """Judge each (problem, candidate, kind) of ``pairs``; one JSON row for the phase."""
    since = time.time()
    started = time.monotonic()
    cpu_before = cpu_times()
    prebuilder = Prebuilder(config, jobs) if jobs else None
    if prebuilder:  # as the plugin orders its items: those with nothing to build first
        pairs = [pairs[i] for i in judging_order([c for _, c, _ in pairs])]
    with Sampler(device) as sampler:
        if prebuilder:
            for problem, c, _ in pairs:
                prebuilder.submit(problem, c)
        # ``judges`` evaluations at once, as ``pytest -n judges`` would: their setup, import and
        # correctness runs overlap; timing takes the device lock in turn.
        def judge(pck):  # a line per result as it comes, so that a run cut off by a time limit still shows its rate
            result = evaluate(pck[0], pck[1], config)  # in its level's --ref-mode (evaluate: config.for_level)
            line = {"t": round(time.monotonic() - started, 1), "candidate": pck[1].label, "outcome": result.outcome.value,
                    "gpu_busy_so_far": sampler.busy, "stage_s": {k: round(v, 2) for k, v in result.stage_seconds.items()},
                    "lock_held_s": result.extra.lock_held_s or {}, "split_s": result.extra.split_s or {},
                    "wall_excess_ms": (result.extra.wall_check or {}).get("excess_ms"),
                    "timed_calls": result.extra.timed_calls, "checked_calls": result.extra.checked_calls,
                    "cpu_s": result.extra.cpu_s or {}, "speedup": result.speedup,
                    "noisy": result.extra.speedup_noisy, "pairs": _pairs_timed(result)}  # fmt: skip
            if not result.correct:
                line["message"] = result.message[:400]
            if samples and result.ref and result.new:  # each side's timing samples, in the order they were taken
                line.update(samples={"ref": result.ref.samples, "new": result.new.samples},
                            timing={k: getattr(result.extra, k) for k in ("timing_stop", "early_stop_se", "calls_per_round", "timer")})
            print("judged " + json.dumps(line), flush=True)
            return result

        with concurrent.futures.ThreadPoolExecutor(judges) as pool:
            results = list(pool.map(judge, pairs))
    candidates = [c for _, c, _ in pairs]
    wall = time.monotonic() - started
    cpu_after = cpu_times()
    builds = []
    if prebuilder:
        builds = [f.result() for f in prebuilder.futures.values() if f.done() and not f.cancelled() and f.exception() is None]
        prebuilder.close(wait=False)
    gpu_seconds = sum(r.stage_seconds.get(s, 0.0) for r in results for s in GPU_STAGES)
    row = {
        "phase": name,
        "corpus": corpus,
        "candidates": len(candidates),
        "build_jobs": jobs,
        "judges": judges,
        "wall_s": round(wall, 1),
        "per_hour": round(len(candidates) * 3600 / wall),
        "correct": sum(r.correct for r in results),
        "cached_builds": sum(bool(r.extra.build_cached) for r in results),
        "judge_gpu_stage_fraction": round(gpu_seconds / wall, 3),
        "locked_stage_fraction": round(sum(r.stage_seconds.get(s, 0.0) for r in results for s in LOCKED_STAGES) / wall, 3),
        "cpu_busy_fraction": round(busy_fraction(cpu_before, cpu_after), 3),
        "nvidia_smi_busy_fraction": None if sampler.busy is None else round(sampler.busy, 3),
        f"cpu_busy_per_{CPU_WINDOW_S:.0f}s": sampler.cpu_timeline,  # where in the run the cores sat idle
        "stepped_aside": sum(int(r.extra.stepped_aside or 0) for r in results),  # shared calls stopped for a timer
        # seconds the device lock was held, summed per phase: the exclusive ones (reference, time) against the wall
        "lock_held_s": _summed(results, "lock_held_s"),
        "split_s": _summed(results, "split_s"),  # parts of the exclusive phases (Findings.split)
        # where the cores went: the machine's busy seconds, the judges' process trees and the pool's build steps
        "cpu_s": {"machine": round((cpu_after[0] - cpu_before[0]) / os.sysconf("SC_CLK_TCK"), 1),
                  "judges": _summed(results, "cpu_s"), "pool_builds": _summed(builds, "cpu_s")},  # fmt: skip
        "pairs_of_runners": sum(_pairs_timed(r) for r in results),  # more than one a candidate: near parity (another_pair)
        "checked_of_timed_calls": [sum(int(getattr(r.extra, k) or 0) for r in results) for k in ("checked_calls", "timed_calls")],
        "median_compile_stage_s": round(sorted(r.stage_seconds.get("compile", 0.0) for r in results)[len(results) // 2], 2),
        "outcomes": sorted({r.outcome.value for r in results}),
        "pch": config.pch_dir if config.pch_dir == "off" else "on",
        "pch_events": _pch_events(config, since),
        "bytecode_cache": bytecode_prefix(),  # where torch has no bytecode installed: the judge's own (build/bytecode.py)
        "speedups": [round(r.speedup, 3) if r.speedup else None for r in results],
        "not_correct": [f"{r.outcome.value}: {r.message[:300]}" for r in results if not r.correct],
        "median_stage_s": {k: round(statistics.median(r.stage_seconds.get(k, 0.0) for r in results), 3)
                           for k in ("start", "reference", "compile", "init", "run", "compare", "trace", "time", "recheck", "wait_lock",
                                     "stepped_aside")},
    }
    if corpus != "synthetic":  # which candidate is which: first-call costs differ by kind (Triton JIT, nvcc, capture, inductor)
        row["by_kind"] = by_kind(pairs, results)
        row["results"] = [{"problem": f"{p.level}/{p.problem_id}", "candidate": c.label, "kind": kind, "outcome": r.outcome.value,
                           "speedup": round(r.speedup, 3) if r.speedup else None,
                           "stage_s": {k: round(v, 2) for k, v in r.stage_seconds.items()}}
                          for (p, c, kind), r in zip(pairs, results, strict=True)]  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def _pairs_timed(result) -> int:
    """How many pairs of runner processes timed this result (stats.another_pair): 0 where it was not timed."""
    if not result.ref:
        return 0
    return len(result.extra.process_pairs or [None])


def by_kind(pairs, results) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for (_, _, kind), r in zip(pairs, results, strict=True):
        out.setdefault(kind, []).append(r)
    return {kind: {"candidates": len(rs), "correct": sum(r.correct for r in rs),
                   "median_stage_s": {k: round(statistics.median(r.stage_seconds.get(k, 0.0) for r in rs), 3)
                                      for k in ("compile", "init", "run", "time", "wait_lock")}}
            for kind, rs in sorted(out.items())}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--corpus", choices=CORPORA, default="synthetic",
                        help="synthetic: variants of one kernel (below); level3: benchmarks/corpus/level3; "
                             "level1-cuda / level1-triton: --count sources from benchmarks/corpus/synthetic.py")  # fmt: skip
    parser.add_argument("--dataset", action="append", default=None,
                        help=f"KernelBench problems for --corpus level3/level1-* (a problems.jsonl, a folder of them, a checkout); "
                             f"default ${{KERNELBENCH_DATASET}} or {DEFAULT_DATASET}")  # fmt: skip
    parser.add_argument("--count", type=int, default=None, help="candidates (default 16; --corpus level3: all of its files)")
    parser.add_argument("--build-jobs", type=int, default=16)
    parser.add_argument("--serial-count", type=int, default=2)
    parser.add_argument("--judges", type=int, default=4, help="evaluations at once in the pipeline phases (as pytest -n)")
    parser.add_argument("--phases", default="pipeline,warm,serial")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--min-reps", type=int, default=0,
                        help="timing samples of each side at least (EvalConfig.min_reps; 0: the judge's default)")
    parser.add_argument("--problems", default="", help="--corpus level3/level1-*: only candidates for these problem ids (19,47 or 19-26)")
    parser.add_argument("--process-pairs", type=int, default=0,
                        help="the judge's --kb-process-pairs (0: its default; 1: one pair, never a second near parity)")
    parser.add_argument("--samples", action="store_true", help="each judged line also holds both sides' timing samples")
    parser.add_argument("--out", type=Path, default=Path("throughput-out"))
    parser.add_argument("--kernel", choices=("mini", "light"), default="mini",
                        help="CUDA candidates: the bundled solution, or it with a .cu that includes only the headers it uses")  # fmt: skip
    parser.add_argument("--build-pch", default="fresh",
                        help="shared precompiled header folder: fresh (an empty one: the run builds it), DIR, or off")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.corpus == "synthetic":
        problem = problem_from_path(PROBLEM)
        pairs = [(problem, c, "cuda" if args.device == "cuda" else "cpp") for c in variants(args.device, args.count or 16, args.kernel)]
    else:
        if args.device != "cuda":
            raise SystemExit(f"error: --corpus {args.corpus} holds GPU candidates (CUDA, Triton): use --device cuda")
        datasets = dataset_specs(args.dataset) or [DEFAULT_DATASET]  # --dataset, else $KERNELBENCH_DATASET, else the default
        try:  # the syntax of pytest's --problems: ids and inclusive ranges
            selection = parse_id_ranges(args.problems)
        except KernelBenchUsageError as exc:
            raise SystemExit(f"error: {exc}") from None
        pairs = corpus_pairs(args.corpus, datasets, args.count, set(selection.ids) if selection else None)
    scratch = Path(tempfile.mkdtemp(prefix="kb-throughput-"))
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"), "corpus": args.corpus,
           "args": vars(args) | {"out": str(args.out)}}  # fmt: skip
    doc["phases"] = []

    def config(cache: str) -> EvalConfig:
        pch = str(scratch / "pch") if args.build_pch == "fresh" else args.build_pch
        return EvalConfig(device=args.device, trials=args.trials, min_reps=args.min_reps, build_dir=str(scratch / cache),
                          lock_dir=str(scratch / "locks"), pch_dir=pch, process_pairs=args.process_pairs)  # fmt: skip

    for phase in args.phases.split(","):
        judged = {"judges": args.judges, "corpus": args.corpus, "samples": args.samples}
        if phase == "pipeline":
            row = run_phase("pipeline (cold)", pairs, config("pipeline"), args.build_jobs, args.device, **judged)
        elif phase == "warm":
            row = run_phase("pipeline (warm cache)", pairs, config("pipeline"), args.build_jobs, args.device, **judged)
        elif phase == "serial":
            row = run_phase("serial (cold)", pairs[: args.serial_count], config("serial"), 0, args.device, **(judged | {"judges": 1}))
        else:
            raise SystemExit(f"error: unknown phase {phase!r}: choose from pipeline, warm, serial")
        doc["phases"].append(row)
        (args.out / "throughput.json").write_text(json.dumps(doc, indent=1))

    head = ("phase", "candidates", "build jobs", "judges", "PCH", "wall s", "per hour", "correct", "cached", "GPU busy (smi)",
            "GPU stages / wall")  # fmt: skip
    print(f"\ncorpus: {args.corpus}, {len(pairs)} candidates")
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for r in doc["phases"]:
        busy = "-" if r["nvidia_smi_busy_fraction"] is None else f"{r['nvidia_smi_busy_fraction']:.0%}"
        print(
            f"| {r['phase']} | {r['candidates']} | {r['build_jobs']} | {r['judges']} | {r['pch']} {r['pch_events']} | {r['wall_s']} | "
            f"{r['per_hour']} | {r['correct']} | "
            f"{r['cached_builds']} | {busy} | {r['judge_gpu_stage_fraction']:.0%} |"
        )


if __name__ == "__main__":
    main()
