"""Does where a call's buffers sit in device memory move its time? (a GPU experiment, no judge)

A reference judged against itself on the H100 keeps offsets of 2-3% a whole evaluation long (``33_BatchNorm`` 9.07
against 9.37 ms in every round): each side is its own process, with its own input buffer and its own output blocks.
This script times the same problem in several fresh processes, one after the other; each process keeps ``P`` input
copies and ``P`` output blocks (each output is kept alive for ``P - 1`` calls, so the caching allocator cycles
through ``P`` blocks) and times its calls cycling through them. From the per-placement medians it reports

* within a process: how far the placements' medians lie apart (max / min);
* between processes: the spread of one placement's median (what one side of an evaluation sees today) and of the
  mean over ``P`` placements (what a side would see if it rotated its buffers).

    python3 benchmarks/experiments/gpu_placement.py --dataset KB/problems.jsonl --problems 33,34,61 --processes 6 --out F.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_kernelbench.errors import KernelBenchUsageError  # noqa: E402
from pytest_kernelbench.problems import parse_id_ranges  # noqa: E402


def problem_ids(text: str) -> list[int]:
    """The ids ``--problems`` names (pytest's syntax: ids and inclusive ranges); a one-line usage error otherwise."""
    try:
        selection = parse_id_ranges(text)
    except KernelBenchUsageError as exc:
        sys.exit(f"error: {exc}")
    if not selection or not selection.ids:
        sys.exit("error: --problems: give the ids to time, e.g. --problems 33,34")
    return sorted(selection.ids)


def references(dataset: str, level: str, ids: list[int]) -> list[dict]:
    """Each KernelBench reference of ``ids`` (in that order) executed into a namespace of its own, its name under "name"."""
    from pytest_kernelbench.problems import load_jsonl

    problems = {p.problem_id: p for p in load_jsonl(Path(dataset)) if p.level == level and p.problem_id in ids}
    found = []
    for pid in ids:
        ns: dict = {"name": problems[pid].name}
        exec(compile(problems[pid].source, problems[pid].name, "exec"), ns)  # noqa: S102 - a KernelBench reference
        found.append(ns)
    return found


def padded_sizes(values: list) -> list[int]:
    """Each value's bytes in a side's shared input buffer, rounded up as the judge places them (0: not a tensor)."""
    from pytest_kernelbench.judge.supervisor.plan import BUFFER_ALIGN

    return [-(-v.numel() * v.element_size() // BUFFER_ALIGN) * BUFFER_ALIGN if hasattr(v, "data_ptr") else 0 for v in values]


def _in_buffer(values: list, dev, keep: list, align: int = 0, pad: int = 0) -> list:
    """``values``' tensors copied into one VMM buffer, laid out as the judge lays out a side's inputs (``--vmm``);
    ``align``, ``pad``: its mapping's address alignment and size rounding (``SharedBuffer.create``)."""
    from pytest_kernelbench.judge.transport import SharedBuffer

    buf = SharedBuffer.create(sum(padded_sizes(values)), dev, align=align, pad=pad)
    keep.append(buf)
    return [w.copy_(v) if hasattr(v, "data_ptr") else v for w, v in zip(views_in(buf, values), values, strict=True)]


def views_in(buf, values: list, start: int = 0) -> list:
    """Views of ``buf`` shaped as ``values``' tensors, each at its place in a side's input buffer laid out from byte
    ``start`` (others as they are)."""
    views, at = [], start
    for v, n in zip(values, padded_sizes(values), strict=True):
        views.append(buf.view(v.dtype, list(v.shape), offset=at) if hasattr(v, "data_ptr") else v)
        at += n
    return views


def child(dataset: str, level: str, ids: list[int], placements: int, calls: int, warm: int, vmm: bool) -> dict:
    import torch

    torch.manual_seed(0)
    dev = torch.device("cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size // 4, dtype=torch.int32, device=dev)
    found = {}
    for ns in references(dataset, level, ids):
        model = ns["Model"](*ns["get_init_inputs"]()).to(dev).eval()
        with dev:  # inputs made on the device, as the judge makes them
            base = [v.to(dev) if isinstance(v, torch.Tensor) else v for v in ns["get_inputs"]()]
        with torch.no_grad():
            out = model(*base)
        per = sum(v.numel() * v.element_size() for v in base if isinstance(v, torch.Tensor)) + out.numel() * out.element_size()
        del out
        free, _ = torch.cuda.mem_get_info(dev)
        p = max(1, min(placements, int(0.6 * free // max(per, 1))))
        buffers: list = []
        if vmm:
            sets = [_in_buffer(base, dev, buffers) for _ in range(p)]
        else:
            sets = [base] + [[v.clone() if isinstance(v, torch.Tensor) else v for v in base] for _ in range(p - 1)]
        times: list[list[float]] = [[] for _ in range(p)]
        kept: deque = deque(maxlen=p - 1)  # each output lives p - 1 more calls (p = 1: none, the block reused)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            for c in range((warm + calls) * p):
                i = c % p
                flush.zero_()
                torch.cuda.synchronize(dev)
                begin.record()
                out = model(*sets[i])
                end.record()
                torch.cuda.synchronize(dev)
                if c >= warm * p:
                    times[i].append(begin.elapsed_time(end))
                kept.append(out)
                del out
        ptrs = [hex(s[0].data_ptr() % (2 << 20)) for s in sets if isinstance(s[0], torch.Tensor)]
        medians = [statistics.median(t) for t in times]
        found[ns["name"]] = {"placements": p, "medians": medians, "times": times, "in_ptr_mod_2mb": ptrs}
        del sets, base, model, kept, buffers
        torch.cuda.empty_cache()
    return found


def summary(runs: list[dict]) -> dict:
    out = {}
    for name in runs[0]:
        rows = [r[name] for r in runs]
        first = [math.log(r["medians"][0]) for r in rows]
        mean = [statistics.fmean(math.log(m) for m in r["medians"]) for r in rows]
        within = [max(r["medians"]) / min(r["medians"]) for r in rows]
        out[name] = {
            "placements": rows[0]["placements"],
            "within_max_over_min_median": round(statistics.median(within), 4),
            "within_max_over_min_max": round(max(within), 4),
            "between_one_placement_sd": round(statistics.stdev(first), 4),
            "between_one_placement_range": round(math.exp(max(first) - min(first)), 4),
            "between_mean_of_placements_sd": round(statistics.stdev(mean), 4),
            "between_mean_of_placements_range": round(math.exp(max(mean) - min(mean)), 4),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--level", default="1")
    ap.add_argument("--problems", default="33,34,61")
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--placements", type=int, default=4)
    ap.add_argument("--calls", type=int, default=12, help="timed calls per placement")
    ap.add_argument("--warm", type=int, default=2, help="untimed calls per placement first")
    ap.add_argument("--vmm", action="store_true", help="inputs in VMM buffers as the judge places them (else the caching allocator)")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    ids = problem_ids(a.problems)
    if a.child:
        print(json.dumps(child(a.dataset, a.level, ids, a.placements, a.calls, a.warm, a.vmm)))
        return
    runs = []
    for k in range(a.processes):
        argv = [sys.executable, __file__, "--child", "--dataset", a.dataset, "--level", a.level, "--problems", a.problems,
                "--placements", str(a.placements), "--calls", str(a.calls), "--warm", str(a.warm)] + ["--vmm"] * a.vmm  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"process {k} failed: {done.stderr.strip().splitlines()[-1:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {k}: " + ", ".join(f"{n} {[round(m, 3) for m in r['medians']]}" for n, r in runs[-1].items()), flush=True)
    table = summary(runs)
    for name, row in table.items():
        print(name, json.dumps(row))
    if a.out:
        Path(a.out).write_text(json.dumps({"vmm": a.vmm, "placements": a.placements, "summary": table, "runs": runs}) + "\n")


if __name__ == "__main__":
    main()
