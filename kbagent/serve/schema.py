"""Request bodies of the service, checked: every fault is a :class:`BadRequest` with one line that names the fix."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from pytest_kernelbench.config import JUDGE_OPTIONS, EvalConfig
from pytest_kernelbench.errors import KernelBenchUsageError

MAX_BODY_BYTES = 2_000_000
MAX_TRIALS = 100
# Judge options a client may set per request. Never the sandbox, the memory limit or this machine's folders:
# a client does not get to weaken the judge or point it at other files.
CLIENT_OPTIONS = ("device", "timeout", "mode", "tolerance", "atol", "rtol", "trials", "seed", "strict", "inputs_on", "timer")
_KINDS = {opt.field: opt for opt in JUDGE_OPTIONS if opt.field in CLIENT_OPTIONS}
_PROBLEM_SPEC = re.compile(r"^(?:level)?([0-9A-Za-z][\w-]*)/(\d+)$")
_MODEL_CLASS = re.compile(r"^class\s+Model\b", re.MULTILINE)
_KIND_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


class BadRequest(Exception):
    """A request the service will not run: HTTP ``status`` and one line."""

    def __init__(self, message: str, status: int = 400, headers: dict[str, str] | None = None):
        super().__init__(" ".join(message.split()))
        self.status = status
        self.headers = headers or {}


@dataclasses.dataclass(frozen=True)
class ProblemRef:
    """Which problem a request is about: ``level/id`` of the served data, or its own source."""

    level: str = ""
    problem_id: int = 0
    source: str = ""  # problem_code
    name: str = "problem"

    @property
    def label(self) -> str:
        return f"{self.level}/{self.problem_id}" if not self.source else self.name


@dataclasses.dataclass(frozen=True)
class RunRequest:
    problem: ProblemRef | None  # None inside an episode (the episode's problem)
    code: str
    options: dict[str, Any]  # the client's judge options, checked


@dataclasses.dataclass(frozen=True)
class EpisodeRequest:
    problem: ProblemRef
    options: dict[str, Any]
    language: str | None


def parse_json(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(f"request body of {len(raw)} bytes is over the limit of {MAX_BODY_BYTES}", status=413)
    try:
        body = json.loads(raw or b"")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the body is not JSON ({exc}); send a JSON object with Content-Type: application/json") from None
    if not isinstance(body, dict):
        example = '{"problem": "1/19", "code": "..."}'
        raise BadRequest(f"the body is a JSON {type(body).__name__}; send a JSON object such as {example}")
    return body


def _check_fields(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; the fields are: {', '.join(allowed)}")


def _text(body: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{key!r} must be a non-empty string" + ("" if key in body else f" (missing {key!r})"))
    return value


def parse_problem(body: dict[str, Any]) -> ProblemRef:
    spec, code = body.get("problem"), body.get("problem_code")
    if (spec is None) == (code is None):
        raise BadRequest("give exactly one of 'problem' (level/id, e.g. \"1/19\") and 'problem_code' (a KernelBench problem's source)")
    if code is not None:
        source = _text(body, "problem_code") or ""
        if not _MODEL_CLASS.search(source) or "def get_inputs" not in source:
            raise BadRequest("'problem_code' must be a KernelBench problem: class Model, get_inputs and get_init_inputs")
        name = _text(body, "name", required=False) or "problem"
        return ProblemRef(source=source, name=name)
    match = _PROBLEM_SPEC.match(str(spec).strip()) if isinstance(spec, str) else None
    if not match:
        raise BadRequest(f"'problem' {spec!r} is not level/id; write it like \"1/19\" (level 1, problem 19) or \"mini/3\"")
    return ProblemRef(level=match.group(1), problem_id=int(match.group(2)))


def parse_options(body: dict[str, Any], max_timeout: float) -> dict[str, Any]:
    """The judge options a request gives (``CLIENT_OPTIONS``), type-checked."""
    options = {}
    for field in CLIENT_OPTIONS:
        if field not in body or body[field] is None:
            continue
        options[field] = _option_value(field, body[field])
    if "timeout" in options and not 0 < options["timeout"] <= max_timeout:
        raise BadRequest(f"'timeout' {options['timeout']:g}: must be more than 0 and at most this service's {max_timeout:g} s")
    if "trials" in options and not 1 <= options["trials"] <= MAX_TRIALS:
        raise BadRequest(f"'trials' {options['trials']}: must be 1 to {MAX_TRIALS}")
    return options


def _option_value(field: str, value: Any) -> Any:
    opt = _KINDS[field]
    kind = opt.kind if field != "device" else str
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(f"{field!r} must be {_KIND_NAMES[kind]}, not {type(value).__name__}")
    if opt.choices and value not in opt.choices:
        raise BadRequest(f"{field!r} {value!r}: choose {', '.join(opt.choices)}")
    return value


def parse_run(body: dict[str, Any], max_timeout: float, *, in_episode: bool) -> RunRequest:
    allowed = ("code", *CLIENT_OPTIONS) if in_episode else ("problem", "problem_code", "name", "code", *CLIENT_OPTIONS)
    _check_fields(body, allowed)
    problem = None if in_episode else parse_problem(body)
    return RunRequest(problem, _text(body, "code") or "", parse_options(body, max_timeout))


def parse_episode(body: dict[str, Any], max_timeout: float) -> EpisodeRequest:
    _check_fields(body, ("problem", "problem_code", "name", "language", *CLIENT_OPTIONS))
    language = _text(body, "language", required=False)
    return EpisodeRequest(parse_problem(body), parse_options(body, max_timeout), language)


def eval_config(base: dict[str, Any], options: dict[str, Any], default_device: str, gpus: int) -> EvalConfig:
    """The service's judge settings with a request's options on top; a device this machine lacks is a 400."""
    values = {**base, **options}
    device = values.pop("device", None) or default_device
    if device == "cuda" and gpus == 0:
        raise BadRequest("'device' cuda: this service sees no CUDA device; use \"cpu\"")
    try:
        return EvalConfig(device=device, **values)
    except (KernelBenchUsageError, TypeError, ValueError) as exc:
        raise BadRequest(str(exc)) from None
