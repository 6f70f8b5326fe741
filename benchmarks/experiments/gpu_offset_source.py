"""Does a reference judged against itself lean with its runner processes or with its input buffers? (a GPU experiment)

On the H100 a reference judged against itself sometimes leans a few percent one way in every round of an evaluation
(``L1-33_BatchNorm`` 1.0577 in one evaluation, 0.9519 in two pairs of another), and a fresh pair of runners of the same
evaluation often leans the same way (correlation 0.37 between the first two pairs over 112 recorded evaluations). The
pairs of one evaluation share the supervisor and the input buffers it makes for each side; the runner processes are
new. This script separates the two. A parent (the supervisor's part) makes two VMM input buffers as the judge makes a
side's (``SharedBuffer``), and starts two runner processes that map both. Each "evaluation" times three phases of
interleaved rounds (fresh inputs every round, the same in both buffers; the order of the two calls alternates; L2
flushed before each call; both runners bound to one core, as in the judge's timing phase):

* A: runner 1 reads buffer 1, runner 2 buffer 2;
* B: the same runners, buffers swapped;
* C: two new runner processes, buffers as in A.

With ``a``, ``b``, ``c`` the log ratios (first runner's median / second's) of the phases: an offset that belongs to the
processes gives ``b = a`` and ``c`` unrelated to ``a``; one that belongs to the buffers gives ``b = -a`` and ``c = a``.

    python3 benchmarks/experiments/gpu_offset_source.py --dataset KB/problems.jsonl --problems 33,34 --evaluations 8 --out F.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.experiments.gpu_input_offset import timed_call  # noqa: E402
from benchmarks.experiments.gpu_placement import padded_sizes, problem_ids, references, views_in  # noqa: E402


def child(dataset: str, level: str, pid: int, fds: list[int], nbytes: int, core: int) -> None:
    """A runner: maps the two buffers, then answers ``call B OFFSET`` (milliseconds of one call on the inputs at OFFSET
    bytes in buffer B)."""
    import torch

    from pytest_kernelbench.judge.transport import SharedBuffer

    os.sched_setaffinity(0, {core})
    [ns] = references(dataset, level, [pid])
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]()).to(dev)
    with dev:
        made = ns["get_inputs"]()  # on the device, then freed: the output reuses its block, as before
    shapes = [torch.empty(v.shape, dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor) else v for v in made]
    del made
    buffers = [SharedBuffer.open(fd, nbytes, dev) for fd in fds]
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size // 4, dtype=torch.int32, device=dev)
    for thread in os.listdir("/proc/self/task"):  # torch's threads too, as the judge binds a runner's whole tree
        os.sched_setaffinity(int(thread), {core})
    print("ready", flush=True)
    for line in sys.stdin:
        which, offset = (int(w) for w in line.split()[1:])
        inputs = views_in(buffers[which], shapes, start=offset)
        with torch.no_grad():
            ms, out = timed_call(model, inputs, flush, dev)
        del out, inputs
        print(f"{ms:.5f}", flush=True)


class Runner:
    def __init__(self, argv: list[str], fds: list[int]):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=fds)

    def ready(self) -> None:
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            sys.exit(f"a runner did not start (exit {self.proc.wait()})")

    def call(self, which: int, offset: int) -> float:
        self.proc.stdin.write(f"call {which} {offset}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def phase(runners: list[Runner], fill, rounds: int, swapped: bool, slack: int = 0) -> dict:
    """Interleaved rounds; with ``slack``, each buffer's inputs at a new random offset (2 MiB steps below it) each round."""
    times: list[list[float]] = [[], []]
    for k in range(rounds):
        at = [secrets.randbelow(max(slack >> 21, 1)) << 21 for _ in range(2)]
        fill(at)
        order = (0, 1) if k % 2 == 0 else (1, 0)
        for r in order:
            times[r].append(runners[r].call(r ^ swapped, at[r ^ swapped]))
    med = [statistics.median(t[2:]) for t in times]  # two untimed rounds first
    per_round = [math.log(a / b) for a, b in zip(times[0][2:], times[1][2:], strict=True)]
    return {"medians": med, "log_ratio": math.log(med[0] / med[1]), "round_sd": statistics.stdev(per_round),
            "times": times}  # fmt: skip


def evaluation(a: argparse.Namespace, pid: int, ns: dict) -> dict:
    import torch

    from pytest_kernelbench.judge.transport import SharedBuffer

    dev = torch.device("cuda")
    with dev:
        shapes = list(ns["get_inputs"]())
    nbytes = sum(padded_sizes(shapes)) + a.slack
    buffers = [SharedBuffer.create(nbytes, dev) for _ in range(2)]
    fds = [b.fd for b in buffers]

    def fill(at: list[int]) -> None:
        with dev:
            values = ns["get_inputs"]()
        for b, o in zip(buffers, at, strict=True):
            for w, v in zip(views_in(b, values, start=o), values, strict=True):
                if hasattr(w, "copy_"):
                    w.copy_(v)
        torch.cuda.synchronize(dev)

    def start() -> list[Runner]:
        argv = [sys.executable, __file__, "--child", "--dataset", a.dataset, "--level", a.level, "--problems", str(pid),
                "--fds", ",".join(map(str, fds)), "--nbytes", str(nbytes), "--core", str(a.core)]  # fmt: skip
        runners = [Runner(argv, fds) for _ in range(2)]
        for r in runners:
            r.ready()
        return runners

    del shapes
    runners = start()
    if a.design == "shift":  # fixed places, a new random place each round, fixed again
        found = {"A": phase(runners, fill, a.rounds, False), "S": phase(runners, fill, a.rounds, False, a.slack),
                 "A2": phase(runners, fill, a.rounds, False)}  # fmt: skip
    else:
        found = {"A": phase(runners, fill, a.rounds, False), "B": phase(runners, fill, a.rounds, True)}
        for r in runners:
            r.stop()
        runners = start()
        found["C"] = phase(runners, fill, a.rounds, False)
    for r in runners:
        r.stop()
    for b in buffers:
        b.close_fd()
    buffers.clear()
    torch.cuda.empty_cache()
    return found


def summary(evals: list[dict]) -> dict:
    """Each phase's spread of the log ratio over the evaluations, and how phases agree."""
    if len(evals) < 3:
        return {"evaluations": len(evals)}
    phases = list(evals[0])
    logs = {k: [e[k]["log_ratio"] for e in evals] for k in phases}
    return {"evaluations": len(evals), **{f"sd_{k}": statistics.stdev(v) for k, v in logs.items()},
            **{f"corr_A_{k}": statistics.correlation(logs["A"], v) for k, v in logs.items() if k != "A"},
            "round_sd_median": statistics.median(e[k]["round_sd"] for e in evals for k in phases)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--level", default="1")
    ap.add_argument("--problems", default="33,34")
    ap.add_argument("--evaluations", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=24, help="rounds per phase, the first two untimed")
    ap.add_argument(
        "--design",
        choices=("swap", "shift"),
        default="swap",
        help="swap: phases A, B (buffers swapped), C (new runners); shift: A, S (inputs moved each round), A2",
    )
    ap.add_argument("--slack", type=int, default=0, help="bytes beyond the inputs in each buffer (shift: where they move)")
    ap.add_argument("--core", type=int, default=os.cpu_count() - 1, help="the core both runners are bound to")
    ap.add_argument("--out", default="")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fds", default="", help=argparse.SUPPRESS)
    ap.add_argument("--nbytes", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    ids = problem_ids(a.problems)
    if a.child:
        child(a.dataset, a.level, ids[0], [int(f) for f in a.fds.split(",")], a.nbytes, a.core)
        return
    os.sched_setaffinity(0, set(range(os.cpu_count() - 1)) - {a.core} or {0})
    found = {}
    for pid, ns in zip(ids, references(a.dataset, a.level, ids), strict=True):
        evals = []
        for k in range(a.evaluations):
            t0 = time.monotonic()
            evals.append(evaluation(a, pid, ns))
            e = evals[-1]
            ratios = " ".join(f"{k} {math.exp(v['log_ratio']):.4f}" for k, v in e.items())
            print(f"{ns['name']} eval {k}: {ratios} ({time.monotonic() - t0:.0f} s)", flush=True)
        found[ns["name"]] = {"summary": summary(evals), "evaluations": evals}
        print(ns["name"], json.dumps(found[ns["name"]]["summary"]), flush=True)
        if a.out:  # written after each problem: a run cut short keeps what it measured
            Path(a.out).write_text(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
