"""The tamper check tells torch's own wrapping (importing dynamo) from a candidate's patch."""

import functools
import importlib
import sys

import torch

from pytest_kernelbench import optrace, tamper


def test_tracing_ops_does_not_import_dynamo_and_dynamos_own_wrapping_is_not_tampering(monkeypatch):
    before = tamper.snapshot()
    assert optrace.trace_ops(lambda: torch.zeros(2) + 1) == {"aten.zeros": 1, "aten.add": 1}
    if "torch._dynamo" not in sys.modules:  # the recorder alone must not pull in dynamo (~2 s per evaluation)
        monkeypatch.setattr(torch, "manual_seed", torch.manual_seed)  # restored after the test
        importlib.import_module("torch._dynamo")  # what a candidate using torch.compile does: wraps torch.manual_seed
    assert tamper.changed_since(before) == []


def test_a_candidate_wrapping_a_torch_function_is_still_caught(monkeypatch):
    before = tamper.snapshot()
    original = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", functools.wraps(original)(lambda seed: original(0)))
    monkeypatch.setattr(torch.nn.functional, "relu", functools.wraps(torch.nn.functional.relu)(lambda *a, **k: None))
    assert sorted(tamper.changed_since(before)) == ["torch.manual_seed", "torch.nn.functional.relu"]


def test_the_op_recorder_does_not_import_dynamo():
    import subprocess

    code = (
        "import sys, torch\nfrom pytest_kernelbench import optrace\n"
        "optrace.trace_ops(lambda: torch.zeros(2) + 1)\nprint('torch._dynamo' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
