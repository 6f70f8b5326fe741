"""The judge's parsers of candidate data, fed hostile data: every one is bounded and total.

A runner's reply frames (``transport.decode``, ``Channel.recv``), their fields (``protocol.parse_reply``), a build step's
PCH request file (``build.pch``) and its output values (``compare.values_equal``) may raise only the parser's own error
class, whatever they are given: deep nesting, huge numbers, wrong types, truncated frames, giant strings, NaN. The
folders a candidate shapes (its JIT caches, its build folder) are measured, trimmed and cleared without raising, and two
red-team files are judged for real: their verdicts are theirs, never harness_error. Seeded random data (no hypothesis),
so a failure reproduces.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import struct

import pytest

from helpers import TESTS, corpus_headers, cpu_config, tiny_problem
from pytest_kernelbench.build.cache import BuildFolder
from pytest_kernelbench.build.tree import remove_tree, tree_size
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.judge import protocol as p
from pytest_kernelbench.judge.compare import values_equal
from pytest_kernelbench.judge.controller import evaluate
from pytest_kernelbench.judge.supervisor.building import Builder
from pytest_kernelbench.judge.transport import MAX_DEPTH, Channel, ProtocolError, decode

SEED = 45
REPLY_KINDS = (p.Done, p.Ready, p.Called, p.CalledEach, p.Traced, p.Profiled)
FIELDS = ("ok", "error", "ms", "offstream", "mismatch", "values", "structure", "graph_error", "peak_bytes", "calls",
          "ops", "all_threads", "kernels", "device_name", "versions")  # fmt: skip


def nested(depth: int, leaf: object = 0) -> object:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def deep_text(depth: int) -> str:
    return "[" * depth + "]" * depth


LEAVES = [
    None, True, False, -1, 0, 1, 2**62, 2**63, 10**400, -(10**4000), 1e308, -0.0, float("nan"), float("inf"),
    "", "x" * 100_000, "\x1b[32mcorrect\x1b[0m", "\ud800", nested(3000), nested(60_000), [[1.0, 2]], {"k": [1, 2]},
    [0] * 20_000, {"t": {"buf": 0}}, 1.5,
]  # fmt: skip


def hostile_value(rng: random.Random, depth: int = 0) -> object:
    """One value of the kinds a hostile runner would send (decoded JSON, or what a careless parser could meet)."""
    pick = rng.randrange(14)
    if pick == 0 and depth < 4:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 1 and depth < 4:
        return {rng.choice(FIELDS): hostile_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return rng.choice(LEAVES)


def hostile_reply(rng: random.Random) -> dict:
    reply = {"ok": rng.random() < 0.9, "error": ""}
    for name in rng.sample(FIELDS, rng.randrange(len(FIELDS))):
        reply[name] = hostile_value(rng)
    if rng.random() < 0.3:
        reply["calls"] = [hostile_reply(rng) if rng.random() < 0.5 else {"ok": True, "error": "", "ms": 1.0}
                          for _ in range(rng.randrange(3))]  # fmt: skip
    return reply


def test_parse_reply_raises_only_bad_reply_on_hostile_replies():
    rng = random.Random(SEED)
    for _ in range(3000):
        kind = rng.choice(REPLY_KINDS)
        try:
            parsed = p.parse_reply(hostile_reply(rng), kind)
        except p.BadReply:
            continue
        assert isinstance(parsed, kind)


@pytest.mark.parametrize("data", [None, [], "ok", 7, nested(60_000)])
def test_a_reply_that_is_no_map_is_a_bad_reply(data):
    with pytest.raises(p.BadReply):
        p.parse_reply(data, p.Called)


@pytest.mark.parametrize(
    ("field", "value"),
    [("ms", 10**4000), ("peak_bytes", 10**30), ("values", [[1, 2]]), ("values", [{"k": 1}]), ("values", [float("inf")]),
     ("values", ["x" * (p.MAX_TEXT + 1)]), ("values", [0] * (p.MAX_VALUES + 1))],
)  # fmt: skip
def test_a_called_reply_carries_only_bounded_plain_values(field, value):
    with pytest.raises(p.BadReply):
        p.parse_reply({"ok": True, "error": "", "ms": 1.0, field: value}, p.Called)


def test_honest_values_pass():
    reply = p.parse_reply({"ok": True, "error": "", "ms": 1.0, "values": [None, True, 3, 2.5, "nan", 10**300]}, p.Called)
    assert reply.values == [None, True, 3, 2.5, "nan", 10**300]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('{"a":' + deep_text(60_000) + "}", "nested deeper"),
        ('{"a":' + deep_text(MAX_DEPTH) + "}", "nested deeper"),
        ('{"a":' + "9" * 5000 + "}", "digits"),
        ('{"a":[1e999]}', "out of range"),
        ('{"a":-1e999}', "out of range"),
        ('{"a":NaN}', "NaN"),
        ('{"a":[Infinity]}', "Infinity"),
        ('{"a":[1,2', "not JSON"),
        ("[1]", "JSON object"),
        ("", "not JSON"),
    ],
)
def test_a_frame_out_of_bounds_is_a_protocol_error(body, says):
    with pytest.raises(ProtocolError, match=says):
        decode(body.encode())


def test_a_frame_within_bounds_decodes():
    within = '{"a":' + deep_text(MAX_DEPTH - 1) + ',"n":' + "9" * 1000 + ',"s":"' + "[" * 5000 + "1e999 NaN " + "9" * 5000 + '"}'
    message = decode(within.encode())
    assert message["n"] == int("9" * 1000) and message["s"].startswith("[[[")


def test_random_bytes_and_truncations_raise_only_protocol_errors():
    rng = random.Random(SEED)
    honest = json.dumps(p.reply(p.Called, ms=0.5, offstream=False, mismatch="", values=[1, 2.5, "x"], structure=None,
                                graph_error="")).encode()  # fmt: skip
    for _ in range(2000):
        body = bytearray(honest)
        for _ in range(rng.randrange(1, 6)):
            body[rng.randrange(len(body))] = rng.randrange(256)
        cut = bytes(body[: rng.randrange(len(body) + 1)]) if rng.random() < 0.3 else bytes(body)
        try:
            assert isinstance(decode(cut), dict)
        except ProtocolError:
            pass


def test_the_channel_turns_a_60000_deep_frame_into_a_protocol_error():
    a, b = socket.socketpair()
    supervisor = Channel(a)
    body = ('{"ok":true,"error":"","ms":1.0,"values":' + deep_text(60_000) + "}").encode()
    b.sendall(struct.pack("!I", len(body)) + body)
    with pytest.raises(ProtocolError, match="nested deeper"):
        supervisor.recv(5)
    b.sendall(struct.pack("!I", 2) + b"{}")  # the frame was read whole: the next one is intact
    assert supervisor.recv(5) == ({}, [])
    b.sendall(struct.pack("!I", 100) + b'{"ok":')  # truncated: the other side closes mid-frame
    b.close()
    with pytest.raises(Exception) as caught:
        supervisor.recv(5)
    assert type(caught.value).__name__ in ("ChannelClosed", "ChannelTimeout")
    supervisor.close()


# ---------------------------------------------------------------- folders a candidate shapes


def deep_chain(root, depth: int, name: str = "d" * 20) -> None:
    """``root/name/name/...`` ``depth`` folders deep (past PATH_MAX), with a file at the bottom; made by descriptor."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        with open(os.open("bottom", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as fh:
            fh.write("x")
    finally:
        os.close(fd)


@pytest.fixture
def deep_tmp(tmp_path):
    """``tmp_path``, emptied here whatever the test did: pytest's own clean-up recurses and would fail on a deep chain."""
    yield tmp_path
    remove_tree(tmp_path, keep_top=True)


def test_a_1200_deep_cache_is_measured_and_trimmed_without_raising(deep_tmp):
    tmp_path = deep_tmp
    jit = tmp_path / "jit-key"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the candidate's")
    (jit / "triton").mkdir(parents=True)
    deep_chain(jit / "triton", 1200)
    (jit / "triton" / "escape").symlink_to(outside)
    (jit / "inductor").mkdir()
    (jit / "inductor" / "kernel.so").write_text("y")
    assert tree_size(jit, 10**9) == 10**9 + 1  # too deep to keep
    builder = Builder.__new__(Builder)
    builder._jit = jit
    builder.trim_jit_cache()
    assert jit.is_dir() and list(jit.iterdir()) == []
    assert (outside / "keep").read_text() == "not the candidate's"


def test_remove_tree_removes_any_depth_and_follows_no_symlink(deep_tmp):
    tmp_path = deep_tmp
    target = tmp_path / "build"
    target.mkdir()
    deep_chain(target, 300)
    (tmp_path / "precious").write_text("keep")
    (target / "link").symlink_to(tmp_path / "precious")
    remove_tree(target)
    assert not target.exists() and (tmp_path / "precious").read_text() == "keep"
    small = tmp_path / "small"
    (small / "a").mkdir(parents=True)
    (small / "a" / "f").write_text("123")
    assert tree_size(small, 100) == 3



def test_a_build_folder_with_a_folder_for_a_baton_is_built_again(deep_tmp):
    """torch's baton ``<ext>/lock`` is the judge's to remove; a folder there (the candidate's build step wrote it) makes
    that extension folder corrupt: removed whole, so the build runs again, never an IsADirectoryError."""
    root = deep_tmp / "builds"
    outside = deep_tmp / "outside"
    outside.mkdir()
    (outside / "lock").write_text("not the build's")
    hostile = root / "k" / "kb_ext"
    (hostile / "lock" / "inner").mkdir(parents=True)
    (hostile / "kb_ext.so").write_text("a library")
    deep_chain(hostile / "lock", 1200)
    (root / "k" / "stale").mkdir()
    (root / "k" / "stale" / "lock").write_text("left by a killed build")
    (root / "k" / "stale" / "stale.so").write_text("a library")
    (root / "k" / "elsewhere").symlink_to(outside)
    folder = BuildFolder(root, "k", timeout=5)
    with folder as path:
        assert not hostile.exists() and not (path / "stale" / "lock").exists()
        assert folder.cached  # the stale build's library is still there
        assert (outside / "lock").read_text() == "not the build's"
    assert (root / "k.lock").exists() and not (root / "k" / "k.lock").exists()  # the lock is beside the folder


# ---------------------------------------------------------------- a build step's PCH request file


def hostile_request_lines(rng: random.Random, compiler: str) -> list[str]:
    lines = ['{"event":"wanted","flags":' + deep_text(60_000) + "}", "[" * 60_000, '{"event":' + deep_text(900) + "}",
             '{"event":"wanted","compiler":"' + compiler + '","flags":[' + "9" * 5000 + "]}",
             '{"event":"used","seconds":NaN,"key":' + deep_text(900) + "}", '{"event":"used","seconds":1e999}',
             '{"event":"wanted","compiler":' + "9" * 4000 + "}", "x" * 100_000, "\x1b[31m\x00\xff"]  # fmt: skip
    for _ in range(40):
        entry = {"event": rng.choice(["wanted", "used", "rejected", 3, None, ["wanted"]]),
                 "compiler": rng.choice([compiler, 7, [compiler], "x" * 10_000]),
                 "flags": rng.choice([["-ftrack-macro-expansion=0"], ["-DX"] * 100, [1, 2], "-O3", {"a": 1},
                                      ["-isystem", "/tmp"], [nested(500)]]),
                 "source": rng.choice(["main.cpp", 10**300, None, {"k": "v"}]), "key": rng.choice(["k", 5, []])}  # fmt: skip
        lines.append(json.dumps(entry))
    rng.shuffle(lines)
    return lines


def test_a_hostile_pch_request_file_is_read_without_raising(tmp_path):
    from pytest_kernelbench.build.pch import Requests

    rng = random.Random(SEED)
    compiler = shutil.which("g++") or "/bin/true"
    for round_ in range(6):
        wanted = tmp_path / f"step{round_}" / "pch-wanted.jsonl"
        wanted.parent.mkdir()
        wanted.write_text("\n".join(hostile_request_lines(rng, compiler)) + "\n", errors="surrogateescape")
        requests = Requests(tmp_path / "pch", wanted, compiler)
        requests.poll()
        counts = requests.close()
        assert set(counts) <= {"refused", "used", "rejected"}, counts
    assert not list((tmp_path / "pch").glob("*/torch/extension.h.gch"))


# ---------------------------------------------------------------- output values (compare.values_equal)

VALUE_PAIRS = [(1, 1), (1.0, 1.0000001), ("x", "x"), (None, None), (True, 1), ("nan", "nan"), (1e308, -1e308), (2**62, 2**62 + 1)]
HUGE_PAIRS = [(10**400, 1.0), (1.0, 10**400), (10**400, 10**400 + 1), (-(10**999), 10**999)]


@pytest.mark.parametrize(("new", "ref"), VALUE_PAIRS)
def test_values_equal_answers_for_plain_values(new, ref):
    assert values_equal(new, ref, 1e-2, 1e-2) in (True, False)


@pytest.mark.parametrize(("new", "ref"), HUGE_PAIRS, ids=["huge-float", "float-huge", "huge-huge", "huger-both-signs"])
def test_values_equal_answers_for_huge_ints(new, ref):
    same = values_equal(new, ref, 1e-2, 1e-2)
    assert same in (True, False) and (same or new != ref) and not (same and 1.0 in (new, ref))


def test_values_equal_answers_for_any_value_whatever_it_is():
    """Values a reply may carry (plain leaves) and what a careless parser could pass on: deep, huge, NaN, containers."""
    rng = random.Random(SEED)
    for _ in range(2000):
        new, ref = hostile_value(rng), hostile_value(rng)
        assert values_equal(new, ref, 1e-2, 1e-2) in (True, False)


# ---------------------------------------------------------------- real judgments of hostile candidates


@pytest.mark.parametrize("name", ["deep_reply", "deep_triton_cache"])
def test_a_hostile_candidate_is_judged_never_the_judges_failure(name, deep_tmp):
    """Judged for real on the CPU, outside any sandbox (the corpus judges them inside one): the verdict is the
    candidate's, as its file says, never harness_error."""
    path = TESTS / "adversarial" / f"{name}.py"
    folders = {key: deep_tmp / key for key in ("builds", "locks", "pch")}
    for folder in folders.values():
        folder.mkdir()
    config = cpu_config(sandbox="off", timeout=30.0, build_dir=str(folders["builds"]), lock_dir=str(folders["locks"]),
                        pch_dir=str(folders["pch"]))  # fmt: skip
    result = evaluate(tiny_problem(), Candidate(path.read_text(), str(path), name), config)
    assert result.outcome.value != "harness_error" and result.outcome.value == corpus_headers(path)["judge"], result.message[:2000]
    assert all(not any(cache.iterdir()) for cache in folders["builds"].glob("jit-*"))  # a deep cache is trimmed


# A candidate that rewrites the fields of its runner's replies, each with values a seeded draw picks from the edges of
# what parse_reply takes (and a step past them): what parses must still be judged, by every part downstream (sums of a
# round's claims, the wall-clock check, the comparison of plain values, the peak memory), as the candidate's outcome.
EXTREMES = r'''
import random
import sys

import torch.nn as nn

_rng = random.Random({seed})
_EDGES = {{  # within what parses, then (PAST, drawn one time in ten) a step beyond it
    "ms": [0.0, 1e9, 5e-324, 1e-300, 0.5, -0.0, 2 ** 62 % 10 ** 9],
    "peak_bytes": [0, 1 << 62, 1],
    "offstream": [True, False],
    "mismatch": ["", "x" * 30000, "\x1b[2J\r" * 100],
    "graph_error": ["", "y" * 30000],
    "values": [[], [10 ** 18, -(10 ** 18), 1e308, -1e308, 5e-324, True, None, "z" * 500], [2 ** 62] * 100],
    "structure": [None, {{}}, {{"seq": [{{"t": 1}}] * 50, "tuple": 1}}, {{"kind": "x" * 1000}}],
}}
_START = _rng.choice([1, 8, 16, 40])
_PAST = {{"ms": [1e9 * (1 + 1e-9), 1e300, float("nan")], "peak_bytes": [(1 << 62) + 1, -1, 1.5], "offstream": [1, None],
         "values": [[0] * 10001, [2 ** 64]]}}
_transport = sys.modules.get("pytest_kernelbench.judge.transport")
if _transport is not None:
    _send = _transport.Channel.send

    _seen = [0]

    def _bend(reply):  # from a seeded reply on: the trials pass first (as a candidate would), then timing is bent too
        if isinstance(reply, dict) and reply.get("ok") and "ms" in reply:
            _seen[0] += 1
            if _seen[0] < _START:
                return reply
            for field, edges in _EDGES.items():
                if _rng.random() < 0.4:
                    past = field in _PAST and _rng.random() < 0.1
                    reply = {{**reply, field: _rng.choice(_PAST[field] if past else edges)}}
        return reply

    def _send_bent(self, message, fds=()):
        if isinstance(message, dict) and isinstance(message.get("calls"), list):  # a round's replies
            message = {{**message, "calls": [_bend(c) for c in message["calls"]]}}
        return _send(self, _bend(message), fds)

    _transport.Channel.send = _send_bent


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(features, features), nn.ReLU()) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)
'''


@pytest.mark.parametrize("seed", [pytest.param(s, marks=() if s < 3 else pytest.mark.full) for s in range(8)])
def test_replies_at_the_edges_of_what_parses_are_judged_as_the_candidates_outcome(seed, tmp_path):
    """Issue 45's property, end to end: whatever a candidate's replies carry, its verdict is its own (any outcome but
    harness_error and unknown_error), in rounds of one call and of four."""
    from helpers import DATA
    from pytest_kernelbench.problems import problem_from_path

    problem = problem_from_path(DATA / "timing" / "level9" / "1_LinearChain.py")
    for round_calls in (1, 4):
        config = cpu_config(timeout=60.0, round_calls=round_calls, build_dir=str(tmp_path / "builds"), lock_dir=str(tmp_path / "locks"))
        result = evaluate(problem, Candidate(EXTREMES.format(seed=seed), "", f"extremes-{seed}"), config)
        assert result.outcome.value not in ("harness_error", "unknown_error"), (round_calls, result.outcome, result.message[:2000])
