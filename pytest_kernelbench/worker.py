"""The evaluation worker: runs in a fresh subprocess, one candidate per process.

    python -m pytest_kernelbench.worker SPEC.json

Stages, each announced on the status file before it starts so that a crash is
attributed to the stage it happened in: reference (load the problem, build Model),
compile (import the candidate), init (build ModelNew), run + compare (several
trials with fresh seeded inputs; the candidate runs first and never sees a
reference output), wait_lock + time (interleaved timing under the device lock),
then the outputs of the timed calls are checked too. The result is written as JSON.

This module imports torch and the engine only: no LLM or reporting libraries.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# Bind the clock before anything else is imported.
_perf_counter = time.perf_counter


class StageFailure(Exception):
    def __init__(self, outcome: str, message: str):
        super().__init__(message)
        self.outcome = outcome
        self.message = message


class Status:
    """Appends ``<stage> <seconds>`` lines that the parent reads to attribute crashes and lock waits."""

    def __init__(self, path: str):
        self._fh = open(path, "a", buffering=1)
        self.stage = "start"
        self._t0 = _perf_counter()
        self.stage_seconds: dict[str, float] = {}
        self._stage_start = self._t0

    def enter(self, stage: str) -> None:
        now = _perf_counter()
        self.stage_seconds[self.stage] = self.stage_seconds.get(self.stage, 0.0) + now - self._stage_start
        self.stage, self._stage_start = stage, now
        self._fh.write(f"{stage} {now - self._t0:.3f}\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _exc_text(exc: BaseException) -> str:
    """The traceback from the first frame outside this module (the candidate's or torch's code)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return _tail("".join(traceback.format_exception(type(exc), exc, tb)))


def _load_module(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compile_candidate(spec: dict[str, Any], torch: Any, device: Any, found: dict[str, Any]) -> Any:
    """Import the candidate (``load_inline`` builds happen here) inside its own keyed build folder."""
    from .buildcache import BuildFolder, build_key

    cfg = spec["config"]
    key = build_key(Path(spec["candidate_path"]).read_text(), torch, device)
    folder = BuildFolder(cfg["build_dir"], key, timeout=float(cfg["timeout"]))
    try:
        with folder:
            found["extra"]["build_cached"] = folder.cached
            return _load_module("kb_candidate", spec["candidate_path"])
    except BaseException as exc:  # SyntaxError, build failures, SystemExit ...
        raise StageFailure("compile_error", _exc_text(exc)) from None


def build_only(spec: dict[str, Any], status: Status, found: dict[str, Any]) -> None:
    """Prebuild: import the candidate so that its extensions land in the build cache; judge nothing."""
    import torch

    cfg = spec["config"]
    device = torch.device(cfg["device"], cfg["device_index"]) if cfg["device"] == "cuda" else torch.device("cpu")
    status.enter("compile")
    compile_candidate(spec, torch, device, found)


def judge(spec: dict[str, Any], status: Status, found: dict[str, Any]) -> None:
    """Run the stages, filling ``found`` as they go (so a failure keeps what was learnt before it)."""
    import torch
    from filelock import Timeout

    from . import compare, tamper, timing
    from .locking import device_lock

    cfg = spec["config"]
    device = torch.device(cfg["device"], cfg["device_index"]) if cfg["device"] == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    clocks = timing.Clocks(device)
    found.update(device_name=_device_name(torch, device), versions=_versions(torch))

    def seed_all(seed: int) -> None:
        torch.manual_seed(seed)
        if device.type == "cuda":
            torch.cuda.manual_seed_all(seed)

    def to_device(values: list[Any]) -> list[Any]:
        return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

    def clone_all(values: list[Any]) -> list[Any]:
        return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]

    def scrub(out: Any) -> None:
        """Overwrite a reference output so freed device memory holds no answer to find."""
        for leaf in compare.flatten(out):
            if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
                leaf.detach().fill_(float("nan"))
            elif isinstance(leaf, torch.Tensor):
                leaf.detach().zero_()

    def check_tamper(stage: str) -> None:
        changed = tamper.changed_since(baseline)
        if changed:
            shown = ", ".join(changed[:8]) + (" ..." if len(changed) > 8 else "")
            raise StageFailure("rejected", f"candidate patched the harness or torch during {stage}: {shown}")

    # reference
    status.enter("reference")
    reference = _load_module("kb_reference", spec["problem_path"])
    for needed in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(reference, needed):
            raise StageFailure("unknown_error", f"the problem defines no {needed}")
    seed = int(cfg["seed"])
    seed_all(seed)
    init_inputs = list(reference.get_init_inputs())
    seed_all(seed)
    ref_model = reference.Model(*init_inputs).to(device)
    ref_call = ref_model
    if cfg["mode"] == "compile":
        ref_call = torch.compile(ref_model)
        seed_all(seed - 1)
        with torch.no_grad():
            scrub(ref_call(*to_device(list(reference.get_inputs()))))
        clocks.synchronize()
        if device.type == "cuda":
            torch.cuda.empty_cache()  # the warm-up's blocks: other workers may need them
    baseline = tamper.snapshot()

    # compile
    status.enter("compile")
    candidate = compile_candidate(spec, torch, device, found)
    if not hasattr(candidate, "ModelNew"):
        raise StageFailure("compile_error", "the candidate defines no ModelNew class")
    check_tamper("import")

    # Everything from here on runs code on the device, so it holds the device lock: another
    # worker's correctness checks must neither share the timed window nor the device memory.
    # Compiling (above) and the compile-mode reference warm-up do not hold it.
    status.enter("wait_lock")
    key = found["device_name"] + (f":{_device_uuid(torch, device)}" if device.type == "cuda" else "")
    lock = device_lock(cfg["lock_dir"], key if device.type == "cuda" else "cpu")
    try:
        lock.acquire(timeout=float(cfg["lock_timeout"]))
    except Timeout:
        raise StageFailure("unknown_error", f"could not take the device lock {lock.lock_file} in {cfg['lock_timeout']:g} s") from None
    try:
        _judge_on_device(spec, status, found, torch, device, clocks, reference, ref_call, init_inputs, candidate,
                         seed_all, to_device, clone_all, scrub, check_tamper)
        if device.type == "cuda":
            torch.cuda.empty_cache()  # leave the device memory as we found it for the next lock holder
    finally:
        lock.release()


def _judge_on_device(spec: dict[str, Any], status: Status, found: dict[str, Any], torch: Any, device: Any, clocks: Any,
                     reference: Any, ref_call: Any, init_inputs: list[Any], candidate: Any, seed_all: Any,
                     to_device: Any, clone_all: Any, scrub: Any, check_tamper: Any) -> None:
    """init -> run/compare trials -> op trace -> time -> output sensitivity, under the device lock."""
    from . import compare, optrace, timing

    cfg = spec["config"]
    seed = int(cfg["seed"])

    # init
    status.enter("init")
    try:
        seed_all(seed)
        new_model = candidate.ModelNew(*init_inputs).to(device)
        clocks.synchronize()
    except BaseException as exc:
        raise StageFailure("init_error", _exc_text(exc)) from None
    check_tamper("__init__")

    trials = int(cfg["trials"])
    worst = 0.0
    for trial in range(trials):
        status.enter("run")
        seed_all(seed + 1 + trial)
        inputs = to_device(list(reference.get_inputs()))
        pristine = clone_all(inputs)
        try:
            with torch.no_grad():
                out_new = new_model(*inputs)
            clocks.synchronize()
        except BaseException as exc:
            raise StageFailure("runtime_error", f"trial {trial + 1}/{trials}: " + _exc_text(exc)) from None
        check_tamper("forward")
        status.enter("compare")
        for i, (after, before) in enumerate(zip(inputs, pristine, strict=True)):
            if isinstance(before, torch.Tensor) and not torch.equal(after, before):
                raise StageFailure("rejected", f"ModelNew.forward modified input {i} in place (trial {trial + 1})")
        with torch.no_grad():
            out_ref = ref_call(*pristine)
        clocks.synchronize()
        if compare.shares_memory(out_new, inputs) and not compare.shares_memory(out_ref, pristine):
            raise StageFailure("incorrect", f"trial {trial + 1}: the output aliases an input tensor")
        ok, reason, diff = compare.compare_outputs(out_new, out_ref, cfg["atol"], cfg["rtol"])
        worst = max(worst, diff)
        scrub(out_ref)
        del out_ref, out_new
        if not ok:
            raise StageFailure("incorrect", f"trial {trial + 1}/{trials}: {reason}")
    found["max_abs_diff"] = worst
    found["trials"] = trials
    del inputs, pristine  # the last trial's tensors: free them before tracing and timing

    # the ATen operators ModelNew.forward dispatches (custom kernels do not show up)
    status.enter("run")
    seed_all(seed + 500)
    trace_inputs = to_device(list(reference.get_inputs()))
    try:
        with torch.no_grad():
            ops = optrace.trace_ops(functools.partial(new_model, *trace_inputs))
    except Exception as exc:  # some extensions refuse dispatch modes; that is no verdict
        ops = {}
        found["extra"]["op_trace_error"] = f"{type(exc).__name__}: {exc}"[:300]
    found["extra"]["aten_ops"] = ops
    del trace_inputs
    if cfg["strict"]:
        compute = optrace.compute_ops(ops)
        if "op_trace_error" in found["extra"]:
            raise StageFailure("rejected", "--strict: the operators of ModelNew.forward could not be traced: "
                               + found["extra"]["op_trace_error"])
        if compute:
            listed = ", ".join(f"{op} x{n}" for op, n in list(compute.items())[:10])
            raise StageFailure("rejected", f"--strict: ModelNew.forward runs PyTorch compute ops: {listed}")
    check_tamper("forward")

    # time: reference and candidate interleaved in the locked window
    status.enter("time")
    seed_all(seed + 1000)
    ref_inputs = to_device(list(reference.get_inputs()))
    new_inputs = clone_all(ref_inputs)

    def run_new() -> Any:
        return new_model(*new_inputs)

    def run_ref() -> Any:
        return ref_call(*ref_inputs)

    try:
        with torch.no_grad():
            samples, last = timing.time_interleaved(
                clocks,
                {"new": run_new, "ref": run_ref},
                warmup=int(cfg["warmup"]),
                min_reps=int(cfg["min_reps"]),
                max_reps=int(cfg["max_reps"]),
                max_time=float(cfg["max_time"]),
                rel_err=float(cfg["rel_err"]),
            )
    except BaseException as exc:
        raise StageFailure("runtime_error", "while timing: " + _exc_text(exc)) from None
    check_tamper("timing")
    ok, reason, _ = compare.compare_outputs(last["new"], last["ref"], cfg["atol"], cfg["rtol"])
    if not ok:
        raise StageFailure("incorrect", f"the output of the last timed call is wrong: {reason}")
    found["samples"] = samples
    if clocks.is_cuda:
        found["extra"]["offstream_samples"] = dict(clocks.offstream)
        found["extra"]["sync_gap_ms"] = clocks.gap_ms
    found["extra"].update(output_sensitivity(torch, reference, ref_call, seed_all, to_device, cfg, clocks))


def output_sensitivity(torch: Any, reference: Any, ref_call: Any, seed_all: Any, to_device: Any, cfg: dict, clocks: Any) -> dict:
    """How much the reference output moves between two random inputs (METR's near-constant problems).

    Runs after every candidate call is done, so no reference output exists while the candidate runs.
    """
    from . import compare

    outs = []
    for offset in (2000, 2001):
        seed_all(int(cfg["seed"]) + offset)
        with torch.no_grad():
            out = compare.flatten(ref_call(*to_device(list(reference.get_inputs()))))
            outs.append([t.detach() for t in out if isinstance(t, torch.Tensor) and t.is_floating_point()])
    clocks.synchronize()
    if not outs[0]:
        return {}
    spread, suspect = 0.0, True
    for a, b in zip(*outs, strict=True):
        if a.numel():
            _, over, diff = compare.compare_chunked(a, b, cfg["atol"], cfg["rtol"])
            spread, suspect = max(spread, diff), suspect and over == 0
    scale = max(float(a.abs().max()) for a in outs[0] if a.numel()) or 1.0
    return {"output_sensitivity": spread / scale, "suspect_constant_output": bool(suspect)}


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


def _device_uuid(torch: Any, device: Any) -> str:
    return str(getattr(torch.cuda.get_device_properties(device), "uuid", device.index))


def _versions(torch: Any) -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    triton = sys.modules.get("triton")
    if triton is not None:
        versions["triton"] = getattr(triton, "__version__", "")
    return versions


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    status = Status(spec["status_path"])
    outcome, message, found = "correct", "", {"extra": {}}
    try:
        (build_only if spec.get("build_only") else judge)(spec, status, found)
    except StageFailure as failure:
        outcome, message = failure.outcome, failure.message
    except BaseException as exc:  # a harness or problem bug: still a result
        outcome, message = "unknown_error", _exc_text(exc)
    failed_stage = status.stage
    status.enter("done")
    if "versions" not in found:
        try:
            import torch

            found["versions"] = _versions(torch)
        except Exception:
            pass
    found.update(outcome=outcome, message=message, stage=failed_stage if outcome != "correct" else "done")
    found["stage_seconds"] = status.stage_seconds
    tmp = spec["result_path"] + ".tmp"
    Path(tmp).write_text(json.dumps(found))
    os.replace(tmp, spec["result_path"])
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    rc = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # skip interpreter teardown: candidate threads or atexit hooks must not hang us
