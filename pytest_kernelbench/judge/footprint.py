"""Before a judge starts: whether the problem's data fits this machine's memory.

A supervisor that runs out of host memory is killed by the kernel (SIGKILL, no result). So before an
evaluation starts, the problem is measured where nothing is allocated: its inputs made by ``get_inputs()``
and its Model built on the meta device, and the reference called on them for its outputs' shapes and
dtypes (an input set's size stands in for the outputs when that call does not run on meta within
:data:`MEASURE_SECONDS`). The judge holds several copies of that data at once (:data:`JUDGE_COPIES`);
their sum, with :data:`MARGIN_BYTES` for the processes themselves, is compared with the memory free for
it: ``MemAvailable`` of ``/proc/meminfo`` (and the cgroup's limit, where one is set) for a CPU judge,
the GPU's total memory for a GPU judge (free memory there comes and goes with other judges, whose
admission :mod:`.locking` handles). A problem that does not fit is skipped with one line naming the
size and the way out; one that fits only with fewer copies is judged with them: on a GPU one call a timing round
first, then (on either device) without the varied trials' copies (``--inputs standard``); what changed is in the
result's ``extra.footprint``.

Problems are trusted code, yet they run where a judge runs them, never in the process that drives the run: the
controller measures each one once in a child of the fork server (:mod:`.forkserver`, entry :func:`main`) or a
fresh interpreter, and remembers it (:func:`remembered`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..config import EvalConfig

GIB = 1 << 30
MARGIN_BYTES = GIB  # three interpreters that imported torch, the allocator's slack
MEASURE_SECONDS = 10.0  # building and calling the reference on meta tensors (an LSTM's meta call took 20-56 s)
CHILD_SECONDS = 2 * MEASURE_SECONDS + 20  # the child that measures, at most: its start, both steps, its answer
ROUND_EXTRA_BYTES = 3 * (256 << 20)  # a GPU timing round's further calls: each side's buffer (ROUND_BYTES) and fresh inputs
SHIFT_MAX = GIB  # a GPU time phase's room for moving inputs, per side (supervisor.SHIFT_MAX)
SKIP_LEVELS = ("4",)  # Hugging Face models: building one may fetch weights


@dataclasses.dataclass(frozen=True)
class Copies:
    """How many of each the judge holds at its peak."""

    inputs: int
    outputs: int
    params: int


# What a CPU judge holds at its peak, measured (2026-11-29, the 2-core machine, MemAvailable sampled every 0.1-0.2 s while
# `kbagent eval` judged a torch candidate): a relu of 1 GiB in and out took 17.4 GiB with --inputs standard and 20.1 with
# varied (0.5 GiB: 8.9 and 9.2), a column sum of 1 GiB in and 16 KiB out 6.1 GiB with either. The supervisor's fresh
# set, each side's shared buffer and runner's copy, the outputs in each runner, its slot, the supervisor's reading and the
# comparison's; the margin below covers the processes.
JUDGE_COPIES = Copies(inputs=6, outputs=12, params=2)
HOST_VARIED = Copies(inputs=0, outputs=3, params=0)  # with --inputs varied: the trials' varied sets and their answers
# On a GPU a varied set is drawn beside the fresh set it comes from: up to 1.64 times that set at once while it is made
# (distributions._vary_tensor), then one more set until it is written.
DEVICE_VARIED = Copies(inputs=2, outputs=0, params=0)
# A GPU judge: the runners' peaks on top of the host's (Supervisor.admission_bytes), before the time phase's room to move.
DEVICE_COPIES = Copies(inputs=5, outputs=6, params=4)


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Bytes of one input set, of the reference's outputs and of its parameters and buffers."""

    inputs: int
    outputs: int
    params: int
    outputs_measured: bool = True
    flops: int = -1  # the reference's floating-point operations (FlopCounterMode; -1: not counted): judge/sol.py
    dtype: str = "float32"  # the dtype of the largest floating-point tensor of its inputs and parameters

    def need(self, copies: Copies = JUDGE_COPIES) -> int:
        return self.held(copies) + MARGIN_BYTES

    def held(self, copies: Copies) -> int:
        return copies.inputs * self.inputs + copies.outputs * self.outputs + copies.params * self.params


@dataclasses.dataclass(frozen=True)
class Fit:
    """The verdict before judging: ``skip`` (one line) when the problem cannot fit, else the config to judge with."""

    config: EvalConfig
    skip: str = ""
    note: str = ""  # set when the config was changed to fit


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


# ---------------------------------------------------------------- measuring a problem (in a child of the fork server)


class _TooSlow(BaseException):
    """Raised when the time for a step is up (a BaseException: the problem's own handlers let it pass)."""


_cache: dict[str, Footprint | None] = {}
_cache_lock = threading.Lock()


def remembered(source: str, measure: Callable[[], Footprint | None]) -> Footprint | None:
    """The footprint of ``source``, measured once per process by ``measure`` (the controller's child process)."""
    key = hashlib.sha256(source.encode()).hexdigest()
    with _cache_lock:
        if key not in _cache:
            _cache[key] = measure()
        return _cache[key]


def measure_here(source: str) -> Footprint | None:
    """The problem's footprint from shapes alone, measured in this process (its main thread); None when its inputs or
    model cannot be made on the meta device in time."""
    import torch

    from .shrink import _module, _tensors

    def nbytes(values: Any) -> int:
        return sum(t.numel() * t.element_size() for t in _tensors(values))

    try:
        with _module(source) as module, torch.device("meta"), torch.no_grad():
            with _time_limit(MEASURE_SECONDS):
                torch.manual_seed(0)
                inputs = list(module.get_inputs())
                model = module.Model(*module.get_init_inputs())
            if any(t.device.type != "meta" for t in _tensors(inputs)):
                return None  # made on a device of its own choosing: real memory, not a shape
            weights = [*model.parameters(), *model.buffers()]
            try:
                with _time_limit(MEASURE_SECONDS):
                    answer, flops = _counted(model, inputs)
                outputs, measured = nbytes(answer), True
            except (Exception, _TooSlow):  # noqa: BLE001 - an op with no meta kernel, a slow one: an input set stands in
                outputs, measured, flops = nbytes(inputs), False, -1
            return Footprint(nbytes(inputs), outputs, nbytes(weights), measured, flops, _main_dtype([*inputs, *weights]))
    except (Exception, _TooSlow):  # noqa: BLE001 - a problem that cannot be sized without data, or not in time
        return None


def _counted(model: Any, inputs: list[Any]) -> tuple[Any, int]:
    """The reference's answer and its FLOPs (FlopCounterMode); -1 where the counter fails and the plain call does not."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with FlopCounterMode(display=False) as counter:
            answer = model(*inputs)
        return answer, int(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - the counter's hooks on an unusual module: the call again without them
        return model(*inputs), -1


def _main_dtype(values: Any) -> str:
    """The dtype of the largest floating-point tensor among ``values`` (float32 without one)."""
    from .shrink import _tensors

    floating = [t for t in _tensors(values) if t.is_floating_point()]
    return str(max(floating, key=lambda t: t.numel()).dtype).removeprefix("torch.") if floating else "float32"


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """:class:`_TooSlow` raised in this (main) thread once ``seconds`` have passed."""

    def expire(signum: int, frame: Any) -> None:
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str]) -> int:
    """``python -m pytest_kernelbench.judge.footprint PROBLEM.py`` (or a child of the fork server): the footprint of
    the problem in ``PROBLEM.py.json``, ``null`` when it cannot be measured."""
    path = Path(argv[1])
    found = measure_here(path.read_text())
    out = path.with_name(path.name + ".json")
    out.with_suffix(".tmp").write_text(json.dumps(dataclasses.asdict(found) if found else None))
    os.replace(out.with_suffix(".tmp"), out)
    return 0


def read_child(path: Path) -> Footprint | None:
    """What :func:`main` wrote for the problem at ``path`` (None when nothing was)."""
    try:
        data = json.loads(path.with_name(path.name + ".json").read_text())
    except (OSError, ValueError):
        return None
    return Footprint(**data) if isinstance(data, dict) else None


# ---------------------------------------------------------------- the memory there is


def _meminfo(field: str) -> int | None:
    """Bytes of one ``/proc/meminfo`` field (``MemAvailable``, ``MemTotal``); None where it cannot be read."""
    try:
        found = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
    except OSError:
        return None
    return int(found.group(1)) * 1024 if found else None


def host_available() -> int | None:
    """Bytes of host memory a new process may take: ``MemAvailable``, within the cgroup's limit where one is set."""
    available = _meminfo("MemAvailable")
    if available is None:
        return None
    room = _cgroup_room()
    return min(available, room) if room is not None else available


def tree_memory_default() -> int:
    """The host memory a candidate's tree may hold where ``--kb-max-memory`` sets no limit (its cgroup's ``memory.max``):
    the host's less a reserve for the judge (a tenth, at least 2 GiB), so that one candidate never runs the host out of
    memory under the supervisor; 0 where the total is unknown."""
    total = _meminfo("MemTotal") or 0
    return max(0, total - max(2 << 30, total // 10))


def _cgroup_room() -> int | None:
    """The cgroup (v2) limit less its usage, for this process's cgroup; None without a limit."""
    try:
        line = next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
        folder = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((folder / "memory.current").read_text()))
    except (OSError, StopIteration, ValueError):
        return None


def device_capacity(index: int) -> int | None:
    """The GPU's total memory (no CUDA context is made for it)."""
    try:
        import torch

        return int(torch.cuda.get_device_properties(index).total_memory)
    except Exception:  # noqa: BLE001 - no CUDA here
        return None


# ---------------------------------------------------------------- the decision


def wanted(problem: Any, config: EvalConfig) -> bool:
    """Whether ``problem`` is measured before it is judged with ``config``: not with ``--device cpu-check`` (it scales
    sizes down), not level 4 (Hugging Face models), not a client's problem (its code runs only in a sandbox), not with
    ``KB_FOOTPRINT=0``."""
    if config.device == "cpu-check" or config.problem_sandbox:
        return False
    return problem.level not in SKIP_LEVELS and os.environ.get("KB_FOOTPRINT", "1") != "0"


def fit(problem: Any, config: EvalConfig, found: Footprint | None) -> Fit:
    """Whether ``problem`` (a :class:`~pytest_kernelbench.problems.Problem`) whose footprint is ``found`` (None: not
    known, judged as asked) can be judged here with ``config``."""
    if found is None:
        return Fit(config)
    if config.device == "cuda":
        return plan_device(problem.id, found, config, device_capacity(config.device_index))
    return plan_host(problem.id, found, config, host_available())


def plan_host(name: str, found: Footprint, config: EvalConfig, available: int | None) -> Fit:
    """As asked; else, where only the varied draws do not fit, on ``get_inputs()``'s own distribution (``--inputs
    standard``: three output sets fewer); else skipped."""
    lean = found.need()
    full = lean + (found.held(HOST_VARIED) if config.inputs == "varied" else 0)
    if available is None or full <= available:
        return Fit(config)
    if lean < full and lean <= available:
        return Fit(dataclasses.replace(config, inputs="standard"), note=_standard_note(name, full, available, "of host memory available"))
    return Fit(config, skip=f"{name} needs about {gib(lean)} of host memory and {gib(available)} is available: {_sizes(found)}; "
               "--device cpu-check judges it on scaled-down sizes")  # fmt: skip


def plan_device(name: str, found: Footprint, config: EvalConfig, capacity: int | None) -> Fit:
    """On a GPU the runners' peaks and the time phase's room to move inputs come on top (Supervisor.admission_bytes).
    What does not fit as asked is judged with one call per timing round, then also on ``get_inputs()``'s own
    distribution, before it is skipped."""
    moving = 2 * min(SHIFT_MAX, max(256 << 20, found.inputs + found.outputs) // 4)
    leanest = found.need(DEVICE_COPIES) + moving
    lean = leanest + (found.held(DEVICE_VARIED) if config.inputs == "varied" else 0)
    full = lean + (ROUND_EXTRA_BYTES if config.round_calls != 1 else 0)
    if capacity is None or full <= capacity:
        return Fit(config)
    if lean <= capacity:
        note = f"{name}: one call per timing round (--kb-round-calls 1): {gib(full)} with a round's calls, {gib(capacity)} on the GPU"
        return Fit(dataclasses.replace(config, round_calls=1), note=note)
    if leanest <= capacity:
        return Fit(dataclasses.replace(config, round_calls=1, inputs="standard"),
                   note=_standard_note(name, lean, capacity, "on the GPU") + "; one call per timing round (--kb-round-calls 1)")
    return Fit(config, skip=f"{name} needs about {gib(leanest)} of GPU memory and the GPU has {gib(capacity)}: "
               f"{_sizes(found, DEVICE_COPIES)}; --device cpu-check checks it on scaled-down sizes")  # fmt: skip


def _standard_note(name: str, need: int, room: int, where: str) -> str:
    return (f"{name}: --inputs standard (trials on get_inputs()'s own distribution only): {gib(need)} with the varied "
            f"trials' inputs and answers, {gib(room)} {where}")


def _sizes(found: Footprint, copies: Copies = JUDGE_COPIES) -> str:
    outputs = f"outputs {gib(found.outputs)}" if found.outputs_measured else f"outputs taken as {gib(found.outputs)}"
    return (f"one input set {gib(found.inputs)}, {outputs}, parameters {gib(found.params)}, held "
            f"{copies.inputs}, {copies.outputs} and {copies.params} times at once")  # fmt: skip


def killed(problem: Any, found: Footprint | None, stage: str) -> str:
    """One line for a supervisor that the kernel killed (SIGKILL, most likely out of memory) during ``stage``."""
    size = f" (the judge's estimate for it: about {gib(found.need())}; {_sizes(found)})" if found else ""
    available = host_available()
    free = f", {gib(available)} of host memory available now" if available is not None else ""
    return (f"{problem.id}: the judge was killed by SIGKILL during stage '{stage}', most likely by the kernel's out-of-memory "
            f"killer{size}{free}; --device cpu-check judges it on scaled-down sizes, or judge it where more memory is free")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
