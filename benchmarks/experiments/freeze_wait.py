"""How long stopping a runner's cgroup takes when the supervisor waits only for the kernel's notification that it is
frozen, against the judge's wait (cgroups.Cgroup.freeze: the notification, or the file read again after short waits).
The kernel announces a change of ``cgroup.events`` at most once per 10 ms, so a freeze that completes soon after the
thaw before it can be announced late. A torch process with THREADS threads of its own stands in for a runner: thawed,
asked a request over a pipe, given GAP seconds (a call), frozen again; as in a GPU time phase, it and this process can
share one core at nice -20 (``--one-core``, root).

    python benchmarks/experiments/freeze_wait.py --threads 16,64 --gaps 0,0.003 --one-core --out OUT.json

``--judge 1_LeakyReluScale,3_Softmax`` instead judges bundled CPU problems with their committed solutions in this
checkout and prints the parts of stopping and waking (split_s); run it in a checkout of the code before to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pytest_kernelbench.judge.cgroups import Cgroup  # noqa: E402
from pytest_kernelbench.judge.cores import TIMING_NICE, renice  # noqa: E402

RUNNER = """
import sys, threading, torch
torch.set_num_threads({threads})
a = torch.randn(256, 256)
for _ in range(3): a @ a
for e in [threading.Event() for _ in range({threads})]:
    threading.Thread(target=e.wait, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    print("ok", flush=True)
"""


def notified(group: Cgroup) -> None:
    """The wait as it was: the file read again only when the kernel signals a change (or after 50 ms)."""
    (group.path / "cgroup.freeze").write_text("1")
    group.frozen = True
    fd = os.open(group.path / "cgroup.events", os.O_RDONLY)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLPRI | select.POLLERR)
        while b"frozen 1" not in os.pread(fd, 4096, 0):
            poller.poll(50)
    finally:
        os.close(fd)


def one(threads: int, gap: float, one_core: bool, wait: str, stops: int) -> dict:
    child = subprocess.Popen([sys.executable, "-c", RUNNER.format(threads=threads)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    group, allowed = None, os.sched_getaffinity(0)
    try:
        assert child.stdout.readline().strip() == "ready"
        group = Cgroup.create(f"freeze-wait-{threads}")
        if group is None:
            sys.exit("no cgroup v2 here (cgroups.support())")
        group.add(child.pid)
        tasks = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        if one_core:
            for tid in [0, *tasks]:
                os.sched_setaffinity(tid, {min(allowed)})
            renice([os.getpid(), child.pid], TIMING_NICE, sessions=False)
        spent = []
        for _ in range(stops):
            group.thaw()
            child.stdin.write("go\n")
            child.stdin.flush()
            child.stdout.readline()
            time.sleep(gap)
            start = time.perf_counter()
            notified(group) if wait == "notification" else group.freeze()
            spent.append((time.perf_counter() - start) * 1e6)
        spent.sort()
        return {"threads": threads, "tasks": len(tasks), "gap_s": gap, "one_core": one_core, "wait": wait, "stops": stops,
                "median_us": round(statistics.median(spent)), "mean_us": round(statistics.mean(spent)),
                "p99_us": round(spent[int(0.99 * (stops - 1))]), "max_us": round(spent[-1]),
                "over_5ms": sum(s > 5000 for s in spent)}
    finally:
        if group is not None:
            group.close()
        child.kill()
        child.wait()
        if one_core:
            os.sched_setaffinity(0, allowed)
            renice([os.getpid()], 0, sessions=False)


def judged(names: list[str]) -> list[dict]:
    from pytest_kernelbench.candidates import Candidate
    from pytest_kernelbench.config import EvalConfig
    from pytest_kernelbench.judge.controller import evaluate
    from pytest_kernelbench.problems import problem_from_path

    rows = []
    for name in names:
        source = (REPO / "solutions" / "mini" / f"{name}.cpu.py").read_text()
        result = evaluate(problem_from_path(REPO / "problems" / "mini" / f"{name}.py"), Candidate(source, "", name),
                          EvalConfig(device="cpu", timeout=300))
        split = result.extra.split_s or {}
        extra = result.extra
        rows.append({"problem": name, "outcome": result.outcome.value, "speedup": result.speedup, "timed_calls": extra.timed_calls,
                     "calls_per_round": extra.calls_per_round, "time_stage_s": result.stage_seconds.get("time"),
                     **{k: round(v, 4) for k, v in sorted(split.items()) if k.endswith(("freeze", "stop", "wake"))}})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="16,64", help="the stand-in runner's threads of its own, comma-separated")
    parser.add_argument("--gaps", default="0,0.003", help="seconds between the request's reply and the stop")
    parser.add_argument("--one-core", action="store_true", help="runner and this process on one core at nice -20")
    parser.add_argument("--stops", type=int, default=200)
    parser.add_argument("--judge", default="", help="bundled problems to judge instead (comma-separated names)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = judged(args.judge.split(",")) if args.judge else []
    for threads in map(int, args.threads.split(",") if not args.judge else []):
        for gap in map(float, args.gaps.split(",")):
            for wait in ("notification", "judge"):
                rows.append(one(threads, gap, args.one_core, wait, args.stops))
                print(json.dumps(rows[-1]), flush=True)
    Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
                                          "kernel": os.uname().release, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
