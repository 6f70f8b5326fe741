"""Does a call's time move with where its inputs sit relative to its output? (a GPU experiment, no judge)

``benchmarks/experiments/gpu_offset_source.py`` found a reference's lean tied to which runner reads which input buffer: fresh
runners reading the same buffers lean as the first ones did, the same runners with the buffers swapped do not. The
runners' own outputs come from their caching allocators. This script keeps one process and its output block fixed, and
moves the inputs through one VMM buffer (made as the judge makes a side's, ``SharedBuffer``): each offset is a
multiple of ``--step`` bytes; the offsets are visited round-robin, a copy of the same inputs at each, L2 flushed
before every call. Several fresh processes repeat the scan, so that a pattern of slow offsets shared by processes
(the relation between input and output addresses) can be told from one that is not.

    python3 benchmarks/experiments/gpu_input_offset.py --dataset KB/problems.jsonl --problems 33,34 --processes 2 --out F.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.experiments.gpu_placement import padded_sizes, problem_ids, references, views_in  # noqa: E402


def scan(ns: dict, offsets: list[int], rounds: int) -> dict:
    import torch

    from pytest_kernelbench.judge.transport import SharedBuffer

    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]()).to(dev)
    with dev:
        values = list(ns["get_inputs"]())
    size = sum(padded_sizes(values))
    arena = SharedBuffer.create(size + max(offsets), dev)
    arena.close_fd()
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size // 4, dtype=torch.int32, device=dev)
    times: dict[int, list[float]] = {o: [] for o in offsets}
    moved = 0
    with torch.no_grad():
        out = model(*values)  # the output block every later call reuses
        out_ptr = out.data_ptr()
        del out
        for k in range(rounds + 1):
            for o in offsets:
                views = views_in(arena, values, start=o)
                for w, v in zip(views, values, strict=True):
                    if hasattr(w, "copy_"):
                        w.copy_(v)
                ms, out = timed_call(model, views, flush, dev)
                if k:
                    times[o].append(ms)
                moved += out.data_ptr() != out_ptr
                del out
    medians = {o: statistics.median(t) for o, t in times.items()}
    return {"medians": medians, "input_base": arena.view(torch.uint8, [1]).data_ptr(), "output": out_ptr, "output_moved": moved}


def timed_call(model, inputs: list, flush, dev) -> tuple[float, object]:
    """One call's milliseconds by CUDA events, L2 flushed first (as the judge's runner times), and its output."""
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush.zero_()
    torch.cuda.synchronize(dev)
    begin.record()
    out = model(*inputs)
    end.record()
    torch.cuda.synchronize(dev)
    return begin.elapsed_time(end), out


def child(dataset: str, level: str, ids: list[int], offsets: list[int], rounds: int) -> dict:
    import torch

    found = {}
    for ns in references(dataset, level, ids):
        found[ns["name"]] = scan(ns, offsets, rounds)
        torch.cuda.empty_cache()
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--level", default="1")
    ap.add_argument("--problems", default="33,34")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--step", type=int, default=2 << 20, help="bytes between offsets")
    ap.add_argument("--offsets", type=int, default=24, help="how many offsets 0, step, 2 step, ... (then 64 MiB, 128 MiB, ... 2 GiB)")
    ap.add_argument("--rounds", type=int, default=5, help="timed calls at each offset (one untimed round first)")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    ids = problem_ids(a.problems)
    offsets = [k * a.step for k in range(a.offsets)] + [(64 << 20) << j for j in range(6)]  # and 64 MiB to 2 GiB
    if a.child:
        print(json.dumps(child(a.dataset, a.level, ids, offsets, a.rounds)))
        return
    runs = []
    for k in range(a.processes):
        argv = [sys.executable, __file__, "--child", "--dataset", a.dataset, "--level", a.level, "--problems", a.problems,
                "--step", str(a.step), "--offsets", str(a.offsets), "--rounds", str(a.rounds)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"process {k} failed: {done.stderr.strip().splitlines()[-3:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        for name, r in runs[-1].items():
            ms = list(r["medians"].values())
            print(f"process {k} {name}: {min(ms):.3f}-{max(ms):.3f} ms (max/min {max(ms) / min(ms):.4f}); by offset: "
                  + " ".join(f"{m:.2f}" for m in ms), flush=True)  # fmt: skip
        if a.out:
            Path(a.out).write_text(json.dumps({"step": a.step, "offsets": offsets, "runs": runs}) + "\n")


if __name__ == "__main__":
    main()
