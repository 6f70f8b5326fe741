"""The named messages between the supervisor and a runner, as plain dataclasses.

Requests go supervisor -> runner; each has one reply. A reply is untrusted data: ``parse_reply``
checks every field's type and range and raises :class:`BadReply` for anything else, which the
supervisor turns into the current stage's failure. It is total: whatever the data, it returns a
reply or raises :class:`BadReply`, never another exception.

Values crossing the boundary are trees (``Node``):

* ``{"t": {"buf": ID, "dtype": "float32", "shape": [...], "stride": [...], "offset": BYTES}}``: a
  tensor in shared buffer ``ID`` (mapped earlier with :class:`MapBuffers`);
* ``{"v": VALUE}``: a JSON value (int, float, bool, str, None);
* ``{"seq": [NODE, ...], "tuple": BOOL}``, ``{"map": [[KEY, NODE], ...]}``: containers.

In :class:`Call`, ``expect`` describes the output the reference gave: tensor leaves name the slot
(a shared buffer) the runner copies that output into; value leaves ask for the value itself.

Standard library only: the runner imports this module before any candidate code.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

Node = dict[str, Any]

DTYPES = (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
    "complex64", "complex128", "float8_e4m3fn", "float8_e5m2",
)  # fmt: skip
MAX_TEXT = 20_000  # characters of an error or traceback a reply may carry
MAX_CALLS = 64  # calls one :class:`Calls` request may carry
MAX_VALUES = 10_000  # value leaves one output may carry
MAX_COUNT = 1 << 62  # a byte or launch count a reply may claim
MAX_MS = 1e9  # a call's claimed time (11 days): sums of claims stay finite, past it the claim is the runner's bad reply


class BadReply(Exception):
    """A runner's reply that is not what the protocol allows."""


@dataclasses.dataclass
class Request:
    kind: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}


@dataclasses.dataclass
class Setup(Request):
    """First request: where to run and how to time. Reply: :class:`Ready`."""

    kind: ClassVar[str] = "setup"
    device: str  # "cpu" or "cuda"
    device_index: int = 0
    timer: str = "events"  # or "cuda-graph"
    threads: int = 0  # torch.set_num_threads; 0: leave it
    scrub_outputs: bool = False  # overwrite the model's own outputs once copied (the reference's side, on a GPU)
    pin_threads: bool = False  # CPU timing: its thread and torch's pool threads a core each (not a build step's runner)
    ieee_float32: bool = False  # float32 convolutions and matmuls without TF32 (a tolerance tighter than TF32's rounding)


@dataclasses.dataclass
class MapBuffers(Request):
    """Map shared buffers; their file descriptors come with the message, in order. Reply: :class:`Done`."""

    kind: ClassVar[str] = "map"
    ids: list[int]
    nbytes: list[int]


@dataclasses.dataclass
class UnmapBuffers(Request):
    kind: ClassVar[str] = "unmap"
    ids: list[int]


@dataclasses.dataclass
class Load(Request):
    """Import ``source`` (a ``load_inline`` build happens here) and check it defines ``class_name``."""

    kind: ClassVar[str] = "load"
    source: str
    filename: str
    class_name: str = "ModelNew"
    compile_mode: str = ""  # "": as it is; an inductor mode or "tensorrt": wrapped in torch.compile (the reference's --mode)
    build_only: bool = False  # import, then report; no class needed
    build_rank: int = 0  # builds queued ahead of this one in the build pool: a step lower priority each (build_nice)
    compile_only: bool = False  # load_inline compiles its sources (nvcc too, no GPU needed) and links nothing: --device cpu-check


@dataclasses.dataclass
class Init(Request):
    """Construct the model: ``torch.manual_seed(seed)``, then ``cls(*args)``, moved to the device, put in ``mode``."""

    kind: ClassVar[str] = "init"
    args: list[Node]
    seed: int
    mode: str = ""  # "eval" or "train": model.eval() or model.train() (--ref-mode, both sides); "": as constructed


@dataclasses.dataclass
class Call(Request):
    """One timed call: L2 flush, device sync, events (CPU: perf_counter) around ``model(*args)``, then
    the output copied into the slots ``expect`` names. ``expect=None``: describe the output instead."""

    kind: ClassVar[str] = "call"
    args: list[Node]
    expect: Node | None
    graph: bool = False
    # the ATen operators the call dispatches on its thread, in the reply's ``ops``: a correctness trial that is also the
    # operator trace, where a call is dear (--device cpu-check: Triton's interpreter runs one Python step per program)
    trace: bool = False


@dataclasses.dataclass
class Calls(Request):
    """Several :class:`Call` in a row, each timed alone on its own inputs and into its own slots: a timing round's
    calls of one side, so that waking, stopping and draining the runner are paid once for all of them. Reply:
    :class:`CalledEach`, in the same order."""

    kind: ClassVar[str] = "calls"
    calls: list[Call]
    # timed together (``--kb-timer round``): one flush and sync, events (CPU: perf_counter) around all the calls back to
    # back, each output copied into its slots within the span; each call claims the span over their count
    together: bool = False

    def __post_init__(self) -> None:  # the runner's side gets them off the wire as plain maps
        self.calls = [c if isinstance(c, Call) else Call(**c) for c in self.calls]


@dataclasses.dataclass
class Trace(Request):
    """The ATen operators one call dispatches. Reply: :class:`Traced`."""

    kind: ClassVar[str] = "trace"
    args: list[Node]
    all_threads: bool = False  # torch.profiler on every thread (~1.5 s to start), else a dispatch mode on the calling thread


@dataclasses.dataclass
class Profile(Request):
    """Device time per kernel of one call, from torch.profiler (a hint for the agent, never a verdict). Reply: :class:`Profiled`."""

    kind: ClassVar[str] = "profile"
    args: list[Node]


@dataclasses.dataclass
class Release(Request):
    """Drop every output and cached block (the phase is over); buffers stay mapped until unmapped."""

    kind: ClassVar[str] = "release"


@dataclasses.dataclass
class Ping(Request):
    """Answer at once: before a call's wall window, so that the window starts with the runner awake
    (a process continued after SIGSTOP, or woken on a loaded machine, can take milliseconds to run)."""

    kind: ClassVar[str] = "ping"


@dataclasses.dataclass
class Exit(Request):
    kind: ClassVar[str] = "exit"


REQUESTS: dict[str, type[Request]] = {cls.kind: cls for cls in (Setup, MapBuffers, UnmapBuffers, Load, Init, Call, Calls,
                                                                 Trace, Profile, Release, Ping, Exit)}


def parse_request(data: dict[str, Any]) -> Request:
    """The runner's side: requests come from the trusted supervisor, so this only dispatches."""
    cls = REQUESTS.get(data.get("kind", ""))
    if cls is None:
        raise ValueError(f"unknown request {data.get('kind')!r}")
    return cls(**{k: v for k, v in data.items() if k != "kind"})


# ---------------------------------------------------------------- replies (untrusted)


@dataclasses.dataclass
class Reply:
    ok: bool
    error: str  # "" when ok


@dataclasses.dataclass
class Done(Reply):
    pass


@dataclasses.dataclass
class Ready(Reply):
    device_name: str
    versions: dict[str, str]


@dataclasses.dataclass
class Called(Reply):
    ms: float  # the runner's claim: device time of the call
    offstream: bool  # work outlived the call's stream and was timed to the whole-device sync
    mismatch: str  # "" or why the output does not fit the expected structure
    values: list[Any]  # the value leaves of the output, in order
    structure: Node | None  # with expect=None: the output described (tensor leaves as shape/dtype)
    graph_error: str  # "" or why the call could not be captured in a CUDA graph (timed with events)
    peak_bytes: int = 0  # with expect=None: the device memory the runner's allocator reserved at most so far
    ops: dict[str, int] | None = None  # with trace=True: the ATen operators the call dispatched, by count


@dataclasses.dataclass
class CalledEach(Reply):
    calls: list[Called]  # one per call of the :class:`Calls` request, in order (the supervisor checks the count)


@dataclasses.dataclass
class Traced(Reply):
    ops: dict[str, int]
    all_threads: bool


@dataclasses.dataclass
class Profiled(Reply):
    kernels: dict[str, list[float]]  # kernel name: [device microseconds in the call, launches]


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise BadReply(f"'{key}' is a {type(value).__name__}, not text")
    return value[-MAX_TEXT:]


def _bool(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise BadReply(f"'{key}' is not true or false")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_COUNT:
        return float(value)
    if not isinstance(value, float) or not math.isfinite(value):  # a huge int would overflow float()
        shown = repr(value)[:100] if isinstance(value, float) else f"a {type(value).__name__}"  # str() of a huge int raises
        raise BadReply(f"{what} is not a finite number: {shown}")
    return value


def parse_reply(data: Any, kind: type[Reply]) -> Reply:
    """Check a reply field by field; an error reply (``ok`` false) needs only its text. Raises only :class:`BadReply`."""
    if kind not in (Done, Ready, Called, CalledEach, Traced, Profiled):
        raise TypeError(kind)  # the supervisor's mistake, before any of the reply is read
    try:
        return _parse(data, kind)
    except BadReply:
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure on the runner's data is the runner's bad reply
        raise BadReply(f"unreadable reply ({type(exc).__name__}: {str(exc)[:200]})") from None


def _parse(data: Any, kind: type[Reply]) -> Reply:
    if not isinstance(data, dict):
        raise BadReply(f"a reply is a {type(data).__name__}, not a map")
    ok, error = _bool(data, "ok"), _text(data, "error")
    if not ok:
        return kind(**{f.name: _empty(f) for f in dataclasses.fields(kind) if f.name not in ("ok", "error")}, ok=False,
                    error=error or "the runner reported a failure without saying why")
    if kind is Done:
        return Done(True, "")
    if kind is Ready:
        versions = data.get("versions", {})
        if not isinstance(versions, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in versions.items()):
            raise BadReply("'versions' is not a map of names to text")
        return Ready(True, "", _text(data, "device_name")[:200], {k[:50]: v[:100] for k, v in list(versions.items())[:20]})
    if kind is CalledEach:
        calls = data.get("calls")
        if not isinstance(calls, list) or len(calls) > MAX_CALLS or not all(isinstance(c, dict) for c in calls):
            raise BadReply(f"'calls' is not a list of at most {MAX_CALLS} replies")
        parsed = [parse_reply(c, Called) for c in calls]
        if not all(c.ok for c in parsed):
            raise BadReply("a call's reply inside 'calls' is an error")
        return CalledEach(True, "", parsed)
    if kind is Called:
        ms = _number(data.get("ms"), "'ms'")
        if not 0 <= ms <= MAX_MS:
            raise BadReply(f"'ms' is {ms!r}, not a time from 0 to {MAX_MS:g} ms")
        values = data.get("values", [])
        if not isinstance(values, list) or len(values) > MAX_VALUES or not all(map(_scalar, values)):
            raise BadReply(f"'values' is not a list of at most {MAX_VALUES} plain values")
        structure = data.get("structure")
        if structure is not None and not isinstance(structure, dict):
            raise BadReply("'structure' is not a tree")
        peak = data.get("peak_bytes", 0)
        if not _count(peak):
            raise BadReply("'peak_bytes' is not a count of bytes")
        ops = _ops(data) if data.get("ops") is not None else None
        return Called(True, "", ms, _bool(data, "offstream"), _text(data, "mismatch"), values, structure,
                      _text(data, "graph_error"), peak, ops)
    if kind is Profiled:
        return Profiled(True, "", _kernel_times(data.get("kernels", {})))
    if kind is Traced:
        return Traced(True, "", _ops(data), _bool(data, "all_threads"))
    raise TypeError(kind)


def _ops(data: dict) -> dict[str, int]:
    ops = data.get("ops", {})
    if not isinstance(ops, dict) or len(ops) > 5000 or not all(isinstance(k, str) and _count(v) for k, v in ops.items()):
        raise BadReply("'ops' is not a map of operator names to counts")
    return {k[:200]: v for k, v in ops.items()}


def _scalar(value: Any) -> bool:
    """A value leaf as the runner sends it (``runner._json_value``): None, a bool, an int, a finite float, short text."""
    if value is None or isinstance(value, (bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str) and len(value) <= MAX_TEXT


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _kernel_times(kernels: Any) -> dict[str, list[float]]:
    if not isinstance(kernels, dict) or len(kernels) > 50:
        raise BadReply("'kernels' is not a map of at most 50 kernel names")
    found = {}
    for name, entry in kernels.items():
        if not isinstance(name, str) or not isinstance(entry, list) or len(entry) != 2:
            raise BadReply("'kernels' is not a map of kernel names to [microseconds, launches]")
        us, launches = _number(entry[0], "a kernel's time"), _number(entry[1], "a kernel's launch count")
        if us < 0 or not 0 <= launches <= MAX_COUNT:
            raise BadReply("a kernel's time or launch count is negative or out of range")
        found[name[:200]] = [us, int(launches)]
    return found


def _empty(field: dataclasses.Field) -> Any:
    defaults = {"ms": 0.0, "offstream": False, "mismatch": "", "values": [], "structure": None, "graph_error": "",
                "ops": {}, "all_threads": False, "calls": [], "kernels": {}, "peak_bytes": 0, "device_name": "", "versions": {}}
    return defaults[field.name]


def reply(kind: type[Reply], **fields: Any) -> dict[str, Any]:
    """The runner's side: a successful reply as a wire dict."""
    return {"ok": True, "error": "", **fields}


def error_reply(text: str) -> dict[str, Any]:
    return {"ok": False, "error": text[-MAX_TEXT:]}
