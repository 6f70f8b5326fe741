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

import contextlib
import functools
import gc
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Bind the clock before anything else is imported.
_perf_counter = time.perf_counter


# Device locks a failed phase still holds: released by main() once the phase's memory is freed.
LOCKS_HELD_AFTER_FAILURE: list[Any] = []


def _free_device_memory(torch: Any) -> None:
    """Drop unreachable tensors (reference cycles too) and hand the allocator's free blocks back to the device."""
    gc.collect()
    torch.cuda.empty_cache()


def _release_locks_after_failure() -> None:
    if not LOCKS_HELD_AFTER_FAILURE:
        return
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            _free_device_memory(torch)
    except Exception:  # a poisoned context: the memory goes when the process does
        pass
    while LOCKS_HELD_AFTER_FAILURE:
        try:
            LOCKS_HELD_AFTER_FAILURE.pop().release(force=True)
        except Exception:
            pass


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
    source = Path(spec["candidate_path"]).read_text()
    key = build_key(source, torch, device)
    folder = BuildFolder(cfg["build_dir"], key, timeout=float(cfg["timeout"]))
    try:
        with folder:
            found["extra"]["build_cached"] = folder.cached
            _use_shared_pch(cfg.get("pch_dir", "off"), source)
            return _load_module("kb_candidate", spec["candidate_path"])
    except BaseException as exc:  # SyntaxError, build failures, SystemExit ...
        raise StageFailure("compile_error", _exc_text(exc)) from None


def _use_shared_pch(pch_dir: str, source: str) -> None:
    """Point ``CXX`` at the precompiled-header wrapper (pch.py) when the candidate builds an extension."""
    from .candidates import builds_extension

    if pch_dir == "off" or not builds_extension(source):
        return
    from .pch import compiler_wrapper

    wrapper = compiler_wrapper(pch_dir)
    if wrapper:
        os.environ["CXX"] = wrapper


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

    def host_inputs(seed_value: int) -> Any:
        """Outside the lock: the host inputs for this seed (or the seed, when made on the device)."""
        if cfg.get("inputs_on", "device") == "device" and device.type == "cuda":
            return seed_value
        status.enter("inputs")
        seed_all(seed_value)
        return list(reference.get_inputs())

    def materialize(made: Any) -> list[Any]:
        """Inside the lock: the inputs on the judged device."""
        if isinstance(made, int):
            seed_all(made)
            try:
                with device:
                    values = list(reference.get_inputs())
            except Exception:  # a get_inputs that only works on the host
                seed_all(made)
                values = list(reference.get_inputs())
            made = values
        return [v.to(device) if isinstance(v, torch.Tensor) else v for v in made]

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

    # Every phase that runs code on the device holds the device lock, so that no other worker's
    # checks share the timed window or the device memory; inputs are made on the host before
    # taking it. Compiling does not hold it, nor does the compile-mode reference warm-up (inductor
    # compiles on the CPU for seconds to minutes) unless its inputs are big (see WARMUP_UNLOCKED_BYTES).
    key = found["device_name"] + (f":{_device_uuid(torch, device)}" if device.type == "cuda" else "")
    lock = device_lock(cfg["lock_dir"], key if device.type == "cuda" else "cpu")

    @contextlib.contextmanager
    def on_device(stage: str) -> Iterator[None]:
        status.enter("wait_lock")
        try:
            lock.acquire(timeout=float(cfg["lock_timeout"]))
        except Timeout:
            raise StageFailure("unknown_error", f"could not take the device lock {lock.lock_file} in {cfg['lock_timeout']:g} s") from None
        try:
            status.enter(stage)
            if device.type == "cuda":
                free_gib = torch.cuda.mem_get_info(device)[0] / 2**30
                found["extra"]["min_free_gib_at_lock"] = round(min(free_gib, found["extra"].get("min_free_gib_at_lock", free_gib)), 2)
            yield
        except BaseException:
            # The failing phase's tensors live on in the traceback: keep the lock until main() has
            # dropped them and freed the memory, or the next holder may find the device full.
            LOCKS_HELD_AFTER_FAILURE.append(lock)
            raise
        if device.type == "cuda":
            _free_device_memory(torch)  # leave the device memory as we found it for the next holder
            kept = torch.cuda.memory_reserved(device) / 2**30
            if kept > 0.25:  # what this process keeps on the device while others hold the lock
                held = found["extra"].setdefault("gib_kept_after_phase", {})
                held[stage] = round(max(kept, held.get(stage, 0.0)), 2)
        lock.release()

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
        big = device.type == "cuda" and _input_bytes(torch, reference, seed_all, seed - 1) > WARMUP_UNLOCKED_BYTES
        with on_device("reference") if big else contextlib.nullcontext():
            with torch.no_grad():
                scrub(ref_call(*materialize(host_inputs(seed - 1))))
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

    _judge_on_device(spec, status, found, torch, device, clocks, ref_call, init_inputs, candidate,
                     seed_all, materialize, clone_all, scrub, check_tamper, on_device, host_inputs)


def _judge_on_device(spec: dict[str, Any], status: Status, found: dict[str, Any], torch: Any, device: Any, clocks: Any,
                     ref_call: Any, init_inputs: list[Any], candidate: Any, seed_all: Any, to_device: Any,
                     clone_all: Any, scrub: Any, check_tamper: Any, on_device: Any, host_inputs: Any) -> None:
    """init -> run/compare trials -> op trace -> time -> output sensitivity, each phase under the device lock."""
    from . import compare, optrace, timing

    cfg = spec["config"]
    seed = int(cfg["seed"])

    with on_device("init"):
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
        made = host_inputs(seed + 1 + trial)
        with on_device("run"):
            inputs = to_device(made)
            pristine = clone_all(inputs)
            try:
                with torch.no_grad():
                    out_new = new_model(*inputs)
                clocks.synchronize()
            except BaseException as exc:
                raise StageFailure("runtime_error", f"trial {trial + 1}/{trials}: " + _exc_text(exc)) from None
            check_tamper("forward")
            status.enter("compare")
            changed = _first_changed_input(torch, inputs, pristine)
            if changed is not None:
                raise StageFailure("rejected", f"ModelNew.forward modified input {changed} in place (trial {trial + 1})")
            with torch.no_grad():
                out_ref = ref_call(*pristine)
            clocks.synchronize()
            if compare.shares_memory(out_new, inputs) and not compare.shares_memory(out_ref, pristine):
                raise StageFailure("incorrect", f"trial {trial + 1}: the output aliases an input tensor")
            ok, reason, diff = compare.compare_outputs(out_new, out_ref, cfg["atol"], cfg["rtol"])
            worst = max(worst, diff)
            scrub(out_ref)
            del out_ref, out_new, inputs, pristine
            if not ok:
                raise StageFailure("incorrect", f"trial {trial + 1}/{trials}: {reason}")
        del made
    found["max_abs_diff"] = worst
    found["trials"] = trials

    # the ATen operators ModelNew.forward dispatches (custom kernels do not show up)
    made = host_inputs(seed + 500)
    with on_device("run"):
        trace_inputs = to_device(made)
        try:
            with torch.no_grad():
                ops = optrace.trace_ops(functools.partial(new_model, *trace_inputs))
        except Exception as exc:  # some extensions refuse dispatch modes; that is no verdict
            ops = {}
            found["extra"]["op_trace_error"] = f"{type(exc).__name__}: {exc}"[:300]
        del trace_inputs
    del made
    found["extra"]["aten_ops"] = ops
    if cfg["strict"]:
        compute = optrace.compute_ops(ops)
        if "op_trace_error" in found["extra"]:
            raise StageFailure("rejected", "--strict: the operators of ModelNew.forward could not be traced: "
                               + found["extra"]["op_trace_error"])
        if compute:
            listed = ", ".join(f"{op} x{n}" for op, n in list(compute.items())[:10])
            raise StageFailure("rejected", f"--strict: ModelNew.forward runs PyTorch compute ops: {listed}")
    check_tamper("forward")

    # time: reference and candidate interleaved in one locked window
    made, refill = host_inputs(seed + 1000), host_inputs(seed + 1001)
    graph_timer = cfg.get("timer") == "cuda-graph" and clocks.is_cuda
    # --kb-placement shared: both sides read new_inputs, refilled from ref_inputs (then only a
    # pristine copy) before every call, so reference and candidate see the same memory placement.
    shared = cfg.get("placement") == "shared"  # config refuses it with the graph timer
    with on_device("time"):
        ref_inputs = to_device(made)
        new_inputs = clone_all(ref_inputs)
        run_new = functools.partial(new_model, *new_inputs)
        run_ref = functools.partial(ref_call, *(new_inputs if shared else ref_inputs))
        before = functools.partial(_refill_shared, torch, new_inputs, ref_inputs) if shared else None
        # shared: the one output block must not hand the reference's answer over
        discard = functools.partial(_scrub_if_writable, scrub) if shared else None
        timed = {"new": run_new, "ref": run_ref}
        if graph_timer:
            timed = _graphed_or_events(torch, clocks, timed, found)
        try:
            with torch.no_grad():
                samples, last = timing.time_interleaved(
                    clocks,
                    timed,
                    warmup=int(cfg["warmup"]),
                    min_reps=int(cfg["min_reps"]),
                    max_reps=int(cfg["max_reps"]),
                    max_time=float(cfg["max_time"]),
                    rel_err=float(cfg["rel_err"]),
                    before=before,
                    discard=discard,
                )
                if shared:  # only the last call's output is left: one more call of each, candidate first
                    found["extra"]["placement"] = "shared"
                    timing.discard_all(last, discard)
                    last.clear()
                    last["new"] = _call_like_timed(clocks, before, "new", run_new)
                    last["ref"] = _call_like_timed(clocks, before, "ref", run_ref)
        except BaseException as exc:
            raise StageFailure("runtime_error", "while timing: " + _exc_text(exc)) from None
        check_tamper("timing")
        ok, reason, _ = compare.compare_outputs(last["new"], last["ref"], cfg["atol"], cfg["rtol"])
        last.clear()
        if not ok:
            which = "a call made like the timed ones, after them," if shared else "the last timed call"
            raise StageFailure("incorrect", f"the output of {which} is wrong: {reason}")
        # The timed calls reuse the same input tensors. Refill the candidate's in place with new
        # values and check once more: an answer cached by tensor identity (data_ptr, id) is stale
        # now. The reference's timed inputs go first (one input set fewer on the device).
        graph_new = timed["new"] if timed["new"] is not run_new else None
        timed.clear()
        del ref_inputs, run_ref, before
        fresh = to_device(refill)
        _copy_into(torch, new_inputs, fresh)
        with torch.no_grad():
            # the graph must read the refilled inputs too; its output is copied before the eager
            # call, which may write to the same buffer
            out_graph = clone_all(compare.flatten(graph_new())) if graph_new is not None else None
            out_new = run_new()
            clocks.synchronize()
            out_ref = ref_call(*fresh)
        clocks.synchronize()
        if out_graph is not None:
            ok, reason, _ = compare.compare_outputs(out_graph, out_ref, cfg["atol"], cfg["rtol"])
            if not ok:
                scrub(out_ref)
                raise StageFailure("incorrect", "the CUDA-graph replay ignores new input values (work captured "
                                   f"outside the inputs, or left off the capture stream): {reason}")
        ok, reason, _ = compare.compare_outputs(out_new, out_ref, cfg["atol"], cfg["rtol"])
        scrub(out_ref)
        del out_graph, out_new, out_ref, graph_new
        if not ok:
            raise StageFailure(
                "incorrect",
                f"after the timed calls' inputs were refilled in place with new values the output is wrong "
                f"(an answer cached by tensor identity?): {reason}",
            )
        del fresh, new_inputs, run_new
    del made, refill
    found["samples"] = samples
    if clocks.is_cuda:
        found["extra"].setdefault("timer", "events")
        found["extra"]["offstream_samples"] = dict(clocks.offstream)
        found["extra"]["sync_gap_ms"] = clocks.gap_ms
    del new_model  # the candidate is done: nothing of it runs while the reference's outputs exist below

    made = [host_inputs(seed + 2000), host_inputs(seed + 2001)]
    with on_device("time"):
        found["extra"].update(output_sensitivity(torch, ref_call, made, to_device, cfg, clocks))


# Loops over input tensors live in functions: a loop variable left in _judge_on_device's frame
# would keep an input set alive (on the device, outside the lock) until the next phase.
def _first_changed_input(torch: Any, inputs: list[Any], pristine: list[Any]) -> int | None:
    for i, (after, before) in enumerate(zip(inputs, pristine, strict=True)):
        if isinstance(before, torch.Tensor) and not torch.equal(after, before):
            return i
    return None


def _refill_shared(torch: Any, shared: list[Any], pristine: list[Any], _name: str) -> None:
    """Before each timed call under --kb-placement shared: the one input buffer gets the pristine values back."""
    _copy_into(torch, shared, pristine)


def _scrub_if_writable(scrub: Any, out: Any) -> None:
    """Overwrite an output before it is freed. A reference output always takes it (the trials scrub
    it too); a candidate output that cannot be written (an expanded view) only keeps its own answer."""
    try:
        scrub(out)
    except RuntimeError:
        pass


def _call_like_timed(clocks: Any, before: Any, name: str, fn: Any) -> Any:
    """The output check's call under --kb-placement shared: made exactly as a timed call is (refill,
    L2 flush, sync, events), its time dropped, so a candidate cannot tell it from the timed calls."""
    before(name)
    return clocks.time_once(fn, name)[1]


def _copy_into(torch: Any, targets: list[Any], values: list[Any]) -> None:
    for target, value in zip(targets, values, strict=True):
        if isinstance(value, torch.Tensor):
            target.copy_(value)


def _graphed_or_events(torch: Any, clocks: Any, fns: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """Both functions as CUDA-graph replays, or both as plain calls (with the reason) if either cannot be captured."""
    try:
        with torch.no_grad():
            graphed = {name: clocks.graphed(fn) for name, fn in fns.items()}
    except Exception as exc:  # noqa: BLE001 - a function graphs cannot hold is timed with events, and we say so
        found["extra"]["timer"] = "events"
        found["extra"]["cuda_graph_error"] = f"{type(exc).__name__}: {exc}"[:300]
        clocks.synchronize()
        return fns
    found["extra"]["timer"] = "cuda-graph"
    return graphed


def output_sensitivity(torch: Any, ref_call: Any, made: list[list[Any]], to_device: Any, cfg: dict, clocks: Any) -> dict:
    """How much the reference output moves between two random inputs (METR's near-constant problems).

    Runs after every candidate call is done, so no reference output exists while the candidate runs.
    """
    from . import compare

    outs = []
    for inputs in made:
        with torch.no_grad():
            out = compare.flatten(ref_call(*to_device(inputs)))
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


# A compile-mode warm-up whose inputs are bigger than this holds the device lock: eight workers
# warming up level-1 problems with 6.4 GB inputs at once ran an H100 out of memory.
WARMUP_UNLOCKED_BYTES = 1 << 30


def _input_bytes(torch: Any, reference: Any, seed_all: Any, seed: int) -> float:
    """Bytes of one input set, from shapes alone (get_inputs on the meta device); inf if unknown."""
    try:
        seed_all(seed)
        with torch.device("meta"):
            values = list(reference.get_inputs())
        return float(sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor)))
    except Exception:
        return float("inf")


def _die_with_parent(parent: int) -> None:
    """Kill this worker's whole process group (the candidate's children too) once the parent is gone."""
    import signal
    import threading

    sleep, getppid, killpg, group = time.sleep, os.getppid, os.killpg, os.getpgrp()  # bound before candidate code

    def watch() -> None:
        while getppid() == parent:
            sleep(0.5)
        killpg(group, signal.SIGKILL)

    threading.Thread(target=watch, name="kb-parent-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    if spec.get("parent_pid"):
        _die_with_parent(int(spec["parent_pid"]))
    status = Status(spec["status_path"])
    outcome, message, found = "correct", "", {"extra": {}}
    try:
        (build_only if spec.get("build_only") else judge)(spec, status, found)
    except StageFailure as failure:
        outcome, message = failure.outcome, failure.message
    except BaseException as exc:  # a harness or problem bug: still a result
        outcome, message = "unknown_error", _exc_text(exc)
    _release_locks_after_failure()  # the exception and its frames are gone now
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
