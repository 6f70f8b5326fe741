"""Candidate runners forked from the runner zygote (judge/zygote.py): no more reach or privilege than a fresh interpreter
in bwrap, nothing carried from one candidate to the next, no credential in the zygote."""

import ast
import os
import time
from pathlib import Path

import pytest

from helpers import broken, cpu_config, tiny_problem
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.judge import cgroups, forkserver, zygote
from pytest_kernelbench.judge.controller import evaluate, supervisor_env
from pytest_kernelbench.judge.sandbox import probe
from pytest_kernelbench.outcome import Outcome

ROOTED = hasattr(os, "geteuid") and os.geteuid() == 0
pytestmark = pytest.mark.skipif(not (ROOTED and probe().kind == "bwrap" and cgroups.support().ok),
                                reason="the runner zygote needs bwrap and cgroups, as root")  # fmt: skip

# What a runner can see of itself and its surroundings, raised as its error: the judge's message carries it back.
PROBE = '''
import os, sys, torch
_KEYS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
_status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if line.split(":")[0] in _KEYS)
_seen = {
    "status": {k: v.strip() for k, v in _status.items()},
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "own_pid": os.getpid(),
    "namespaces": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("mnt", "net", "pid", "ipc", "uts", "cgroup")},
    "tmp": sorted(os.listdir("/tmp")), "cwd": os.getcwd(), "mounts": len(open("/proc/self/mounts").read().splitlines()),
    "net": open("/proc/net/dev").read().count("\\n"), "env": sorted(os.environ),
    "fds": len(os.listdir("/proc/self/fd")), "session": os.getsid(0) == os.getpid(),
}
raise RuntimeError("SEEN " + repr(_seen) + " END")
'''


def _seen(monkeypatch, zygote_on: bool) -> tuple[str, dict]:
    monkeypatch.setenv(forkserver.ZYGOTE_ENV, "1" if zygote_on else "0")
    result = evaluate(tiny_problem(), Candidate(PROBE + broken("correct").source, "probe.py", "probe.py"), cpu_config())
    text = result.message
    start = text.index("SEEN {") + len("SEEN ")  # the message, not the traceback's line of source
    return result.extra.runner_start, ast.literal_eval(text[start : text.index("} END", start) + 1])


def test_a_forked_runner_has_no_more_reach_or_privilege_than_bwraps_fresh_interpreter(monkeypatch):
    forked_by, forked = _seen(monkeypatch, True)
    fresh_by, fresh = _seen(monkeypatch, False)
    assert forked_by == "zygote" and fresh_by.startswith("interpreter"), (forked_by, fresh_by)
    for key in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs", "Seccomp"):
        assert forked["status"][key] == fresh["status"][key], key
    assert forked["status"]["NoNewPrivs"] == "1" and int(forked["status"]["CapEff"], 16) == 0
    assert int(forked["status"]["CapBnd"], 16) == 0  # the bounding set too (bwrap keeps it; nothing can use it)
    for name, link in forked["namespaces"].items():  # the sandbox's, none of the judge's
        assert link != os.readlink(f"/proc/self/ns/{name}"), name
    assert max(forked["pids"]) <= 3 and forked["own_pid"] in forked["pids"]  # the sandbox's first process, its holder, itself
    assert forked["tmp"] == fresh["tmp"] and forked["cwd"] == fresh["cwd"] and forked["session"]
    assert forked["mounts"] == fresh["mounts"] and forked["net"] == fresh["net"] == 3  # the same mounts; loopback only
    assert forked["env"] == fresh["env"]
    assert forked["fds"] <= fresh["fds"]  # nothing of the zygote's or its requests is left open


# Imported by the first candidate: patches torch and the runner's modules, leaves a global behind.
POISON = '''
import builtins, torch
import pytest_kernelbench.judge.transport as transport
torch.add = lambda *a, **k: 0
transport.KB_POISONED = True
builtins.KB_LEFT_BEHIND = "answer"
'''
CHECKS = '''
import builtins, torch
import pytest_kernelbench.judge.transport as transport
assert not hasattr(builtins, "KB_LEFT_BEHIND"), "a global from the previous candidate"
assert not hasattr(transport, "KB_POISONED"), "the runner's module patched by the previous candidate"
assert torch.add(torch.ones(1), 1).item() == 2.0, "torch.add patched by the previous candidate"
'''


def test_a_candidate_cannot_reach_the_next_one_through_the_zygote(monkeypatch):
    monkeypatch.setenv(forkserver.ZYGOTE_ENV, "1")
    correct = broken("correct").source
    first = evaluate(tiny_problem(), Candidate(POISON + correct, "poison.py", "poison.py"), cpu_config())
    second = evaluate(tiny_problem(), Candidate(CHECKS + correct, "checks.py", "checks.py"), cpu_config())
    assert first.extra.runner_start == second.extra.runner_start == "zygote"
    assert first.outcome is not Outcome.HARNESS_ERROR, first.message
    assert second.outcome is Outcome.CORRECT, second.message


def test_the_zygote_never_holds_a_credential(monkeypatch):
    secret = "sk-zygote-test-" + os.urandom(8).hex()
    monkeypatch.setenv("KB_TEST_API_KEY", secret)
    server = forkserver.server_for(supervisor_env(cpu_config()))
    deadline = time.monotonic() + 120
    found = []
    while not found and time.monotonic() < deadline:
        found = [pid for pid in _children(server.pid) if b"judge.zygote" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        time.sleep(0.1)
    assert found, "the fork server started no zygote"
    environ = Path(f"/proc/{found[0]}/environ").read_bytes()
    assert b"PATH=" in environ and secret.encode() not in environ and b"KB_TEST_API_KEY" not in environ


def test_a_request_fd_that_is_not_the_zygotes_socket_falls_back_to_a_fresh_interpreter(monkeypatch, tmp_path):
    monkeypatch.setenv(forkserver.ZYGOTE_ENV, "0")  # no zygote; a stale number in the environment instead
    with open(tmp_path / "file", "w") as handle:
        monkeypatch.setenv(zygote.FD_ENV, str(handle.fileno()))
        result = evaluate(tiny_problem(), broken("correct"), cpu_config(worker_start="spawn"))
    assert result.outcome is Outcome.CORRECT, result.message
    assert result.extra.runner_start.startswith("interpreter"), result.extra.runner_start


def _children(pid: int) -> list[int]:
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        kids += [int(k) for k in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return kids
