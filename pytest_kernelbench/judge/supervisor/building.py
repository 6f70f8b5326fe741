"""The candidate's build: its key in the build cache, the compiler settings the judge decides (the shared-PCH wrapper,
the GPU's architecture, ``--device cpu-check``'s toolkit), the sandboxed build step that imports the candidate with
only its own build folder writable, and its Triton and inductor caches, kept per source and trimmed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from filelock import Timeout

from ...config import light_headers
from .. import cores, gpuless
from .. import protocol as p
from ..locking import build_slot
from ..sandbox import Mounts
from .device import Device
from .plan import ADMISSION_MARGIN_BYTES, CACHED_BUILD_WAIT_S, CHECK_ARCH, JIT_CACHE_BYTES, PCH_WAIT_S
from .record import Context, Verdict
from .sides import Runners, Side


class Builder:
    def __init__(self, ctx: Context, runners: Runners, device: Device):
        self.ctx, self.runners, self.device = ctx, runners, device
        self._jit: Path | None = None  # this source's Triton and inductor caches (jit_cache)
        self._key: str | None = None  # build_key()

    def launch_runner(self, folder: Path | None) -> Side:
        """The candidate's runner: its build folder (if any) under a throw-away overlay, its JIT caches writable."""
        mounts = Mounts(writable=[self.jit_cache()], overlay=[folder] if folder else [])
        return self.runners.launch(self.candidate_env(folder), "runner.log", mounts)

    def cached_build(self) -> Path | None:
        """The candidate's build folder if a finished build is there now (build.cache.finished_build: a short wait for
        a pool's build step that only finds it cached; without it a re-judge, pool on, started one runner late: CI
        rehearsal at 15d79a4)."""
        from ...build.cache import finished_build

        return finished_build(self.ctx.cfg.build_dir, self.build_key(), CACHED_BUILD_WAIT_S)

    def build(self) -> Path:
        """The sandboxed build step: import the candidate with only its own build folder writable."""
        from ...build.cache import BuildFolder

        ctx = self.ctx
        stage = ctx.status.stage
        ctx.status.enter("wait_build")  # another judge's build of this source: waited for, charged to no one
        folder = BuildFolder(ctx.cfg.build_dir, self.build_key(), timeout=ctx.cfg.lock_timeout)
        try:
            with folder:
                ctx.found.extra.build_cached = cached = folder.cached
                if not cached:
                    with self._slot():
                        ctx.status.enter(stage)
                        self._build_in(folder.path)
        except Timeout:
            raise Verdict("harness_error", f"no build slot or build folder came free in {ctx.cfg.lock_timeout:g} s") from None
        ctx.status.enter(stage)
        return folder.path

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        """One of the machine's build slots (:func:`..locking.build_slot`), waited for in the uncharged 'wait_build'."""
        start = time.perf_counter()
        with build_slot(self.ctx.cfg.lock_dir, self.ctx.cfg.lock_timeout) as slot:
            self.ctx.found.extra.build_slot_wait_s = round(time.perf_counter() - start, 3)
            self.ctx.found.extra.build_slot = slot
            yield

    def _build_in(self, path: Path) -> None:
        """The build step, on a GPU without the GPU (judge/gpuless.py); again with it, holding the device lock shared,
        where the candidate's module used the device as it was imported."""
        try:
            self._step(path, gpu=not self.ctx.on_gpu)
        except Verdict as verdict:
            if self.ctx.on_gpu and verdict.outcome == "compile_error" and gpuless.wanted(verdict.message):
                self.ctx.found.extra.build_with_gpu = True
                with self.device.hold("compile", shared=True, need=ADMISSION_MARGIN_BYTES):
                    try:
                        self._step(path, gpu=True)
                    finally:
                        self.device.close_phase()
                return
            raise

    def _step(self, path: Path, gpu: bool) -> None:
        from ...build.pch import Requests

        ctx, runners = self.ctx, self.runners
        env = self.compiler_env()
        wanted = path / "pch-wanted.jsonl"
        step_env = {**self.candidate_env(path, jit=False), "KB_PCH_WANTED": str(wanted),
                    "KB_PCH_WAIT": f"{min(PCH_WAIT_S, ctx.remaining() / 4):.0f}"}  # fmt: skip
        if not gpu:  # what its module asks of the GPU, answered (judge/gpuless.py)
            step_env[gpuless.ENV] = gpuless.describe(torch, ctx.device)
        if env.get("CXX") and ctx.cfg.pch_dir != "off":  # served while the step runs: Runners.wait polls it
            runners.pch = Requests(Path(ctx.cfg.pch_dir), wanted)
        # set up on the CPU: a build needs no CUDA context (0.5 s and a context switch on a GPU another judge times)
        mounts = Mounts(writable=[path], gpu=gpu)
        builder = runners.set_up(runners.launch(step_env, "build.log", mounts, side_name="build"), device="cpu")
        self._off_timing_cores(builder)
        try:
            load = p.Load(ctx.source, "kb_candidate.py", build_only=True, build_rank=ctx.spec.build_rank,
                          compile_only=ctx.cpu_check and self.compile_only)  # fmt: skip
            runners.ask(builder, load, p.Done)
            runners.check_disk(builder)
        finally:
            runners.stop(builder)
            ctx.found.extra.light_headers = light_counts(path)
            if runners.pch is not None:  # trusted work for later builds, even after a failed build: not its time
                ctx.status.enter("pch")
                ctx.found.extra.pch, runners.pch = runners.pch.close(), None
                ctx.status.enter("compile")

    def _off_timing_cores(self, builder: Side) -> None:
        """On a GPU, the build step's tree (its compilers are born from it) on every core but the GPUs' timing cores."""
        keep = cores.build_cores(self.ctx.pin.host_gpus or cores.visible_gpus()) if self.ctx.on_gpu else None
        if keep is not None and os.environ.get("KB_TIMING_CORE", "1") != "0":
            cores.bind(builder.pids(), keep)
            self.ctx.found.extra.build_cores = len(keep)

    @property
    def compile_only(self) -> bool:
        """``--device cpu-check`` and a CUDA extension: compiled by its build step, never run."""
        from ...candidates import builds_cuda_extension

        return self.ctx.cpu_check and builds_cuda_extension(self.ctx.source)

    def compiler_env(self) -> dict[str, str]:
        """CXX (the shared-PCH wrapper) and the CUDA arch the build is for: decided here, not by the candidate."""
        ctx = self.ctx
        env: dict[str, str] = {}
        if ctx.cfg.pch_dir != "off":
            from ...build.pch import compiler_wrapper

            wrapper = compiler_wrapper(ctx.cfg.pch_dir)
            if wrapper:
                env["CXX"] = wrapper
        if ctx.on_gpu and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
            major, minor = torch.cuda.get_device_capability(ctx.device)
            env["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
        if ctx.cpu_check:
            env.update(check_env())
        nvcc = _real_nvcc(env.get("CUDA_HOME", ""))
        light = light_headers()
        if nvcc and light != "0" and not os.environ.get("PYTORCH_NVCC"):
            from ...build.light import nvcc_command

            # a .cu's torch/extension.h built as torch/types.h where it builds (first as ATen's own headers with "aten")
            env["PYTORCH_NVCC"] = nvcc_command(nvcc, aten=light == "aten")
        return env

    def candidate_env(self, folder: Path | None, jit: bool = True) -> dict[str, str]:
        """A runner's compiler settings, build folder and (not for a build step) its Triton and inductor caches."""
        extra = self.compiler_env()
        if folder is not None:
            extra["TORCH_EXTENSIONS_DIR"] = str(folder)
        if jit:
            caches = self.jit_cache()
            extra.update(TRITON_CACHE_DIR=str(caches / "triton"), TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"))
        return extra

    def build_key(self) -> str:
        """This candidate's key in the build cache (its source, the versions, the GPU architecture, the compiler
        settings): its build folder and its JIT caches are named by it."""
        from ...build.cache import build_key

        if self._key is None:
            self._key = build_key(self.ctx.source, torch, self.ctx.device, self.compiler_env())
        return self._key

    def jit_cache(self) -> Path:
        """Triton's and inductor's caches for this candidate's source, kept from one judge of it to the next.

        Keyed like its build folder (source, versions, GPU architecture, compiler settings), so no other source ever
        reads it; writable by this source's runners only (a candidate can reach nothing but its own re-judges, which run
        the same code); emptied when it outgrows :data:`JIT_CACHE_BYTES`."""
        if self._jit is None:
            self._jit = Path(self.ctx.cfg.build_dir) / f"jit-{self.build_key()}"
            self._jit.mkdir(parents=True, exist_ok=True)
        return self._jit

    def trim_jit_cache(self) -> None:
        """Empty the caches once over :data:`JIT_CACHE_BYTES` (or too deep or odd to measure: the candidate shapes them);
        iterative and bounded (build/tree.py), so nothing in them can make this raise."""
        from ...build.tree import remove_tree, tree_size

        if self._jit is None:
            return
        if tree_size(self._jit, JIT_CACHE_BYTES) > JIT_CACHE_BYTES:
            remove_tree(self._jit, keep_top=True)  # its contents only: another judge of this source may be binding it now


def _real_nvcc(cuda_home: str) -> str:
    """The nvcc torch's build would run: ``cuda_home``'s (cpu-check's own toolkit), else the one torch's
    ``cpp_extension`` finds (its order, without importing it: 0.2 s in every supervisor); "" without one."""
    if not cuda_home and torch.version.cuda:  # a CPU build of torch finds none (CUDA_HOME None)
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or ""
        found = shutil.which("nvcc")
        if not cuda_home and found:
            cuda_home = os.path.dirname(os.path.dirname(found))
        elif not cuda_home and os.path.exists("/usr/local/cuda"):
            cuda_home = "/usr/local/cuda"
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    return nvcc if cuda_home and os.path.isfile(nvcc) else ""


def light_counts(folder: Path, limit: int = 1 << 16) -> dict[str, int] | None:
    """How the build's ``.cu`` compiles went (build/light.py's notes in the build folder; written where candidate code
    ran, so read as untrusted: bounded, counts only, never a verdict)."""
    counts: dict[str, int] = {}
    for notes in sorted(folder.glob("*/kb-light.jsonl"))[:16]:
        try:
            with notes.open("rb") as fh:
                text = fh.read(limit).decode(errors="replace")
        except OSError:
            continue
        for how in ("aten", "light", "fallback"):
            counts[how] = counts.get(how, 0) + text.count(f'"how": "{how}"')
    if counts and not counts["aten"]:  # KB_LIGHT_HEADERS=aten's tier: named where it compiled a .cu
        del counts["aten"]
    return counts or None


def check_env() -> dict[str, str]:
    """--device cpu-check's build and runner settings: the CUDA toolkit nvcc belongs to, an explicit architecture
    (there is no GPU to ask), and Triton's interpreter (kernels run on CPU tensors, one Python step per program)."""
    from ..compile_only import cuda_home

    env = {"TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST") or CHECK_ARCH, "TRITON_INTERPRET": "1"}
    home = cuda_home()
    if home:
        env["CUDA_HOME"] = home
    return env
