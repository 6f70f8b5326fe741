"""Does a shared input buffer's mapping move a call's time? (a GPU experiment, no judge)

A judge's runner lands on a fast or a slow level for a whole evaluation (nineteenth session, H100: ``L1-33`` 8.9
against 9.5 ms, either side), while two plain processes with their own allocations did not. The judge's runners read
their inputs from VMM buffers (``transport.SharedBuffer``), mapped at whatever virtual address the driver reserves,
2 MB aligned; a plain process's big ``cudaMalloc`` may sit on larger, aligned pages. Here one fresh process a run
makes ``--copies`` input sets of each layout below (in turn, so that the layouts interleave in memory), then times
calls cycling through every set, L2 flushed before each call as the judge's runner does, the model as KernelBench
builds it (training mode):

* ``own``: the caching allocator's copies (a plain process);
* ``vmm``: a SharedBuffer as the judge makes it today;
* ``vmm-a<N>``: the same with its virtual address aligned to N MiB (``--aligns``);
* ``vmm-a<N>p``: aligned, and its size rounded up to N MiB too.

``--fragment G`` first fills G GiB with 2 MiB VMM allocations and frees every other one, as other judges' phases leave
device memory. Each set's median, its address modulo 2 GiB, and per layout the spread of its sets' medians:

    python3 benchmarks/experiments/gpu_va_align.py --dataset KB/problems.jsonl --problems 33,95 --processes 3 --out F.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pytest_kernelbench.errors import KernelBenchUsageError  # noqa: E402
from pytest_kernelbench.problems import parse_id_ranges  # noqa: E402

MIB = 1 << 20


def layouts(aligns: list[int]) -> dict[str, tuple[int, int] | None]:
    """Layout name -> (VA alignment, size rounding) in bytes; None: the caching allocator."""
    out: dict[str, tuple[int, int] | None] = {"own": None, "vmm": (0, 0)}
    for a in aligns:
        out[f"vmm-a{a}"] = (a * MIB, 0)
        out[f"vmm-a{a}p"] = (a * MIB, a * MIB)
    return out


def fragment(gib: float, dev) -> list:
    """Fill ``gib`` GiB with 2 MiB VMM allocations and free every other one; the rest is kept (returned)."""
    from pytest_kernelbench.judge.transport import SharedBuffer

    chunks = [SharedBuffer.create(2 * MIB, dev) for _ in range(int(gib * 1024 / 2))]
    for c in chunks:
        c.close_fd()
    return chunks[::2]


def make_set(base: list, dev, layout: tuple[int, int] | None, keep: list) -> list:
    import torch
    from gpu_placement import _in_buffer

    if layout is None:
        return [v.clone() if isinstance(v, torch.Tensor) else v for v in base]
    views = _in_buffer(base, dev, keep, align=layout[0], pad=layout[1])
    keep[-1].close_fd()
    return views


def child(a: argparse.Namespace, ids: list[int]) -> dict:
    import torch

    from pytest_kernelbench.problems import load_jsonl

    problems = {p.problem_id: p for p in load_jsonl(Path(a.dataset)) if p.level == a.level and p.problem_id in ids}
    dev = torch.device("cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size // 4, dtype=torch.int32, device=dev)
    kept_chunks = fragment(a.fragment, dev) if a.fragment else []
    found = {}
    for pid in ids:
        ns: dict = {}
        exec(compile(problems[pid].source, problems[pid].name, "exec"), ns)  # noqa: S102 - a KernelBench reference
        torch.manual_seed(0)
        model = ns["Model"](*ns["get_init_inputs"]()).to(dev)  # training mode, as KernelBench and the judge build it
        with dev:
            base = [v.to(dev) if isinstance(v, torch.Tensor) else v for v in ns["get_inputs"]()]
        per = sum(v.numel() * v.element_size() for v in base if isinstance(v, torch.Tensor))
        kinds = layouts(a.aligns)
        free, _ = torch.cuda.mem_get_info(dev)
        copies = max(1, min(a.copies, int(0.5 * free // max(per, 1) // len(kinds))))
        keep: list = []
        sets = [(name, k, make_set(base, dev, lay, keep)) for k in range(copies) for name, lay in kinds.items()]
        times: list[list[float]] = [[] for _ in sets]
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            for c in range((a.warm + a.calls) * len(sets)):
                i = c % len(sets)
                flush.zero_()
                torch.cuda.synchronize(dev)
                begin.record()
                out = model(*sets[i][2])
                end.record()
                torch.cuda.synchronize(dev)
                if c >= a.warm * len(sets):
                    times[i].append(begin.elapsed_time(end))
                del out
        rows = [{"layout": name, "copy": k, "median": statistics.median(t), "va_mod_2g_mib": s[0].data_ptr() % (2 << 30) // MIB}
                for (name, k, s), t in zip(sets, times, strict=True)]  # fmt: skip
        found[problems[pid].name] = {"copies": copies, "sets": rows}
        del sets, base, model, keep
        torch.cuda.empty_cache()
    del kept_chunks
    return found


def summary(runs: list[dict]) -> dict:
    """Per problem and layout: every set's median over all processes, their spread (max/min) and mean."""
    out: dict = {}
    for name in runs[0]:
        by: dict[str, list[float]] = {}
        for r in runs:
            for row in r[name]["sets"]:
                by.setdefault(row["layout"], []).append(row["median"])
        out[name] = {lay: {"sets": len(ms), "mean_ms": round(statistics.fmean(ms), 4), "max_over_min": round(max(ms) / min(ms), 4)}
                     for lay, ms in by.items()}  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--level", default="1")
    ap.add_argument("--problems", default="33")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--copies", type=int, default=3, help="input sets of each layout a process")
    ap.add_argument("--aligns", default="2048", help="VA alignments to try, MiB, comma-separated")
    ap.add_argument("--fragment", type=float, default=0.0, help="GiB of device memory to fragment first")
    ap.add_argument("--calls", type=int, default=10, help="timed calls a set")
    ap.add_argument("--warm", type=int, default=2, help="untimed calls a set first")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    try:
        selection = parse_id_ranges(a.problems)
        a.aligns = [int(x) for x in a.aligns.split(",") if x]
    except (KernelBenchUsageError, ValueError) as exc:
        sys.exit(f"error: {exc} (--problems takes ids and ranges, --aligns MiB numbers)")
    ids = sorted(selection.ids) if selection else []
    if a.child:
        print(json.dumps(child(a, ids)))
        return
    runs = []
    for k in range(a.processes):
        argv = [sys.executable, __file__, "--child"] + [x for x in sys.argv[1:] if x != "--child"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"process {k} failed: {done.stderr.strip().splitlines()[-3:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        for name, r in runs[-1].items():
            print(f"process {k} {name}: " + ", ".join(f"{s['layout']}#{s['copy']} {s['median']:.3f}@{s['va_mod_2g_mib']}"
                                                      for s in r["sets"]), flush=True)  # fmt: skip
    table = summary(runs)
    for name, row in table.items():
        print(name, json.dumps(row))
    if a.out:
        Path(a.out).write_text(json.dumps({"args": {k: v for k, v in vars(a).items() if k != "child"}, "summary": table,
                                           "runs": runs}) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
