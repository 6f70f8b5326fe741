"""Is the offset of a self-judged reference the processes' own, or the judge's? (an experiment without the judge)

A reference judged against itself keeps an offset a whole evaluation long (H100: 1-3%; the 2-vCPU machine: more). The
judge's two sides differ in many ways (a forked runner against a sandboxed fresh interpreter, each its own shared
buffers), and ``gpu_placement.py`` could not tell a process's own speed from the time it ran. Here two plain fresh
interpreters, started alike, each build the same model with the same weights and inputs, and the parent asks them for
one timed call each, alternating which goes first, round after round, as the judge's rounds do. Per problem it reports
the spread over ``--pairs`` such pairs of processes of the log ratio of their medians, and the same for one process asked
twice a round (the control: no process offset). If the two-process spread is well above the control's, processes
differ by themselves and no change to the judge's runners removes it (``stats.PROCESS_SD`` is what the judge does).

    python3 benchmarks/experiments/process_offset.py --dataset KB/problems.jsonl --level 1 --problems 33,34,61,95 --pairs 6 --out F.json
    python3 benchmarks/experiments/process_offset.py --problems 2,6 --device cpu --pairs 6          # the bundled CPU problems

``--buffers vmm`` puts each child's inputs in a VMM buffer it makes; ``--buffers shared`` in one this process makes,
fills and passes by descriptor, as the judge's supervisor passes a runner its inputs (nineteenth session: a judge's
runner lands on a fast or a slow level for a whole evaluation, `L1-33` 8.9 against 9.5 ms, which two plain processes
with their own allocations did not show). ``--shared-mode`` varies how: ``keep`` (this process keeps its mapping, as
the judge does), ``unmap`` (drops it once the child has mapped it), ``before`` (both buffers of a pair made before
either child starts), ``aligned`` (every mapping 2 GiB aligned), ``child`` (each child makes its buffer and this process
maps it). H100, `33_BatchNorm`, 4 pairs of 20 rounds (twentieth session,
docs/history/timing-fidelity-log.md): two processes spread 2.9-5.4% with ``keep``, 3.6% ``unmap``, 3.1% ``aligned``, and 0.17%
``before``, 0.27% ``child``, 0.34% with their own allocations. ``--layout fixed`` starts every child without
address-space randomisation and with one string-hash seed; ``--pin CORES`` binds every child to the same cores, as the
judge binds both runners of a GPU timing phase to one (``judge/cores.py``). H100, four pairs of 30 rounds, their own
allocations (twenty-first session): `12_Matmul_with_diagonal_matrices_` spread 2.8-19.7% as started, 13% with the layout
fixed, 1.0-2.6% on one core; `95_CrossEntropyLoss` 2.2-3.0%, 1.6-2.3%, 0.4-0.5%.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_kernelbench.errors import KernelBenchUsageError  # noqa: E402
from pytest_kernelbench.judge.runner import Clocks  # noqa: E402
from pytest_kernelbench.judge.stats import NOISY_Z, _half_width  # noqa: E402
from pytest_kernelbench.problems import bundled_problems_dir, load_folder, load_source, parse_id_ranges  # noqa: E402

SEED = 1234  # every child builds the same weights and inputs
ALIGN = 2 << 30  # --shared-mode aligned: each mapping's virtual address
MODES = ("keep", "unmap", "before", "aligned", "child")


def find_problem(dataset: str, level: str, pid: int):
    problems = load_source(dataset, [level]) if dataset else load_folder(bundled_problems_dir() / "mini", "mini")
    chosen = [p for p in problems if p.problem_id == pid and (not dataset or p.level == level)]
    if not chosen:
        sys.exit(f"no problem {pid} at level {level} in {dataset or 'the bundled problems'}: pass --problems ids it has")
    return chosen[0]


def load(dataset: str, level: str, pid: int) -> dict:
    """The problem's module namespace (``Model``, ``get_inputs``, ``get_init_inputs``)."""
    problem = find_problem(dataset, level, pid)
    ns: dict = {}
    exec(compile(problem.source, problem.name, "exec"), ns)  # noqa: S102 - a KernelBench reference
    return ns


def make_inputs(ns: dict, dev, seed: int) -> list:
    import torch

    torch.manual_seed(seed + 1)
    with dev:
        return [v.to(dev) if isinstance(v, torch.Tensor) else v for v in ns["get_inputs"]()]


def child(
    dataset: str, level: str, pid: int, device: str, seed: int, buffers: str = "own", fd: int = -1, nbytes: int = 0, mode: str = "keep"
) -> None:
    """Build the problem, warm up, then answer each ``t`` line on stdin with one call's milliseconds. ``buffers``: the
    inputs in this process's own allocations, in a VMM buffer it makes (``vmm``, as gpu_placement.py --vmm), or in one
    the parent made and filled and passed as ``fd`` (``shared``, as the judge's supervisor passes a runner its inputs;
    with ``mode`` ``child`` this process makes it and the parent maps it, ``aligned`` maps it 2 GiB aligned)."""
    import torch
    from gpu_placement import _in_buffer, views_in

    from pytest_kernelbench.judge.transport import SharedBuffer

    dev = torch.device(device)
    ns = load(dataset, level, pid)
    torch.manual_seed(seed)
    model = ns["Model"](*ns["get_init_inputs"]()).to(dev)
    inputs, keep = make_inputs(ns, dev, seed), []
    if buffers == "vmm" or (buffers == "shared" and mode == "child"):
        inputs = _in_buffer(inputs, dev, keep)
        if buffers == "shared":
            print(f"fd {keep[0].fd} {keep[0].nbytes}", flush=True)
    elif buffers == "shared":
        keep.append(SharedBuffer.open(fd, nbytes, dev, align=ALIGN if mode == "aligned" else 0))
        views = views_in(keep[0], inputs)
        if not all(torch.equal(v, w) for v, w in zip(views, inputs, strict=True) if hasattr(v, "data_ptr")):
            sys.exit("the shared buffer does not hold the inputs this child made: its layout differs from the parent's")
        inputs = views
    clocks = Clocks(torch, dev)  # the judge's runner's timer: L2 flush, sync, CUDA events (CPU: perf_counter)

    def call() -> float:
        with torch.no_grad():
            return clocks.time_once(lambda: model(*inputs))[0]

    for _ in range(3):
        call()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "t":
            break
        print(f"{call():.6f}", flush=True)


FIXED_LAYOUT = ["setarch", os.uname().machine, "--addr-no-randomize"]  # --layout fixed: no ASLR ...
FIXED_ENV = {"PYTHONHASHSEED": "0"}  # ... and one string-hash seed, so that both children lay out their memory alike


class Proc:
    layout = "random"
    pin: set[int] = set()  # --pin: the cores every child runs on (both sides of a pair the same ones)

    def __init__(self, argv: list[str], buf=None, mode: str = "keep", dev=None):
        """A child started with ``argv``; ``buf``: a shared buffer of its inputs, made here and passed by descriptor
        (``mode`` ``unmap``: dropped here once the child has mapped it; ``child``: the child makes it and this process
        maps it, through pidfd_getfd)."""
        self.buf = buf  # kept until the child has mapped it (close)
        extra = ["--fd", str(buf.fd), "--nbytes", str(buf.nbytes)] if buf else []
        fixed = self.layout == "fixed"
        self.p = subprocess.Popen((FIXED_LAYOUT if fixed else []) + argv + extra, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, pass_fds=[buf.fd] if buf else (), env={**os.environ, **FIXED_ENV} if fixed else None,
                                  preexec_fn=(lambda: os.sched_setaffinity(0, self.pin)) if self.pin else None)  # fmt: skip
        line = self.p.stdout.readline().split()
        if mode == "child" and line[:1] == ["fd"]:
            self.buf = _take_buffer(self.p.pid, int(line[1]), int(line[2]), dev)
            line = self.p.stdout.readline().split()
        if line != ["ready"]:
            sys.exit(f"a child did not start: {argv}")
        if mode == "unmap":
            self.buf = None
        os.kill(self.p.pid, signal.SIGSTOP)

    def time(self) -> float:
        """One call; the process is stopped between calls, as the judge stops its runners (an idle process's OpenMP
        threads spin after a parallel region: on 2 vCPUs, on the other side's cores)."""
        os.kill(self.p.pid, signal.SIGCONT)
        self.p.stdin.write("t\n")
        self.p.stdin.flush()
        ms = float(self.p.stdout.readline())
        os.kill(self.p.pid, signal.SIGSTOP)
        return ms

    def close(self) -> None:
        os.kill(self.p.pid, signal.SIGCONT)
        self.p.stdin.close()
        self.p.wait(timeout=60)


def _take_buffer(pid: int, fd: int, nbytes: int, dev):
    """Map the VMM buffer a child made, duplicating its descriptor with pidfd_getfd (Linux 5.6)."""
    import ctypes

    from pytest_kernelbench.judge.transport import SharedBuffer

    pidfd = os.pidfd_open(pid)
    try:
        mine = ctypes.CDLL(None, use_errno=True).syscall(438, pidfd, fd, 0)  # SYS_pidfd_getfd
    finally:
        os.close(pidfd)
    if mine < 0:
        sys.exit(f"pidfd_getfd failed: {os.strerror(ctypes.get_errno())}")
    return SharedBuffer.open(mine, nbytes, dev)


def one_pair(spawn: Callable[[], Proc], rounds: int, same: bool, b_first: bool = False) -> dict:
    """``rounds`` rounds of one call a side, the first side alternating; ``same``: one process plays both sides;
    ``b_first``: side b's process is started first (the judge starts the reference's runner before the candidate's)."""
    if not same and hasattr(spawn, "prepare"):
        spawn.prepare(2)  # --shared-mode before: both buffers made before either child starts
    if same:
        a = b = spawn()
    elif b_first:
        b = spawn()
        a = spawn()
    else:
        a = spawn()
        b = spawn()
    ms = {"a": [], "b": []}
    for r in range(rounds):
        for side, proc in (("a", a), ("b", b)) if r % 2 == 0 else (("b", b), ("a", a)):
            ms[side].append(proc.time())
    for proc in {id(a): a, id(b): b}.values():
        proc.close()
    logs = [math.log(x / y) for x, y in zip(ms["a"], ms["b"], strict=True)]
    ratio = math.log(statistics.median(ms["a"]) / statistics.median(ms["b"]))
    return {"log_ratio": ratio, "rounds_se": _half_width(logs) / NOISY_Z, "b_first": b_first, "a": ms["a"], "b": ms["b"]}


def spread(rows: list[dict]) -> dict:
    """The spread of the pairs' log ratios, the rounds' own standard error, and the mean log ratio of the process started
    first over the one started second (a start-order effect, where a pair has two processes)."""
    ratios = [r["log_ratio"] for r in rows]
    se2 = statistics.fmean(r["rounds_se"] ** 2 for r in rows)
    sd = statistics.stdev(ratios)
    later = [-r["log_ratio"] if r.get("b_first") else r["log_ratio"] for r in rows]  # log(first started / second started)
    return {"sd": round(sd, 4), "rounds_se_rms": round(math.sqrt(se2), 4), "beyond_rounds_sd": round(math.sqrt(max(0.0, sd**2 - se2)), 4),
            "max_abs": round(max(abs(v) for v in ratios), 4), "first_over_second_started": round(statistics.fmean(later), 4)}  # fmt: skip


def spawner(argv: list[str], a: argparse.Namespace, pid: int) -> Callable[[], Proc]:
    """How to start one child: with ``--buffers shared``, each gets a new shared buffer of the problem's inputs, made and
    filled here (this process then holds a CUDA context, as the judge's supervisor does), as ``--shared-mode`` says."""
    if a.buffers != "shared":
        return lambda: Proc(argv)
    import torch
    from gpu_placement import _in_buffer

    dev = torch.device(a.device)
    torch.zeros(1, device=dev)  # this process's context, as the supervisor's
    if a.shared_mode == "child":
        return lambda: Proc(argv, mode="child", dev=dev)
    inputs = make_inputs(load(a.dataset, a.level, pid), dev, SEED)
    ready: list = []

    def make():
        keep: list = []
        _in_buffer(inputs, dev, keep, align=ALIGN if a.shared_mode == "aligned" else 0)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)  # the copies are done before a child reads the buffer
        return keep[0]

    def spawn() -> Proc:
        return Proc(argv, buf=ready.pop(0) if ready else make(), mode=a.shared_mode)

    spawn.prepare = lambda n: ready.extend(make() for _ in range(n))  # type: ignore[attr-defined]
    if a.shared_mode != "before":
        del spawn.prepare  # type: ignore[attr-defined]
    return spawn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="", help="a problems.jsonl or KernelBench checkout (default: the bundled CPU problems)")
    ap.add_argument("--level", default="1")
    ap.add_argument("--problems", default="2")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--pairs", type=int, default=6, help="pairs of processes (and single-process controls) a problem")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--buffers", choices=("own", "vmm", "shared"), default="own",
                    help="each child's inputs: its own allocations, a VMM buffer it makes, or one made here and passed, as "
                    "the judge passes a runner its inputs")  # fmt: skip
    ap.add_argument("--shared-mode", choices=MODES, default="keep",
                    help="with --buffers shared: keep this process's mapping (the judge), drop it once the child has "
                    "mapped it (unmap), make both buffers before either child starts (before), map them 2 GiB aligned "
                    "(aligned), or let each child make its buffer and map it here (child)")  # fmt: skip
    ap.add_argument("--layout", choices=("random", "fixed"), default="random",
                    help="fixed: children start without address-space randomisation and with PYTHONHASHSEED=0, so that "
                    "two processes lay out their memory alike (random: as any process starts)")  # fmt: skip
    ap.add_argument("--pin", default="", help="cores (e.g. 3 or 2,3) that every child is bound to: both sides of a pair "
                    "then run on the same ones, as they take turns")  # fmt: skip
    ap.add_argument("--out", default="")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--fd", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--nbytes", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    Proc.layout = a.layout
    try:
        Proc.pin = {int(c) for c in a.pin.split(",") if c.strip()}
    except ValueError:
        ap.error(f"--pin {a.pin!r}: give core numbers, e.g. --pin 3 or --pin 2,3")
    if a.child:
        child(a.dataset, a.level, a.child, a.device, SEED, a.buffers, a.fd, a.nbytes, a.shared_mode)
        return
    try:  # the syntax of pytest's --problems: ids and inclusive ranges
        selection = parse_id_ranges(a.problems)
    except KernelBenchUsageError as exc:
        sys.exit(f"error: {exc}")
    found = {}
    for pid in sorted(selection.ids) if selection else []:
        argv = [sys.executable, __file__, "--child", str(pid), "--dataset", a.dataset, "--level", a.level, "--device", a.device,
                "--buffers", a.buffers, "--shared-mode", a.shared_mode]  # fmt: skip
        spawn = spawner(argv, a, pid)
        rows = {"two": [], "one": []}
        for k in range(a.pairs):  # the arms alternate, so that a slow stretch of the machine hits both
            rows["two"].append(one_pair(spawn, a.rounds, same=False, b_first=k % 2 == 1))
            rows["one"].append(one_pair(spawn, a.rounds, same=True))
        found[pid] = {"rows": rows, "two_processes": spread(rows["two"]), "one_process": spread(rows["one"])}
        two, one = json.dumps(found[pid]["two_processes"]), json.dumps(found[pid]["one_process"])
        print(pid, "two processes", two, "| one process", one, flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "problems": found}) + "\n")


if __name__ == "__main__":
    main()
