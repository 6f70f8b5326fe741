"""The HTTP service (Starlette): ``run_kernel`` for one candidate, episodes, health and metrics.

Routes (JSON in and out; every error is ``{"error": "<one line>"}``):

* ``POST /v1/run_kernel`` - ``{"problem": "1/19"}`` or ``{"problem_code": "..."}``, ``"code"``, judge options:
  answers exactly what ``kbagent eval --json`` prints.
* ``POST /v1/episodes`` - start an episode on a task: its id, the prompt and the tools (``run_kernel``, ``finish``).
* ``POST /v1/episodes/{id}/run_kernel`` - ``{"code": ...}``: the same answer plus ``episode_id``, ``call``,
  ``best_reward`` and ``feedback`` (the next user message of a multi-turn loop).
* ``POST /v1/episodes/{id}/finish`` - ends it: the best reward and the history. ``GET /v1/episodes/{id}``: the same.
* ``GET /v1/problems?level=1`` - the served problems; ``GET /healthz``; ``GET /metrics`` (Prometheus text).

The app is served behind :class:`kbagent.serve.guard.Guard`: the token on every route but ``/healthz``, the ``Host``
and ``Origin`` checks, JSON bodies only, and the body limit, all before a route runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from kbagent.feedback import feedback_text
from kbagent.prompts import Target, code_messages, normalize_language
from kbagent.serve.catalog import CLIENT_ORIGIN, Catalog
from kbagent.serve.episodes import EpisodeStore
from kbagent.serve.guard import Guard
from kbagent.serve.pool import EvaluateFn, JudgePool
from kbagent.serve.schema import MAX_BODY_BYTES, BadRequest, ProblemRef, eval_config, parse_episode, parse_json, parse_run
from pytest_kernelbench.candidates import Candidate
from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.problems import Problem

TOOLS = [
    {"type": "function", "function": {
        "name": "run_kernel", "description": "Judge a ModelNew against the task's reference: correctness, then speed. Answers the "
        "outcome, the reward (speedup - 1 when correct, 0 for a gain the timing cannot tell from noise; -2 incorrect ... -7 "
        "timeout) and the judge's message.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "complete Python source "
                       "defining class ModelNew"}}, "required": ["code"]}}},
    {"type": "function", "function": {
        "name": "finish", "description": "End the episode; its reward is the best reward of its run_kernel calls.",
        "parameters": {"type": "object", "properties": {}}}},
]  # fmt: skip


@dataclasses.dataclass
class ServiceSettings:
    """Everything a service needs, checked by the CLI before it starts."""

    state_dir: Path
    catalog: Catalog
    judge: dict[str, Any]  # the service's judge options (EvalConfig fields but the device)
    device: str  # the default device of a request
    gpus: int
    workers: int
    queue: int
    request_timeout: float = 300.0
    token: str = ""  # every request but /healthz sends it (Guard); required
    # A client's problem_code runs as the judge's reference (sandboxed like a candidate): off unless asked for.
    allow_problem_code: bool = False
    allow_hosts: tuple[str, ...] = ()  # Host values accepted besides the service's address (Guard)


class _Service:
    def __init__(self, settings: ServiceSettings, evaluate: EvaluateFn):
        self.settings = settings
        self.pool = JudgePool(settings.workers, settings.queue, settings.request_timeout, settings.gpus, evaluate)
        self.episodes = EpisodeStore(settings.state_dir)
        self.requests: Counter[tuple[str, int]] = Counter()
        self.refused: Counter[int] = Counter()  # requests the guard answered itself, by status (create_app shares its own)
        self.max_timeout = float(settings.judge.get("timeout", EvalConfig.timeout))
        # the candidate's sandbox hides the state folder: its episode log holds every rollout's code and verdict
        self.judge_base = {**settings.judge, "hide": (str(settings.state_dir.resolve()),)}

    def config(self, options: dict[str, Any], problem: Problem | None = None) -> EvalConfig:
        """A request's judge settings; a client's own problem is judged with its code in runners sandboxed like a
        candidate's (``problem_sandbox``)."""
        client = problem is not None and problem.origin == CLIENT_ORIGIN
        return eval_config({**self.judge_base, "problem_sandbox": client}, options, self.settings.device, self.settings.gpus)

    async def judge(self, problem: Problem, code: str, options: dict[str, Any], label: str) -> dict[str, Any]:
        config = self.config(options, problem)
        result = await self.pool.judge(problem, Candidate(code, "", label), config)
        return json_safe(result.to_dict())

    # ---- routes ----------------------------------------------------------------------------------
    def resolve(self, ref: ProblemRef) -> Problem:
        if ref.source and not self.settings.allow_problem_code:
            raise BadRequest("this service does not take problem_code (a problem's code runs as the judge's reference); "
                             "name a served problem as level/id, or start the service with --allow-problem-code", 403)  # fmt: skip
        return self.settings.catalog.resolve(ref)

    async def run_kernel(self, request: Request) -> Response:
        run = parse_run(await _body(request), self.max_timeout, in_episode=False)
        problem = self.resolve(run.problem)
        return JSONResponse(await self.judge(problem, run.code, run.options, "run_kernel"))

    async def start_episode(self, request: Request) -> Response:
        ask = parse_episode(await _body(request), self.max_timeout)
        problem = self.resolve(ask.problem)
        config = self.config(ask.options, problem)
        try:
            language = normalize_language(ask.language, config.device)
        except ValueError as exc:
            raise BadRequest(f"'language': {exc}") from None
        episode = self.episodes.start(problem, ask.options, language)
        target = Target(language, config.device, config.for_level(problem.level).tol, varied=config.inputs == "varied")
        return JSONResponse({**episode.summary(), "prompt": code_messages(problem.source, None, target), "tools": TOOLS})

    async def episode_run(self, request: Request) -> Response:
        episode = self.episodes.get(request.path_params["episode_id"])
        run = parse_run(await _body(request), self.max_timeout, in_episode=True)
        self.episodes.begin_run(episode)
        result = None
        try:
            result = await self.judge(episode.problem, run.code, {**episode.options, **run.options}, f"episode {episode.id}")
        finally:
            call = self.episodes.end_run(episode, run.code, result)
        summary = episode.summary()
        extra = {"episode_id": episode.id, "call": call, "best_reward": summary["best_reward"], "feedback": feedback_text(result)}
        return JSONResponse({**result, **extra})

    async def finish(self, request: Request) -> Response:
        return JSONResponse(self.episodes.finish(self.episodes.get(request.path_params["episode_id"])))

    async def show_episode(self, request: Request) -> Response:
        return JSONResponse(self.episodes.get(request.path_params["episode_id"]).summary())

    async def problems(self, request: Request) -> Response:
        return JSONResponse({"problems": self.settings.catalog.listing(request.query_params.get("level"))})

    async def healthz(self, request: Request) -> Response:
        stats = self.pool.stats()
        return JSONResponse({"status": "ok", "device": self.settings.device, "gpus": self.settings.gpus, "workers": stats.workers,
                             "queue_depth": stats.waiting, "in_flight": stats.running, "capacity": stats.capacity})  # fmt: skip

    async def metrics(self, request: Request) -> Response:
        return PlainTextResponse(render_metrics(self), media_type="text/plain; version=0.0.4")


def render_metrics(service: _Service) -> str:
    """Prometheus text format: requests by route and status, evaluations by outcome, queue, in flight, episodes."""
    stats = service.pool.stats()
    open_, done = service.episodes.counts()
    lines = ["# HELP kbagent_requests_total HTTP requests answered, by route and status.", "# TYPE kbagent_requests_total counter"]
    lines += [f'kbagent_requests_total{{route="{r}",status="{s}"}} {n}' for (r, s), n in sorted(service.requests.items())]
    lines += ["# HELP kbagent_refused_total Requests refused before any route (token, Host, Origin, Content-Type, size).",
              "# TYPE kbagent_refused_total counter"]  # fmt: skip
    lines += [f'kbagent_refused_total{{status="{s}"}} {n}' for s, n in sorted(service.refused.items())]
    lines += ["# HELP kbagent_evaluations_total Evaluations judged, by outcome.", "# TYPE kbagent_evaluations_total counter"]
    lines += [f'kbagent_evaluations_total{{outcome="{o}"}} {n}' for o, n in sorted(stats.outcomes.items())]
    gauges = {
        "kbagent_queue_depth": ("Evaluations admitted and waiting for a judge thread.", stats.waiting),
        "kbagent_in_flight": ("Evaluations being judged.", stats.running),
        "kbagent_queue_capacity": ("Evaluations admitted at most (workers + queue); more are answered 429.", stats.capacity),
        "kbagent_workers": ("Judge threads.", stats.workers),
    }
    for name, (text, value) in gauges.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name} {value}"]
    lines += ["# HELP kbagent_rejected_total Requests refused with 429 (queue full).", "# TYPE kbagent_rejected_total counter",
              f"kbagent_rejected_total {stats.rejected}",
              "# HELP kbagent_evaluation_seconds Wall time of evaluations.", "# TYPE kbagent_evaluation_seconds summary",
              f"kbagent_evaluation_seconds_sum {stats.seconds_sum:.3f}", f"kbagent_evaluation_seconds_count {stats.seconds_count}",
              "# HELP kbagent_episodes Episodes by state.", "# TYPE kbagent_episodes gauge",
              f'kbagent_episodes{{state="open"}} {open_}', f'kbagent_episodes{{state="finished"}} {done}']  # fmt: skip
    return "\n".join(lines) + "\n"


def json_safe(data: Any) -> Any:
    """``data`` with every infinite or NaN float as None: strict JSON, which every client's parser reads (``kbagent eval
    --json`` would print ``Infinity``, which Python reads and most other parsers do not)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: json_safe(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(v) for v in data]
    return data


async def _body(request: Request) -> dict[str, Any]:
    """The JSON object of a request (the guard has bounded its size as it arrived)."""
    return parse_json(await request.body())


def _error(message: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status, headers=headers)


def _endpoint(service: _Service, name: str, handler: Callable[[Request], Awaitable[Response]]):
    """One route: one-line JSON errors, and the request counted under its route's name."""

    async def endpoint(request: Request) -> Response:
        try:
            response = await handler(request)
        except BadRequest as exc:
            response = _error(str(exc), exc.status, exc.headers)
        except Exception as exc:  # the service's own fault: one line, and the service goes on
            response = _error(f"internal error: {type(exc).__name__}: {exc}", 500)
        service.requests[(name, response.status_code)] += 1
        return response

    return endpoint


def create_app(settings: ServiceSettings, evaluate: EvaluateFn | None = None) -> Guard:
    """The ASGI app, behind its guard. ``evaluate``: the judge (default: :func:`pytest_kernelbench.judge.controller.evaluate`)."""
    if evaluate is None:
        from pytest_kernelbench.judge.controller import evaluate
    service = _Service(settings, evaluate)
    table = [
        ("/v1/run_kernel", ["POST"], service.run_kernel),
        ("/v1/episodes", ["POST"], service.start_episode),
        ("/v1/episodes/{episode_id}", ["GET"], service.show_episode),
        ("/v1/episodes/{episode_id}/run_kernel", ["POST"], service.episode_run),
        ("/v1/episodes/{episode_id}/finish", ["POST"], service.finish),
        ("/v1/problems", ["GET"], service.problems),
        ("/healthz", ["GET"], service.healthz),
        ("/metrics", ["GET"], service.metrics),
    ]
    routes = [Route(path, _endpoint(service, path, handler), methods=methods) for path, methods, handler in table]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = {404: f"no route {request.url.path}; see /healthz, /v1/run_kernel, /v1/episodes",
                  405: f"{request.method} is not allowed on {request.url.path}"}.get(status, str(getattr(exc, "detail", exc)))  # fmt: skip
        return _error(detail, status)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:  # evaluations still in flight are stopped; what was answered is on disk already
            service.pool.close()
            service.episodes.close()

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    app.state.service = service
    guard = Guard(app, settings.token, max_body=MAX_BODY_BYTES, hosts=settings.allow_hosts, public=("/healthz",))
    guard.refused = service.refused
    return guard
