"""A build step has no GPU (judge/gpuless.py): its sandbox binds no GPU device file, and what an honest module asks of
the GPU as it is imported is answered from the real one's properties. On a GPU: tests/test_gpu.py."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_kernelbench.judge import gpuless, sandbox
from pytest_kernelbench.judge.sandbox import Mounts, SandboxInfo

H200 = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=150_754_820_096, multi_processor_count=132,
                       L2_cache_size=52_428_800, uuid=object())  # fmt: skip


def _fake_torch():
    cuda = SimpleNamespace(get_device_properties=lambda device: H200, is_available=lambda: False, _lazy_init=lambda: None)
    return SimpleNamespace(cuda=cuda)


def test_a_build_step_answers_what_a_module_asks_of_the_gpu_and_refuses_a_context():
    text = gpuless.describe(_fake_torch(), 0)
    assert json.loads(text)["multi_processor_count"] == 132 and "uuid" not in json.loads(text)  # numbers and names only
    torch = _fake_torch()
    gpuless.install(torch, text)
    cuda = torch.cuda
    assert cuda.is_available() and cuda.device_count() == 1 and cuda.current_device() == 0
    assert cuda.get_device_capability() == (9, 0) and cuda.get_device_capability(0) == (9, 0)
    assert cuda.get_device_name() == "NVIDIA H200" and cuda.get_device_properties(0).L2_cache_size == 52_428_800
    with pytest.raises(RuntimeError, match=gpuless.MARK) as made:
        cuda._lazy_init()  # what torch.zeros(..., device="cuda") calls first
    assert gpuless.wanted(str(made.value))


@pytest.mark.parametrize(
    ("message", "wanted"),
    [
        ("RuntimeError: No CUDA GPUs are available", True),
        ("RuntimeError: Found no NVIDIA driver on your system.", True),
        ("RuntimeError: 0 active drivers ([]). There should only be one.", True),  # Triton, launched as imported
        ("numba.cuda.cudadrv.error.CudaSupportError: Error at driver init: CUDA_ERROR_NO_DEVICE (100)", True),
        ("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected", True),
        ("RuntimeError: Error building extension 'kb_relu': nvcc ... error: expected a ';'", False),
        ("NameError: name 'ModelNew' is not defined", False),
    ],
)
def test_only_a_failure_for_want_of_the_gpu_builds_again_with_it(message, wanted):
    assert gpuless.wanted(message) is wanted


def test_a_build_steps_sandbox_binds_no_gpu_device_file(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "device_nodes", lambda names, minor: ["nvidia0", "nvidia-uvm", "nvidiactl"])
    info = SandboxInfo(kind="bwrap", bwrap="/usr/bin/bwrap")

    def bound(mounts):
        cmd = sandbox.bwrap_command(info, ["true"], mounts, tmp_path / "scratch", {})
        return {cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--dev-bind"}

    assert bound(Mounts()) == {"/dev/nvidia0", "/dev/nvidia-uvm", "/dev/nvidiactl"}  # a runner: its GPU
    assert bound(Mounts(writable=[Path(tmp_path)], gpu=False)) == set()  # a build step: none
