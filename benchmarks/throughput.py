"""Candidates judged per hour: serial vs the build pool pipeline vs a warm build cache (issue 5).

    python benchmarks/throughput.py --device cuda --count 16 --build-jobs 16 --out OUTDIR
    python benchmarks/throughput.py --device cpu --count 4 --build-jobs 2 --out OUTDIR   # C++ variants
    python benchmarks/throughput.py --device cuda --corpus level3 --dataset DIR --out OUTDIR
    python benchmarks/throughput.py --device cuda --corpus level1-triton --count 64 --out OUTDIR
    python benchmarks/throughput.py --device cuda --corpus ../shared/pike-corpus --dataset KB/pike-levels.jsonl \
        --phases pipeline,warm --judges 8 --sessions 1 --deadline 3000 --out OUTDIR

``--corpus synthetic`` (the default): the candidates are distinct sources of one kernel (the
bundled CUDA solution of mini/1_LeakyReluScale with different block sizes and grid caps; on
CPU the C++ one with different unroll constants), all calling their extension by the same
name, so each one is a real cold build. ``--corpus level3``: the realistic candidates of
benchmarks/corpus/level3 (Triton with autotune, load_inline CUDA, CUDA graphs, fp16,
torch.compile), each judged against the KernelBench problem its ``# problem: <level>/<id>``
line names, looked up in ``--dataset``. ``--corpus level1-cuda`` / ``level1-triton``: ``--count``
distinct sources from benchmarks/corpus/synthetic.py, on a few level-1 problems (see
benchmarks/corpus/README.md). ``--corpus DIR``: any folder of solution files, or a folder of such folders (PIKE's
variants), each file matched to its problem as ``pytest --solutions`` matches (benchmarks/corpus_dir.py); a file no
problem claims is listed and left out. Phases, each with its own empty build cache unless noted:

* pipeline: the plugin's path: a :class:`Prebuilder` with ``--build-jobs`` workers gets
  every candidate up front, the judges take them in the plugin's order (those with nothing to build first:
  ``judging_order``), waiting on a build in flight.
* warm: the same candidates again on the pipeline's cache: no compile at all.
* serial: one candidate at a time, each built inside its own judge (no pool): the first
  ``--serial-count`` candidates only, as each costs a full cold build.
* alone: the candidates the phase before judged, in the order it judged them, again one at a time on its build
  cache (one judge: no other judge's work on the device or the cores); the row's ``against`` says how many kept their outcome and how many speedups agree within 5% and 10%
  (issue 46: every verdict the same as the candidate judged alone).

``--judges N`` evaluations run at once in one session (as ``pytest -n N``; on CUDA spread over every visible GPU, each
judge keeping one); ``--sessions M`` runs M such sessions at once, each a process of this script with its own build pool and judges, judging every M-th candidate, sharing the
machine's lock, build cache and PCH folders as M separate ``pytest`` runs would. ``--deadline S`` stops the run after S
seconds: judges in flight are stopped and left out (``cut_off`` lists them; ``cut_off_at`` gives each one's stage and
the stages its supervisor had announced), and the phase's row counts those judged. ``long_settles``: each time phase that
waited 4 s or more for a quiet GPU, with the candidates then in a shared GPU stage (init, run, stepped aside) beside it;
``settle_busy``: each wait of a second or more, with whose processes NVML saw busy meanwhile (a candidate's runner by name).

GPU busy fraction: sampled with nvidia-smi every 0.5 s during the pipeline phase, and from
the judges' own stage times (init + run + compare + time) over the phase's wall time. CPU: the
machine's busy fraction over the phase and per 5 s (``cpu_busy_per_5s``: where the cores sat idle),
and the CPU-seconds of each judge's and build's process trees (``cpu_s``). Each candidate's line (``judged {...}`` on
stdout, and ``results`` in the row for a realistic corpus): outcome, speedup, wall, stage seconds, the device lock held
per phase (``lock_held_s``), the parts of each phase (``split_s``), CPU-seconds per process tree, how its time phase
went (``timing``: calls timed and checked, calls a round, why it stopped, a second batch, both medians); the row sums them,
and ``time_s`` splits the judges' summed wall into compile stage, lock held, waiting for the lock and the rest.
Writes OUT/throughput.json (a phase at a time, so a cut-off run keeps what it finished) and OUT/throughput.md (the
tables it prints: phases, where the time went, each candidate).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import datetime
import itertools
import json
import math
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

from corpus_dir import folder_pairs  # noqa: E402  (benchmarks/corpus_dir.py, beside this script)

from pytest_kernelbench.build.bytecode import bytecode_prefix  # noqa: E402
from pytest_kernelbench.build.pool import Prebuilder, judging_order  # noqa: E402
from pytest_kernelbench.candidates import Candidate  # noqa: E402
from pytest_kernelbench.config import INPUTS, TIMERS, EvalConfig  # noqa: E402
from pytest_kernelbench.errors import KernelBenchUsageError  # noqa: E402
from pytest_kernelbench.judge.controller import evaluate  # noqa: E402
from pytest_kernelbench.problems import Problem, dataset_specs, load_source, parse_id_ranges, problem_from_path, unique_problems  # noqa: E402

PROBLEM = REPO / "problems" / "mini" / "1_LeakyReluScale.py"
CORPUS = REPO / "benchmarks" / "corpus"
CORPORA = ("synthetic", "level3", "level1-cuda", "level1-triton")
PHASES = ("pipeline", "warm", "serial", "alone")
DEFAULT_DATASET = "/work/shared/kernelbench"
_PROBLEM_LINE = re.compile(r"^# problem: (\S+)/(\d+)\s*$")
GPU_STAGES = ("init", "run", "compare", "time")
LOCKED_STAGES = (*GPU_STAGES, "trace", "recheck")  # held under the device lock (with a part of 'reference')
CPU_WINDOW_S = 5.0  # the busy-CPU timeline's window
# a time phase's settle this long (another judge's candidate's queued kernels kept the GPU busy) is listed with the
# candidates then in a shared GPU stage beside it (long_settles): whose kernels they were is not measured, only who was there
LONG_SETTLE_S = 4.0
SHARED_GPU_STAGES = ("init", "run", "stepped_aside")
_PRINTING = threading.Lock()


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_fraction(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The share of all CPUs' time that was busy between two :func:`cpu_times` readings."""
    return (after[0] - before[0]) / max(after[1] - before[1], 1.0)


def _summed(lines: list[dict], key: str) -> dict[str, float]:
    """A per-candidate ``line[key]`` of seconds by name (lock_held_s, split_s, cpu_s), summed over the candidates."""
    names = sorted({k for line in lines for k in line[key]})
    return {k: round(sum(line[key].get(k, 0.0) for line in lines), 1) for k in names}


def _stage(line: dict, name: str) -> float:
    return line["stage_s"].get(name, 0.0)


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
        self.gpu_timeline: list[float] = []  # the share of nvidia-smi's samples with the GPU busy, one per CPU_WINDOW_S
        self._gpu = device == "cuda" and bool(shutil.which("nvidia-smi"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last, window_start, window_from = cpu_times(), time.monotonic(), 0
        while not self._stop.wait(0.5):
            if time.monotonic() - window_start >= CPU_WINDOW_S:
                now, window_start = cpu_times(), time.monotonic()
                self.cpu_timeline.append(round(busy_fraction(last, now), 2))
                last = now
                if self._gpu:
                    window, window_from = self.samples[window_from:], len(self.samples)
                    self.gpu_timeline.append(round(sum(1 for v in window if v > 0) / len(window), 2) if window else None)
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
    """Each GPU's utilisation now (nvidia-smi prints a line per GPU); none where it cannot say."""
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=5).stdout  # fmt: skip
        return [float(v) for v in text.split()]
    except (OSError, ValueError, subprocess.SubprocessError):
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


def _timing(result) -> dict:
    """How a candidate's time phase went: calls timed and checked (both batches), calls a round, why timing stopped,
    whether a second batch was timed, the reference's and the candidate's median ms, capped or noisy, the wall
    clock's check of the batch that stood and of a first batch timed again (excess over the bound: whether a second
    batch could have helped), and the rounds sent back to a shared hold (a call far above its warm ones)."""
    extra = result.extra
    return {"timed_calls": extra.timed_calls, "checked_calls": extra.checked_calls, "per_round": extra.calls_per_round,
            "stop": extra.timing_stop, "early_stop_se": extra.early_stop_se, "timer": extra.timer,
            "second_batch": extra.wall_check_first_batch is not None,
            "ref_ms": result.ref.median if result.ref else None, "new_ms": result.new.median if result.new else None,
            "samples": result.new.rounds if result.new else None,
            "capped": extra.speedup_capped, "noisy": extra.speedup_noisy,
            "wall_check": extra.wall_check, "first_batch": extra.wall_check_first_batch, "sent_back": extra.sent_back}  # fmt: skip


def judged_line(pck, result, started: float, busy: float | None, samples: bool) -> dict:
    """One candidate's JSON line: outcome, speedup, stage seconds, lock seconds and parts per phase, CPU, wall."""
    problem, candidate, kind = pck
    line = {"t": round(time.time() - started, 1), "problem": f"{problem.level}/{problem.problem_id}", "candidate": candidate.label,
            "kind": kind, "outcome": result.outcome.value, "correct": result.correct, "speedup": result.speedup,
            "wall_s": round(result.wall_seconds, 2), "gpu_busy_so_far": busy,
            "stage_s": {k: round(v, 2) for k, v in result.stage_seconds.items()},
            "lock_held_s": result.extra.lock_held_s or {}, "split_s": result.extra.split_s or {}, "cpu_s": result.extra.cpu_s or {},
            "build_cached": bool(result.extra.build_cached), "stepped_aside": int(result.extra.stepped_aside or 0),
            "reference_shared": bool(result.extra.reference_shared), "settle_gave_way": int(result.extra.settle_gave_way or 0),
            "wall_excess_ms": (result.extra.wall_check or {}).get("excess_ms"),
            "timed_calls": result.extra.timed_calls, "checked_calls": result.extra.checked_calls,
            "noisy": result.extra.speedup_noisy, "capped": result.extra.speedup_capped, "sandbox": result.extra.sandbox,
            "pairs": _pairs_timed(result), "input_variants": result.extra.input_variants,
            "light_headers": result.extra.light_headers, "timing": _timing(result), "stages_at": result.extra.stages_at,
            "supervisor_pid": result.extra.supervisor_pid, "settle_busy": result.extra.settle_busy}  # fmt: skip
    if not result.correct:
        line["message"] = result.message if len(result.message) <= 1000 else f"{result.message[:300]} [...] {result.message[-700:]}"
    if samples and result.ref and result.new:  # each side's timing samples, in the order they were taken
        line["samples"] = {"ref": result.ref.samples, "new": result.new.samples}
    return line


def _per_gpu(config: EvalConfig) -> list[EvalConfig]:
    """One config per visible GPU (judges take them in turn, as pytest -n spreads its workers); the config itself on the CPU."""
    if config.device != "cuda":
        return [config]
    import torch

    return [dataclasses.replace(config, device_index=i) for i in range(max(1, torch.cuda.device_count()))]


def _finished(future: concurrent.futures.Future) -> bool:
    """A pool build that ended with a result (not cancelled, not stopped by an exception)."""
    return future.done() and not future.cancelled() and future.exception() is None


class SpannedPrebuilder(Prebuilder):
    """The plugin's build pool, keeping when each build ran (seconds into the run): whether a run's end waits on builds."""

    def __init__(self, config: EvalConfig, jobs: int, started: float):
        super().__init__(config, jobs)
        self.started, self.spans = started, {}  # source hash: [label, start, end or None]

    def _build(self, problem, candidate, rank):
        self.spans[candidate.source_hash] = span = [candidate.label, round(time.time() - self.started, 1), None]
        try:
            return super()._build(problem, candidate, rank)
        finally:
            span[2] = round(time.time() - self.started, 1)

    def timeline(self) -> list[dict]:
        """Each build started: its span, and (where it ended with a result) its outcome, stages and CPU-seconds."""
        rows = []
        for key, (label, start, end) in self.spans.items():
            future, row = self.futures[key], {"candidate": label, "from_t": start, "to_t": end}
            if end is not None and _finished(future):
                result = future.result()
                row.update(outcome=result.outcome.value, stage_s={k: round(v, 2) for k, v in result.stage_seconds.items()},
                           cpu_s=result.extra.cpu_s or {}, light_headers=result.extra.light_headers)  # fmt: skip
            rows.append(row)
        return sorted(rows, key=lambda r: r["from_t"])


def judge_pairs(pairs, config, jobs, judges, stop, started, busy=lambda: None, samples=False):
    """Judge each (problem, candidate, kind) as one pytest session would: a build pool of ``jobs`` (none: 0) and
    ``judges`` evaluations at once (``pytest -n judges``: setup, import and correctness runs overlap; timing takes the
    device lock in turn). Prints a line per result as it comes. Returns the lines of those judged before ``stop`` was set,
    the pool's build CPU-seconds, the labels cut off (stopped in flight, or never started), and where the run's end went:
    the stage each judge stopped in flight was in, and each pool build's span."""
    prebuilder = SpannedPrebuilder(config, jobs, started) if jobs else None
    stopped = []  # list.append: one at a time under the GIL
    if prebuilder:  # as the plugin orders its items: those with nothing to build first
        pairs = [pairs[i] for i in judging_order([c for _, c, _ in pairs])]
        for problem, c, _ in pairs:
            prebuilder.submit(problem, c)

    configs = _per_gpu(config)
    seats = itertools.count()
    seat = threading.local()

    def judge(pck):
        if stop.is_set():
            return None
        if not hasattr(seat, "config"):  # each judge (a pool thread) keeps one GPU, as an xdist worker does
            seat.config = configs[next(seats) % len(configs)]
        begun = round(time.time() - started, 1)
        result = evaluate(pck[0], pck[1], seat.config, stop=stop)  # in its level's --ref-mode (evaluate: config.for_level)
        if stop.is_set() and result.message.startswith("stopped during stage"):  # controller._lost: the deadline, not a verdict
            stopped.append({"candidate": pck[1].label, "from_t": begun, "stage": result.stage,
                            "stage_s": {k: round(v, 2) for k, v in result.stage_seconds.items()},
                            "stages_at": result.extra.stages_at, "supervisor_pid": result.extra.supervisor_pid})  # fmt: skip
            return None
        line = judged_line(pck, result, started, busy(), samples)
        with _PRINTING:  # whole lines: a session's lines are read back by run_sessions
            print("judged " + json.dumps(line), flush=True)
        return line

    with concurrent.futures.ThreadPoolExecutor(judges) as pool:
        lines = list(pool.map(judge, pairs))
    builds, spans = [], []
    if prebuilder:
        builds = [f.result() for f in prebuilder.futures.values() if _finished(f)]
        spans = prebuilder.timeline()
        prebuilder.close(wait=False)
    build_cpu = _summed([{"cpu_s": b.extra.cpu_s or {}} for b in builds], "cpu_s")
    headers = _summed([{"h": b.extra.light_headers or {}} for b in builds], "h")  # build/light.py: .cu compiles by header
    if headers:
        print("pool-headers " + json.dumps(headers), flush=True)
    cut = [c.label for (_, c, _), line in zip(pairs, lines, strict=True) if line is None]
    return [line for line in lines if line], build_cpu, cut, {"stopped": stopped, "builds": spans}


def run_sessions(sessions: int, pairs_args: list[str], cache: str, scratch: Path, stop_at: float, started: float):
    """``sessions`` independent judge sessions at once, each a process of this script judging every ``sessions``-th
    candidate with its own build pool and judges, sharing the machine's lock, build cache and PCH folders as separate
    ``pytest`` runs on one machine do. Returns what :func:`judge_pairs` returns, gathered."""
    procs = [subprocess.Popen([sys.executable, __file__, *pairs_args, "--session", f"{k}/{sessions}", "--scratch", str(scratch),
                               "--session-cache", cache, "--stop-at", repr(stop_at), "--phase-start", repr(started)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
             for k in range(sessions)]
    lines, ends = [], []  # list.append: one at a time under the GIL

    def read(proc):
        for text in proc.stdout:
            kind, _, payload = text.partition(" ")
            try:
                if kind == "session-end":
                    ends.append(json.loads(payload))
                    continue
                if kind == "judged":
                    lines.append(json.loads(payload))
            except json.JSONDecodeError as exc:
                print(f"throughput: a session's line is not JSON ({exc}): {text[:200]!r}", flush=True)
            with _PRINTING:
                print(text, end="", flush=True)

    readers = [threading.Thread(target=read, args=(p,)) for p in procs]
    for thread in readers:
        thread.start()
    for proc, thread in zip(procs, readers, strict=True):
        try:
            proc.wait(timeout=max(stop_at - time.time(), 0.0) + 120)  # each stops itself at stop_at; this is a backstop
        except subprocess.TimeoutExpired:
            proc.kill()
        thread.join()
    build_cpu = {k: round(sum(e["build_cpu_s"].get(k, 0.0) for e in ends), 1) for k in sorted({k for e in ends for k in e["build_cpu_s"]})}
    ends_at = {k: [x for e in ends for x in e.get("end", {}).get(k, [])] for k in ("stopped", "builds")}
    return lines, build_cpu, [label for e in ends for label in e["cut"]], ends_at


def run_phase(name, pairs, config, jobs, device, judges=1, corpus="synthetic", samples=False, stop_at=math.inf, sessions=None):
    """Judge each (problem, candidate, kind) of ``pairs``; one JSON row for the phase. ``sessions``: (count, this script's
    arguments, build cache name, scratch) to judge in that many separate sessions at once (:func:`run_sessions`)."""
    since = started = time.time()
    cpu_before = cpu_times()
    stop = threading.Event()
    timer = threading.Timer(max(stop_at - time.time(), 0.0), stop.set) if stop_at < math.inf else None
    if timer:
        timer.start()
    with Sampler(device) as sampler:
        if sessions and sessions[0] > 1:
            lines, build_cpu, cut, end = run_sessions(sessions[0], sessions[1], sessions[2], sessions[3], stop_at, started)
        else:
            lines, build_cpu, cut, end = judge_pairs(pairs, config, jobs, judges, stop, started, lambda: sampler.busy, samples)
    if timer:
        timer.cancel()
    cpu_after = cpu_times()
    row = phase_row(lines, time.time() - started, busy_fraction(cpu_before, cpu_after), cpu_after[0] - cpu_before[0], sampler)
    row = {"phase": name, "corpus": corpus, "build_jobs": jobs, "judges": judges, "sessions": sessions[0] if sessions else 1,
           **row, "cut_off": cut, "pch": config.pch_dir if config.pch_dir == "off" else "on", "pch_events": _pch_events(config, since),
           "bytecode_cache": bytecode_prefix()}  # fmt: skip
    row["cpu_s"]["pool_builds"] = build_cpu
    row["cut_off_at"], row["builds"] = end["stopped"], end["builds"]  # the judges stopped in flight; the pool's spans
    row["long_settles"] = long_settles(lines, end["stopped"])
    row["settle_busy"] = settle_busy(lines, end["stopped"])
    if corpus != "synthetic":  # which candidate is which: first-call costs differ by kind (Triton JIT, nvcc, capture, inductor)
        row["by_kind"] = by_kind(lines)
    if lines:
        keep = ("t", "problem", "candidate", "kind", "outcome", "speedup", "wall_s", "stage_s", "lock_held_s", "split_s", "cpu_s",
                "input_variants", "timing", "samples", "stages_at", "reference_shared",
                "settle_gave_way", "supervisor_pid", "settle_busy")  # t: seconds into the run when it ended
        row["results"] = [{k: line[k] for k in keep if k in line}
                          for line in lines]  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def _spans(lines: list[dict], stopped: list[dict]) -> list[tuple[str, str, float, float]]:
    """(candidate, stage, from, to) in seconds into the run, from each judged line's and each cut-off judge's stages_at
    (a judged line's start: when it ended less its wall; a cut-off one's: when it began; its last stage runs to the end)."""
    spans = []
    for line, start in [(x, x["t"] - x["wall_s"]) for x in lines] + [(x, x["from_t"]) for x in stopped]:
        marks = line.get("stages_at") or []
        if not marks:
            continue
        ends = [at for _, at in marks[1:]] + [line.get("wall_s", math.inf)]
        spans += [(line["candidate"], stage, start + at, start + end) for (stage, at), end in zip(marks, ends, strict=True)]
    return spans


def long_settles(lines: list[dict], stopped: list[dict], least: float = LONG_SETTLE_S) -> list[dict]:
    """Each settle of ``least`` seconds or more, with the candidates in a shared GPU stage when it began (issue 46: one
    candidate's kernels, queued before it was stopped, kept the GPU busy for 12-14 s after each of its calls)."""
    spans, found = _spans(lines, stopped), []
    for candidate, stage, start, end in spans:
        if stage != "settle" or end - start < least:
            continue
        beside = sorted({c for c, st, a, b in spans if st in SHARED_GPU_STAGES and c != candidate and a <= start < b})
        found.append({"candidate": candidate, "from_t": round(start, 1), "seconds": round(end - start, 1), "beside": beside})
    return sorted(found, key=lambda x: x["from_t"])


def settle_busy(lines: list[dict], stopped: list[dict]) -> list[dict]:
    """Each settle of a second or more that NVML saw (``extra.settle_busy``): whose processes kept the GPU busy, a
    judge's runner named by its candidate (the supervisor's pid names the runner's cgroup: judge/nvml.py)."""
    by_pid = {str(x["supervisor_pid"]): x["candidate"] for x in [*lines, *stopped] if x.get("supervisor_pid")}

    def name(owner: str) -> str:
        supervisor, _, side = owner.partition("-")
        return f"{by_pid[supervisor]} ({side})" if supervisor in by_pid else owner

    found = []
    for line in lines:
        for note in line.get("settle_busy") or []:
            found.append({"candidate": line["candidate"], "s": note["s"], "by": {name(k): n for k, n in note["by"].items()}})
    return found


def judged_again(pairs: list, before: dict | None) -> list:
    """The alone phase's candidates: those the phase before judged, in the order it judged them (all without one)."""
    if not (before or {}).get("results"):
        return pairs
    by_label = {c.label: (problem, c, kind) for problem, c, kind in pairs}
    return [by_label[r["candidate"]] for r in sorted(before["results"], key=lambda r: r["t"]) if r["candidate"] in by_label]


def agreement(before: dict, alone: dict) -> dict:
    """How the candidates judged alone compare with the same candidates in ``before``: outcomes kept, and the speedups
    that both print (correct both times) within 5% and 10% of each other; the widest five by their ratio."""
    then = {r["candidate"]: r for r in before.get("results") or []}
    pairs = [(then[r["candidate"]], r) for r in alone.get("results") or [] if r["candidate"] in then]
    differ = [f"{a['candidate']}: {a['outcome']} then, {b['outcome']} alone" for a, b in pairs if a["outcome"] != b["outcome"]]
    ratios = sorted(((b["speedup"] / a["speedup"], a["candidate"], a["speedup"], b["speedup"]) for a, b in pairs
                     if a["outcome"] == b["outcome"] == "correct" and a["speedup"] and b["speedup"]),
                    key=lambda x: -abs(math.log(x[0])))  # fmt: skip
    return {"compared": len(pairs), "same_outcome": len(pairs) - len(differ), "outcome_differs": differ,
            "speedups": len(ratios), "within_5pct": sum(abs(r - 1) <= 0.05 for r, *_ in ratios),
            "within_10pct": sum(abs(r - 1) <= 0.10 for r, *_ in ratios),
            "widest": [{"candidate": c, "then": round(x, 3), "alone": round(y, 3), "ratio": round(r, 3)}
                       for r, c, x, y in ratios[:5]]}  # fmt: skip


def phase_row(lines: list[dict], wall: float, cpu_busy: float, busy_jiffies: float, sampler: Sampler) -> dict:
    """The phase's figures from its judged lines: rate, outcomes, where the time went."""
    n, stage = len(lines) or 1, _stage
    return {
        "candidates": len(lines),
        "wall_s": round(wall, 1),
        "per_hour": round(len(lines) * 3600 / wall),
        "correct": sum(line["correct"] for line in lines),
        "outcomes": dict(sorted(collections.Counter(line["outcome"] for line in lines).items())),
        "cached_builds": sum(line["build_cached"] for line in lines),
        "judge_gpu_stage_fraction": round(sum(stage(x, s) for x in lines for s in GPU_STAGES) / wall, 3),
        "locked_stage_fraction": round(sum(stage(x, s) for x in lines for s in LOCKED_STAGES) / wall, 3),
        "cpu_busy_fraction": round(cpu_busy, 3),
        "nvidia_smi_busy_fraction": None if sampler.busy is None else round(sampler.busy, 3),
        f"cpu_busy_per_{CPU_WINDOW_S:.0f}s": sampler.cpu_timeline,  # where in the run the cores sat idle
        f"gpu_busy_per_{CPU_WINDOW_S:.0f}s": sampler.gpu_timeline or None,  # and the GPU (nvidia-smi's samples)
        "stepped_aside": sum(line["stepped_aside"] for line in lines),  # shared calls stopped for a timer
        "reference_shared": sum(line["reference_shared"] for line in lines),  # first calls shared, the footprint remembered
        "settle_gave_way": sum(line["settle_gave_way"] for line in lines),  # a busy GPU: the time phase gave the lock back
        # --inputs varied: per variant, the candidates it was checked on and those it was dropped for (the reference's fault)
        "input_variants": _variant_counts(lines),
        # seconds the device lock was held, summed per phase: the exclusive ones (reference, time) against the wall
        "lock_held_s": _summed(lines, "lock_held_s"),
        "split_s": _summed(lines, "split_s"),  # parts of the exclusive phases (Findings.split)
        # where the cores went: the machine's busy seconds, the judges' process trees (and the pool's build steps, added)
        "cpu_s": {"machine": round(busy_jiffies / os.sysconf("SC_CLK_TCK"), 1), "judges": _summed(lines, "cpu_s")},
        # where the candidates' seconds went, summed: their judges' wall against its compile stage (a cold build, or
        # waiting on the pool's), the device lock held, waiting for it, and the rest (start, reference, imports, ...)
        "time_s": time_split(lines),
        "slowest": [{k: x[k] for k in ("candidate", "kind", "outcome", "wall_s", "stage_s")}
                    for x in sorted(lines, key=lambda x: -x["wall_s"])[:5]],  # fmt: skip
        "pairs_of_runners": sum(line["pairs"] for line in lines),  # more than one a candidate: near parity (another_pair)
        "checked_of_timed_calls": [sum(int(line[k] or 0) for line in lines) for k in ("checked_calls", "timed_calls")],
        "median_compile_stage_s": round(sorted(stage(x, "compile") for x in lines)[len(lines) // 2], 2) if lines else None,
        "speedups": [round(x["speedup"], 3) if x["speedup"] else None for x in lines],
        "not_correct": [f"{x['candidate']}: {x['outcome']}: {x.get('message', '')[:300]}" for x in lines if not x["correct"]],
        "median_stage_s": {k: round(statistics.median(stage(x, k) for x in lines), 3) if lines else None
                           for k in ("start", "reference", "compile", "init", "run", "compare", "trace", "time", "recheck", "wait_lock",
                                     "stepped_aside", "settle")},  # fmt: skip
        "mean_wall_s": round(sum(x["wall_s"] for x in lines) / n, 1),
    }


def _variant_counts(lines: list[dict]) -> dict[str, dict[str, int]]:
    counts: dict[str, collections.Counter] = {"checked": collections.Counter(), "dropped": collections.Counter()}
    for line in lines:
        found = line.get("input_variants") or {}
        counts["checked"].update(found.get("checked") or [])
        counts["dropped"].update(found.get("dropped") or {})
    return {k: dict(sorted(v.items())) for k, v in counts.items()}


def time_split(lines: list[dict]) -> dict[str, float]:
    """The judges' wall seconds summed over the candidates, and the parts of it: compile stage, device lock held,
    waiting for the lock, the rest."""
    wall = sum(x["wall_s"] for x in lines)
    parts = {"compile_stage": sum(x["stage_s"].get("compile", 0.0) for x in lines),
             "lock_held": sum(sum(x["lock_held_s"].values()) for x in lines),
             "wait_lock": sum(x["stage_s"].get("wait_lock", 0.0) for x in lines)}  # fmt: skip
    return {"judge_wall": round(wall, 1), **{k: round(v, 1) for k, v in parts.items()}, "rest": round(wall - sum(parts.values()), 1)}


def _pairs_timed(result) -> int:
    """How many pairs of runner processes timed this result (stats.another_pair): 0 where it was not timed."""
    if not result.ref:
        return 0
    return len(result.extra.process_pairs or [None])


def by_kind(lines: list[dict]) -> dict[str, dict]:
    out: dict[str, list[dict]] = {}
    for line in lines:
        out.setdefault(line["kind"], []).append(line)
    return {kind: {"candidates": len(xs), "correct": sum(x["correct"] for x in xs),
                   "median_stage_s": {k: round(statistics.median(x["stage_s"].get(k, 0.0) for x in xs), 3)
                                      for k in ("compile", "init", "run", "time", "wait_lock")}}
            for kind, xs in sorted(out.items())}  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--corpus", default="synthetic",
                        help="synthetic: variants of one kernel (below); level3: benchmarks/corpus/level3; "
                             "level1-cuda / level1-triton: --count sources from benchmarks/corpus/synthetic.py; "
                             "DIR: a --solutions folder (DIR/level<N>/<id>_<Name>.py), or a folder of them")  # fmt: skip
    parser.add_argument("--dataset", action="append", default=None,
                        help=f"KernelBench problems for --corpus level3/level1-*/DIR (a problems.jsonl, a folder of them, a checkout); "
                             f"default ${{KERNELBENCH_DATASET}} or {DEFAULT_DATASET}")  # fmt: skip
    parser.add_argument("--count", type=int, default=None, help="candidates (default 16; --corpus level3/DIR: all of its files)")
    parser.add_argument("--build-jobs", type=int, default=16, help="a build pool of this many per session (0: none)")
    parser.add_argument("--serial-count", type=int, default=2)
    parser.add_argument("--judges", type=int, default=4, help="evaluations at once in the pipeline phases, per session (as pytest -n)")
    parser.add_argument("--sessions", type=int, default=1,
                        help="independent judge sessions at once in the pipeline phases (as separate pytest runs on one machine: "
                             "each its own process, build pool and --judges; the lock, build cache and PCH folders shared)")  # fmt: skip
    parser.add_argument("--deadline", type=float, default=0.0,
                        help="seconds: stop the run then (judges in flight are stopped and left out, the phase row written "
                             "from those judged, later phases skipped); 0: none")  # fmt: skip
    parser.add_argument("--phases", default="pipeline,warm,serial")
    parser.add_argument("--phase-seconds", type=float, default=0.0,
                        help="seconds: stop each phase this long after its start, as --deadline stops the run (e.g. a cold "
                             "pipeline cut at 330 s, then the alone phase until the deadline); 0: none")  # fmt: skip
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--inputs", choices=INPUTS, default=None,
                        help="the judge's --inputs (default: the judge's): the correctness trials' distributions (each line "
                             "records the variants checked)")  # fmt: skip
    parser.add_argument("--timer", choices=TIMERS, default=EvalConfig.timer,
                        help="the judge's --timer (round: a round's calls timed together)")
    parser.add_argument("--min-reps", type=int, default=0,
                        help="timing samples of each side at least (EvalConfig.min_reps; 0: the judge's default)")
    parser.add_argument("--max-time", type=float, default=EvalConfig.max_time,
                        help="seconds of timing per candidate (EvalConfig.max_time; 0: the judge's default, 3 on a GPU)")
    parser.add_argument("--problems", default="",
                        help="--corpus level3/level1-*/DIR: only candidates for these problem ids (19,47 or 19-26)")  # fmt: skip
    parser.add_argument("--process-pairs", type=int, default=0,
                        help="the judge's --kb-process-pairs (0: its default; 1: one pair, never a second near parity)")
    parser.add_argument("--samples", action="store_true", help="each judged line also holds both sides' timing samples")
    parser.add_argument("--out", type=Path, default=Path("throughput-out"))
    parser.add_argument("--kernel", choices=("mini", "light"), default="mini",
                        help="CUDA candidates: the bundled solution, or it with a .cu that includes only the headers it uses")  # fmt: skip
    parser.add_argument("--build-pch", default="fresh",
                        help="shared precompiled header folder: fresh (an empty one: the run builds it), DIR, or off")  # fmt: skip
    for hidden in ("--session", "--scratch", "--session-cache", "--stop-at", "--phase-start"):  # a session's process (run_sessions)
        parser.add_argument(hidden, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    bad = [f"--{k.replace('_', '-')} {getattr(args, k)}: must be 1 or more" for k in ("judges", "sessions") if getattr(args, k) < 1]
    bad += [f"--phases: unknown phase {p!r}: choose from {', '.join(PHASES)}" for p in args.phases.split(",") if p not in PHASES]
    if args.corpus not in CORPORA and not Path(args.corpus).is_dir():
        bad.append(f"--corpus {args.corpus}: no such folder; pass {', '.join(CORPORA)} or a folder of solution files")
    if args.corpus in CORPORA[1:] and args.device != "cuda":
        bad.append(f"--corpus {args.corpus} holds GPU candidates (CUDA, Triton): use --device cuda")
    if bad:
        parser.error(bad[0])
    return args


def load_pairs(args: argparse.Namespace, quiet: bool) -> list[tuple[Problem, Candidate, str]]:
    """The run's (problem, candidate, kind)s; for a folder, a line for each file no problem claims."""
    if args.corpus == "synthetic":
        problem = problem_from_path(PROBLEM)
        return [(problem, c, "cuda" if args.device == "cuda" else "cpp") for c in variants(args.device, args.count or 16, args.kernel)]
    datasets = dataset_specs(args.dataset) or [DEFAULT_DATASET]  # --dataset, else $KERNELBENCH_DATASET, else the default
    try:  # the syntax of pytest's --problems: ids and inclusive ranges
        selection = parse_id_ranges(args.problems)
        only = set(selection.ids) if selection else None
        if args.corpus in CORPORA:
            return corpus_pairs(args.corpus, datasets, args.count, only)
        found = folder_pairs(Path(args.corpus), datasets, args.device)
    except KernelBenchUsageError as exc:
        raise SystemExit(f"error: {exc}") from None
    for path in [] if quiet else found.unmatched:
        print(f"unmatched: {path}: no problem of {', '.join(datasets)} claims it for --device {args.device} "
              f"(--solutions names: <level folder>/<problem name>[.{args.device}].py)")
    pairs = [pck for pck in found.pairs if only is None or pck[0].problem_id in only][: args.count]
    if not pairs:
        raise SystemExit(f"error: --corpus {args.corpus}: no file matched a problem of {', '.join(datasets)} "
                         f"(--problems {args.problems or 'all'}); name the --dataset holding its problems")  # fmt: skip
    shared = len(pairs) - len({c.source_hash for _, c, _ in pairs})
    if shared and not quiet:
        print(f"note: {shared} candidates share their source with another: their builds are shared, not cold")
    if not quiet:
        print(f"corpus {args.corpus}: {len(pairs)} candidates from {len(found.roots)} folder(s), {len(found.unmatched)} unmatched")
    return pairs


def make_config(args: argparse.Namespace, scratch: Path, cache: str) -> EvalConfig:
    pch = str(scratch / "pch") if args.build_pch == "fresh" else args.build_pch
    return EvalConfig(device=args.device, trials=args.trials, min_reps=args.min_reps, max_time=args.max_time,
                      build_dir=str(scratch / cache), lock_dir=str(scratch / "locks"), pch_dir=pch,
                      process_pairs=args.process_pairs, timer=args.timer,
                      **({"inputs": args.inputs} if args.inputs else {}))  # fmt: skip


def session_main(args: argparse.Namespace, pairs: list) -> None:
    """One of :func:`run_sessions`' processes: every N-th candidate, its lines on stdout, then its build seconds and cut."""
    k, n = (int(x) for x in args.session.split("/"))
    stop = threading.Event()
    timer = threading.Timer(max(float(args.stop_at) - time.time(), 0.0), stop.set) if float(args.stop_at) < math.inf else None
    if timer:
        timer.start()
    config = make_config(args, Path(args.scratch), args.session_cache)
    _, build_cpu, cut, end = judge_pairs(pairs[k::n], config, args.build_jobs, args.judges, stop, float(args.phase_start),
                                         samples=args.samples)  # fmt: skip
    if timer:
        timer.cancel()
    print("session-end " + json.dumps({"build_cpu_s": build_cpu, "cut": cut, "end": end}), flush=True)


def main() -> None:
    args = parse_args()
    pairs = load_pairs(args, quiet=bool(args.session))
    if args.session:
        session_main(args, pairs)
        return
    run_stop = time.time() + args.deadline if args.deadline > 0 else math.inf
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="kb-throughput-"))
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"), "corpus": args.corpus,
           "candidates": len(pairs), "args": vars(args) | {"out": str(args.out)}, "phases": [], "skipped_phases": []}  # fmt: skip
    judged = {"judges": args.judges, "corpus": args.corpus, "samples": args.samples}
    for phase in args.phases.split(","):
        if time.time() >= run_stop:
            doc["skipped_phases"].append(phase)
            continue
        judged["stop_at"] = min(run_stop, time.time() + args.phase_seconds) if args.phase_seconds > 0 else run_stop
        sessions = (args.sessions, sys.argv[1:], "pipeline", scratch)
        if phase == "pipeline":
            row = run_phase("pipeline (cold)", pairs, make_config(args, scratch, "pipeline"), args.build_jobs, args.device, **judged,
                            sessions=sessions)  # fmt: skip
        elif phase == "warm":
            row = run_phase("pipeline (warm cache)", pairs, make_config(args, scratch, "pipeline"), args.build_jobs, args.device, **judged,
                            sessions=sessions)  # fmt: skip
        elif phase == "alone":
            before = doc["phases"][-1] if doc["phases"] else None
            row = run_phase("alone (warm cache)", judged_again(pairs, before), make_config(args, scratch, "pipeline"), 0, args.device,
                            **(judged | {"judges": 1}))  # fmt: skip
            row["against"] = agreement(before, row) if (before or {}).get("results") else None
        else:
            row = run_phase("serial (cold)", pairs[: args.serial_count], make_config(args, scratch, "serial"), 0, args.device,
                            **(judged | {"judges": 1}))  # fmt: skip
        doc["phases"].append(row)
        (args.out / "throughput.json").write_text(json.dumps(doc, indent=1))
    (args.out / "throughput.json").write_text(json.dumps(doc, indent=1))
    text = tables(doc)
    (args.out / "throughput.md").write_text(text)
    print("\n" + text)


def tables(doc: dict) -> str:
    """The phases, where their time went, and (for a realistic corpus) each candidate, as Markdown."""
    head = ("phase", "judged", "sessions x judges", "build jobs", "PCH", "wall s", "per hour", "outcomes", "cached", "GPU busy (smi)",
            "GPU stages / wall", "cut off")  # fmt: skip
    out = [f"corpus: {doc['corpus']}, {doc['candidates']} candidates, {doc['date']}", ""]
    out += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in doc["phases"]:
        busy = "-" if r["nvidia_smi_busy_fraction"] is None else f"{r['nvidia_smi_busy_fraction']:.0%}"
        outcomes = ", ".join(f"{k} {v}" for k, v in r["outcomes"].items())
        out.append(f"| {r['phase']} | {r['candidates']} | {r['sessions']} x {r['judges']} | {r['build_jobs']} | "
                   f"{r['pch']} {r['pch_events']} | "
                   f"{r['wall_s']} | {r['per_hour']} | {outcomes} | {r['cached_builds']} | {busy} | {r['judge_gpu_stage_fraction']:.0%} | "
                   f"{len(r['cut_off'])} |")  # fmt: skip
    for r in doc["phases"]:
        if r.get("against"):
            a = r["against"]
            out += ["", f"{r['phase']} against the phase before: {a['same_outcome']} of {a['compared']} kept their outcome "
                        f"{a['outcome_differs'] or ''}; of {a['speedups']} speedups both printed, {a['within_5pct']} within 5%, "
                        f"{a['within_10pct']} within 10%; widest: {a['widest'][:3]}"]  # fmt: skip
    parts = ("judge_wall", "compile_stage", "lock_held", "wait_lock", "rest")
    out += ["", "judges' seconds, summed over the candidates:", "", "| phase | " + " | ".join(parts) + " | lock held by phase |",
            "|" + " --- |" * (len(parts) + 2)]  # fmt: skip
    for r in doc["phases"]:
        out.append(f"| {r['phase']} | " + " | ".join(str(r["time_s"][k]) for k in parts) + f" | {r['lock_held_s']} |")
    for r in doc["phases"]:
        if r.get("results"):
            out += ["", f"{r['phase']}, by candidate (slowest first):", "",
                    "| candidate | kind | outcome | speedup | wall s | compile s | lock held s | wait lock s |", "|" + " --- |" * 8]
            for x in sorted(r["results"], key=lambda x: -x["wall_s"]):
                held = round(sum(x["lock_held_s"].values()), 2)
                out.append(f"| {x['candidate']} | {x['kind']} | {x['outcome']} | {x['speedup'] or '-'} | {x['wall_s']} | "
                           f"{x['stage_s'].get('compile', 0)} | {held} | {x['stage_s'].get('wait_lock', 0)} |")  # fmt: skip
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
