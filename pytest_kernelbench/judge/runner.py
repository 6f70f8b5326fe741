"""The runner: imports one model's code, calls it when asked, and says how long the call took.

    python -m pytest_kernelbench.judge.runner FD [SCRATCH]

The candidate's runner is its own sandboxed process (:mod:`pytest_kernelbench.judge.sandbox`);
the reference's runner is this same class on a thread of the supervisor, so both sides are timed
by the same code. Requests and replies are :mod:`pytest_kernelbench.judge.protocol` messages on
the Unix socket ``FD``; inputs and output slots are shared buffers
(:mod:`pytest_kernelbench.judge.transport`) that the supervisor allocates and fills.

Nothing this module reports is trusted: candidate code shares its process and can change any of
it. The supervisor checks every output itself, gives every call fresh inputs, and compares the
time claimed here with its own clock.

Imports torch and the judge's protocol, clocks and transport modules only.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import platform
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import protocol as p
from .clocks import Clocks
from .transport import MAX_FDS, Channel, ChannelClosed, SharedBuffer

BUILD_NICE = 10  # a build step's niceness (its compilers inherit it): the judges' own processes time calls; on the
# H100, 16 nvcc jobs at their priority came with 3 of 17 honest 10 us candidates rejected by the wall-clock check


def build_nice(rank: int) -> int:
    """A build's niceness: BUILD_NICE, plus one for each build queued ahead of it in the pool (19 at most). A cold pool
    starts all its builds at once; at one priority they share the cores and all finish together (the first result
    of the H100 synthetic set came at 120 s); so ranked, the first ones finish first and judging starts."""
    return min(19, BUILD_NICE + max(0, rank))


def exc_text(exc: BaseException, limit: int = 8000) -> str:
    """The traceback from the first frame outside this module (the model's or torch's code)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    raise TypeError(type(value).__name__)


class Runner:
    def __init__(self, channel: Channel, scratch: Path):
        self.channel = channel
        self.scratch = scratch
        self.buffers: dict[int, SharedBuffer] = {}
        self.cls: Any = None
        self.model: Any = None
        self.compile_mode = ""
        self.scrub_outputs = False
        # the last request's outputs, dropped when the next request comes, outside every wall window, on either side alike
        # (the reference's overwritten first: scrub_pending)
        self.last_outputs: list[Any] = []
        self.graph: Callable[[], Any] | None = None
        self.graph_error = ""
        self.torch: Any = None
        self.device: Any = None
        self.clocks: Clocks | None = None

    def serve(self) -> None:
        try:
            self._serve()
        finally:  # the reference's last output too, whether the supervisor said exit or went away
            with contextlib.suppress(Exception):
                self.scrub_pending()

    def _serve(self) -> None:
        while True:
            try:
                message, fds = self.channel.recv(max_fds=MAX_FDS)
            except ChannelClosed:
                return
            try:
                request = p.parse_request(message)
            except (TypeError, ValueError) as exc:
                self.channel.send(p.error_reply(f"bad request: {exc}"))
                continue
            if isinstance(request, p.Exit):
                return
            try:
                self.scrub_pending()
                answer = getattr(self, f"on_{request.kind}")(request, fds)
            except BaseException as exc:  # the model's exceptions, SystemExit and KeyboardInterrupt included
                answer = p.error_reply(exc_text(exc))
            self.channel.send(answer)

    # -------------------------------------------------------------- requests

    def on_setup(self, req: p.Setup, fds: list[int]) -> dict[str, Any]:
        import torch

        self.torch = torch
        self.device = torch.device(req.device, req.device_index) if req.device == "cuda" else torch.device("cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if req.threads:
            torch.set_num_threads(req.threads)
        if req.ieee_float32:  # cuDNN's convolutions run TF32 by default: 1e-3 off, ten times KernelBench's tolerance
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        if req.pin_threads and self.device.type == "cpu" and threading.current_thread() is threading.main_thread():
            pin_threads(torch)  # a runner process that times (a build's compilers would inherit one core)
        self.scrub_outputs = req.scrub_outputs
        self.timer = req.timer
        self.clocks = Clocks(torch, self.device)
        return p.reply(p.Ready, device_name=_device_name(torch, self.device), versions=_versions(torch))

    def on_map(self, req: p.MapBuffers, fds: list[int]) -> dict[str, Any]:
        if len(fds) != len(req.ids) or len(req.nbytes) != len(req.ids):
            for fd in fds:
                os.close(fd)
            return p.error_reply(f"{len(fds)} descriptors for {len(req.ids)} buffers")
        for buf_id, nbytes, fd in zip(req.ids, req.nbytes, fds, strict=True):
            self.buffers[buf_id] = SharedBuffer.open(fd, nbytes, self.device)
        self.graph = None  # a captured graph reads the buffers it was captured with
        return p.reply(p.Done)

    def on_unmap(self, req: p.UnmapBuffers, fds: list[int]) -> dict[str, Any]:
        self.graph = None
        # work still in flight on these buffers (another stream, an unsynced traced call) ends first: unmapping under
        # a running kernel is an illegal memory access (H100, 12:35 UTC: four GPU red-team files, at 1d1cfce)
        if self.clocks is not None:
            self.clocks.sync()
        for buf_id in req.ids:
            self.buffers.pop(buf_id, None)
        return p.reply(p.Done)

    def on_load(self, req: p.Load, fds: list[int]) -> dict[str, Any]:
        path = self.scratch / req.filename
        path.write_text(req.source)
        name = Path(req.filename).stem
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if req.build_only:  # compilers (nvcc, inherited) behind every judge's own processes: their calls are timed
            os.nice(build_nice(req.build_rank))
            from . import gpuless  # the standard library only

            if os.environ.get(gpuless.ENV):  # no GPU here: what the module asks of it, answered from the real one's
                gpuless.install(self.torch, os.environ[gpuless.ENV])
        if req.compile_only:
            from .compile_only import compile_only  # torch and the standard library only

            compile_only()
        spec.loader.exec_module(module)
        if self.clocks is not None:  # device work the import queued ends inside the request (its shared phase)
            self.clocks.sync()
        if req.build_only and not req.compile_only:
            return p.reply(p.Done)
        cls = getattr(module, req.class_name, None)
        if cls is None:
            return p.error_reply(f"{req.filename} defines no {req.class_name} class")
        self.cls, self.compile_mode = cls, req.compile_mode
        return p.reply(p.Done)

    def on_init(self, req: p.Init, fds: list[int]) -> dict[str, Any]:
        torch = self.torch
        args = [self.decode(node) for node in req.args]
        torch.manual_seed(req.seed)
        if self.device.type == "cuda":
            torch.cuda.manual_seed_all(req.seed)
        model = self.cls(*args).to(self.device)
        if req.mode == "eval":
            model.eval()
        elif req.mode == "train":
            model.train()
        if self.compile_mode:
            model = _compiled(torch, model, self.compile_mode)
        self.model = model
        self.clocks.sync()
        return p.reply(p.Done)

    def on_call(self, req: p.Call, fds: list[int]) -> dict[str, Any]:
        torch = self.torch
        args = [self.decode(node) for node in req.args]

        def call() -> Any:
            return self.model(*args)

        fn, ops = call, None
        if req.trace:  # a trial that is also the operator trace (Call.trace): the same call, its operators counted
            ops, fn = self.traced(call)
        if req.graph and self.device.type == "cuda" and not self.graph_error:
            if self.graph is None:
                try:
                    with torch.no_grad():
                        self.graph = self.clocks.graphed(call)
                except Exception as exc:  # noqa: BLE001 - timed with events instead, and the reply says why
                    self.graph_error = f"{type(exc).__name__}: {exc}"[:300]
                    self.clocks.sync()
            fn = self.graph or call
        with torch.no_grad():
            ms, out, offstream = self.clocks.time_once(fn)
            if req.expect is None:
                peak = torch.cuda.max_memory_reserved(self.device) if self.device.type == "cuda" else 0
                answer = p.reply(p.Called, ms=ms, offstream=offstream, mismatch="", values=[], structure=self.describe(out),
                                 graph_error=self.graph_error, peak_bytes=int(peak))  # fmt: skip
            else:
                values: list[Any] = []
                mismatch = self.deliver(out, req.expect, "output", values)
                self.clocks.sync()
                answer = p.reply(p.Called, ms=ms, offstream=offstream, mismatch=mismatch, values=values, structure=None,
                                 graph_error=self.graph_error, ops=ops)  # fmt: skip
            if fn is not self.graph:  # freed at the next request (a graph's output is its own buffer)
                self.last_outputs.append(out)
        del out
        return answer

    def traced(self, call: Callable[[], Any]) -> tuple[dict[str, int], Callable[[], Any]]:
        """``call`` under the operator trace of this thread: (the counts, filled when it runs; the traced call)."""
        ops: dict[str, int] = {}

        def traced_call() -> Any:
            counts, out = trace_this_thread(self.torch, call)
            ops.update(counts)
            return out

        return ops, traced_call

    def on_calls(self, req: p.Calls, fds: list[int]) -> dict[str, Any]:
        """A round's calls, one after another (a graph reads the buffers it was captured with: one call only)."""
        if len(req.calls) > 1 and any(c.graph for c in req.calls):
            return p.error_reply("a CUDA-graph call comes alone")
        if req.together and any(c.expect is None for c in req.calls):
            return p.error_reply("calls timed together deliver into slots")
        if req.together:
            return self.on_round(req)
        return p.reply(p.CalledEach, calls=[self.on_call(c, fds) for c in req.calls])

    def on_round(self, req: p.Calls) -> dict[str, Any]:
        """A round's calls timed together: one flush and sync, then every call and the copy of its output into its slots,
        back to back, in one span of events (CPU: perf_counter); each call claims the span over their count. The wall
        window around a round then holds little beyond the calls themselves, so that the supervisor's clock resolves
        calls of a few microseconds (benchmarks/experiments/batched_calls.py)."""
        args = [[self.decode(node) for node in c.args] for c in req.calls]
        mismatches: list[str] = []
        values: list[list[Any]] = []
        outs: list[Any] = []

        def round_of_calls() -> None:
            for call_args, call in zip(args, req.calls, strict=True):
                out = self.model(*call_args)
                values.append([])
                mismatches.append(self.deliver(out, call.expect, "output", values[-1]))
                outs.append(out)

        with self.torch.no_grad():
            ms, _, offstream = self.clocks.time_once(round_of_calls)  # its last sync: every copy is done
        self.last_outputs.extend(outs)  # freed at the next request, as a call's output is
        share = ms / len(req.calls)
        calls = [p.reply(p.Called, ms=share, offstream=offstream, mismatch=why, values=vals, structure=None, graph_error=self.graph_error)
                 for why, vals in zip(mismatches, values, strict=True)]  # fmt: skip
        return p.reply(p.CalledEach, calls=calls)

    def scrub_pending(self) -> None:
        """Drop the last request's outputs before serving the next one, the reference's overwritten first (freed memory
        must hold no answer). Not at the call's end: that was inside the call's wall window, where the candidate's side
        has no such work (on the H100 the scrub made the reference's overhead 1.7 ms larger than an identical
        candidate's on level 1's 6 GB elementwise problems, room for a candidate to under-report); and a candidate
        freeing its outputs there while the reference kept them was work in one window only (a round of 64 small
        calls frees 64 tensors). The supervisor pings before every timed call."""
        outs, self.last_outputs = self.last_outputs, []
        if outs and self.scrub_outputs:
            for out in outs:
                _scrub(self.torch, out)
            self.clocks.sync()

    def on_trace(self, req: p.Trace, fds: list[int]) -> dict[str, Any]:
        args = [self.decode(node) for node in req.args]
        with self.torch.no_grad():
            if req.all_threads:
                ops, all_threads = trace_all_threads(self.torch, lambda: self.model(*args), self.clocks.sync)
            else:
                ops, all_threads = trace_this_thread(self.torch, lambda: self.model(*args))[0], False
            self.clocks.sync()  # its kernels are done before the reply, as every other call's are
        return p.reply(p.Traced, ops=ops, all_threads=all_threads)

    def on_profile(self, req: p.Profile, fds: list[int]) -> dict[str, Any]:
        """One call under torch.profiler: device time and launches per kernel, the 20 longest."""
        torch = self.torch
        args = [self.decode(node) for node in req.args]
        with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            self.model(*args)
            self.clocks.sync()
        kernels: dict[str, list[float]] = {}
        for event in prof.key_averages():
            us = float(getattr(event, "self_device_time_total", 0.0) or getattr(event, "self_cuda_time_total", 0.0) or 0.0)
            if us > 0:
                kernels[event.key[:200]] = [round(us, 3), int(event.count)]
        top = dict(sorted(kernels.items(), key=lambda kv: -kv[1][0])[:20])
        return p.reply(p.Profiled, kernels=top)

    def on_ping(self, req: p.Ping, fds: list[int]) -> dict[str, Any]:
        return p.reply(p.Done)

    def on_release(self, req: p.Release, fds: list[int]) -> dict[str, Any]:
        self.graph = None
        if self.device is not None and self.device.type == "cuda":  # device memory back before the lock goes
            gc.collect()
            self.torch.cuda.empty_cache()
        return p.reply(p.Done)

    # -------------------------------------------------------------- values

    def decode(self, node: p.Node) -> Any:
        if "t" in node:
            ref = node["t"]
            return self.buffers[ref["buf"]].view(getattr(self.torch, ref["dtype"]), ref["shape"], ref["stride"], ref["offset"])
        if "v" in node:
            return node["v"]
        if "seq" in node:
            items = [self.decode(item) for item in node["seq"]]
            return tuple(items) if node.get("tuple") else items
        if "map" in node:
            return {key: self.decode(item) for key, item in node["map"]}
        raise ValueError(f"unknown value node {sorted(node)}")

    def describe(self, out: Any) -> p.Node:
        torch = self.torch
        if isinstance(out, torch.Tensor):
            return {"t": {"dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape)}}
        if isinstance(out, (list, tuple)):
            return {"seq": [self.describe(item) for item in out], "tuple": isinstance(out, tuple)}
        if isinstance(out, dict):
            return {"map": [[str(k), self.describe(v)] for k, v in out.items()]}
        return {"v": _json_value(out)}

    def deliver(self, out: Any, expect: p.Node, where: str, values: list[Any]) -> str:
        """Copy ``out`` into the slots ``expect`` names; '' or why it does not fit."""
        torch = self.torch
        if "t" in expect:
            slot = self.decode(expect)
            if not isinstance(out, torch.Tensor):
                return f"{where}: got {_kind(out)}, expected a tensor"
            if type(out) is not torch.Tensor and not isinstance(out, torch.nn.Parameter):
                return f"{where}: a {type(out).__name__} (tensor subclass), expected a plain tensor"
            if tuple(out.shape) != tuple(slot.shape):
                return f"{where}: shape {tuple(out.shape)}, expected {tuple(slot.shape)}"
            if out.dtype != slot.dtype:
                return f"{where}: dtype {out.dtype}, expected {slot.dtype}"
            if out.device.type != slot.device.type:
                return f"{where}: on {out.device}, expected {slot.device}"
            slot.copy_(out.detach())
            return ""
        if "v" in expect:
            if isinstance(out, torch.Tensor):
                return f"{where}: got a tensor, expected {_kind(expect['v'])}"
            try:
                values.append(_json_value(out))
            except TypeError:
                return f"{where}: got {_kind(out)}, expected {_kind(expect['v'])}"
            return ""
        if "seq" in expect:
            items = expect["seq"]
            if not isinstance(out, (list, tuple)) or len(out) != len(items):
                return f"{where}: got {_kind(out)}, expected a sequence of {len(items)} values"
            for i, (item, node) in enumerate(zip(out, items, strict=True)):
                why = self.deliver(item, node, f"{where} {i}" if where == "output" else f"{where}[{i}]", values)
                if why:
                    return why
            return ""
        keys = [key for key, _ in expect["map"]]
        if not isinstance(out, dict) or sorted(map(str, out)) != sorted(keys):
            return f"{where}: got {_kind(out)}, expected a dict with keys {keys}"
        by_name = {str(k): v for k, v in out.items()}
        for key, node in expect["map"]:
            why = self.deliver(by_name[key], node, f"{where}[{key!r}]", values)
            if why:
                return why
        return ""


def _compiled(torch: Any, model: Any, mode: str) -> Any:
    """The reference wrapped for --mode: torch.compile with an inductor mode, or with the torch_tensorrt backend."""
    if mode == "tensorrt":
        importlib.import_module("torch_tensorrt")  # registers the backend; the controller checked it is installed
        return torch.compile(model, backend="torch_tensorrt")
    return torch.compile(model, mode=None if mode == "default" else mode)


def _kind(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} values"
    if isinstance(value, dict):
        return f"a dict of {len(value)} values"
    return "None" if value is None else f"a {type(value).__name__}"


def _scrub(torch: Any, out: Any) -> None:
    """Overwrite the reference's own output once copied: freed memory must hold no answer."""
    if isinstance(out, torch.Tensor):
        try:
            out.detach().fill_(float("nan")) if out.is_floating_point() else out.detach().zero_()
        except RuntimeError:
            pass
    elif isinstance(out, (list, tuple)):
        for item in out:
            _scrub(torch, item)
    elif isinstance(out, dict):
        for item in out.values():
            _scrub(torch, item)


def trace_this_thread(torch: Any, fn: Callable[[], Any]) -> tuple[dict[str, int], Any]:
    """ATen operator counts of one call on the calling thread (a dispatch mode: no start-up cost), and its output."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: Counter[str] = Counter()

    class Recorder(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # else the first call imports torch._dynamo (~2 s)
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            counts[f"aten.{func._schema.name.split('::')[-1]}"] += 1
            return func(*args, **(kwargs or {}))

    with Recorder():
        out = fn()
    return dict(counts.most_common()), out


def pin_threads(torch: Any) -> None:
    """CPU, where the supervisor asks (``Setup.pin_threads``: ``KB_CPU_PIN=1``): this thread on the first core it may use,
    each thread of torch's intra-op pool (started here by a parallel op) on the next, round the allowed cores. On a
    2-vCPU machine the kernel left a runner's two OpenMP threads sharing one vCPU for whole runs, taking turns at every
    barrier while the other vCPU idled (a side 2.2 ms a call against 1.6; docs/performance.md); the two runners never
    run at once, so both pin to the same cores. Nothing where fewer than two cores are allowed."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return
    before = set(os.listdir("/proc/self/task"))
    torch.ones(1 << 22).add_(1)  # a parallel region: OpenMP starts its threads
    pool = sorted(int(t) for t in set(os.listdir("/proc/self/task")) - before)
    for i, tid in enumerate([threading.get_native_id(), *pool]):
        with contextlib.suppress(OSError):  # a thread that has ended since
            os.sched_setaffinity(tid, {allowed[i % len(allowed)]})


def trace_all_threads(torch: Any, fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[dict[str, int], bool]:
    """ATen operator counts of one call, from every thread (``profile_all_threads`` where torch has it)."""
    from torch.profiler import ProfilerActivity, profile

    config, all_threads = None, False
    try:
        from torch._C._profiler import _ExperimentalConfig

        config, all_threads = _ExperimentalConfig(profile_all_threads=True), True
    except (ImportError, TypeError):
        pass
    with profile(activities=[ProfilerActivity.CPU], experimental_config=config) as prof:
        fn()
        sync()
    counts = Counter(f"aten.{e.name[6:]}" for e in prof.events() if e.name.startswith("aten::"))
    return dict(counts.most_common()), all_threads


def _device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _versions(torch: Any) -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    triton = sys.modules.get("triton")
    if triton is not None:
        versions["triton"] = str(getattr(triton, "__version__", ""))
    return versions


def main(argv: list[str]) -> int:
    return serve(int(argv[1]), argv[2] if len(argv) > 2 else "")


EARLY_CUDA_ENV = "KB_RUNNER_CUDA"  # "N": this runner will judge on cuda:N (set by the supervisor for a GPU runner)


def serve(fd: int, scratch: str = "") -> int:
    """Serve the supervisor on socket ``fd`` until it says exit (also the entry of a forked reference runner)."""
    import faulthandler

    faulthandler.enable()  # a segfault in the model leaves its Python stack in the runner's log
    import torch  # noqa: F401 - at once, while the supervisor is busy elsewhere (it may start us before it needs us)

    start_cuda(torch, _early_cuda())  # the candidate's runner, on a GPU (Runners.early_cuda)

    gc.freeze()  # torch's objects are never garbage: a phase's gc.collect (on_release) walks only what came since; no tensor yet
    channel = Channel.from_fd(fd)
    profiled(Runner(channel, Path(scratch) if scratch else Path.cwd()).serve, "runner")
    return 0


def _early_cuda() -> int | None:
    value = os.environ.get(EARLY_CUDA_ENV, "")
    return int(value) if value.isdigit() else None


def start_cuda(torch: Any, index: int | None) -> None:
    """The candidate's runner's CUDA context, made as soon as it has imported torch, before the supervisor asks for
    anything: while the reference is judged (it is started at the evaluation's start, Evaluation.launch_early). A
    context took 0.3-0.5 s on the H200 machines, more with other judges making theirs. No candidate code has run; a
    failure here is left for Setup to report."""
    if index is None:
        return
    with contextlib.suppress(Exception):
        torch.cuda.set_device(index)
        torch.cuda.synchronize(index)


PROFILE_ENV = "KB_PROFILE_DIR"  # benchmarks only: cProfile the supervisor and the reference's runner into this folder


def profiled(run: Callable[[], Any], name: str) -> Any:
    """``run()``; under ``KB_PROFILE_DIR`` (benchmarks/call_overhead.py) with cProfile, its stats written
    there as ``<name>-<pid>.prof``. A sandboxed runner's environment never has the variable."""
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        return run()
    import cProfile

    profile = cProfile.Profile()
    try:
        return profile.runcall(run)
    finally:
        profile.dump_stats(os.path.join(folder, f"{name}-{os.getpid()}.prof"))


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: candidate threads or atexit hooks must not hang the exit
