"""``kbagent serve --protocol openreward``: the service's judge pool behind OpenReward's SDK server (the Open Reward
Standard: HTTP + server-sent events), so OpenReward's own client and any harness that speaks it drive our judge.

The environment is ``kernelbench``, shaped as OpenReward's KernelBench environment:

* **splits**: one per served level (``level1`` .. ``level4``, ``mini``, ``level3-metr``, ...), one per shipped named
  subset that names served problems (``metr-level3``, ...), and ``dev`` (the first task of the first level);
* **tasks**: ``{"problem": "1/19", "level": "1", "problem_id": 19, "name": "19_ReLU"}`` (a task may also ask for a
  ``language``: cuda, triton, cpp); only the served problems are tasks;
* **prompt**: the task's prompt (the same words as the native episodes');
* **tools**: ``run_kernel`` (``code``: the complete Python source; or OpenReward's fields ``python`` with the optional
  ``cuda`` and ``cpp`` sources, which the Python code sees as the strings ``cuda_source`` and ``cpp_source``), whose
  reward is the judge's (speedup - 1 when correct, 0 for a noisy gain; -2 incorrect ... -7 timeout; none for the judge's own failure), and
  ``finish``, which ends the episode with the best reward of its calls.

Every session is an episode of the service's log (``--state``/episodes.jsonl), the app sits behind the service's
:class:`~kbagent.serve.guard.Guard` (the token as ``Authorization: Bearer`` or, as OpenReward's client sends its
``api_key``, as ``X-API-Key``; the Host and Origin checks; JSON bodies; the body limit), and evaluations share the
service's bounded queue. Needs the ``openreward`` extra (Python 3.11 or newer).
"""

from __future__ import annotations

import ast
import json
from typing import Any

from openreward.environments import Environment, Server, Split, TextBlock, ToolOutput, tool
from pydantic import BaseModel

from kbagent.feedback import feedback_text
from kbagent.prompts import Target, code_messages, normalize_language
from kbagent.serve.app import ServiceSettings, _Service
from kbagent.serve.guard import Guard
from kbagent.serve.pool import EvaluateFn
from kbagent.serve.schema import MAX_BODY_BYTES, BadRequest, ProblemRef
from pytest_kernelbench.problems import named_subsets

ENV_NAME = "kernelbench"
PUBLIC_PATHS = ("/health", "/version")


class RunKernelInput(BaseModel):
    """``code``, or OpenReward's ``python`` (with the optional ``cuda`` and ``cpp`` sources it compiles)."""

    code: str | None = None
    python: str | None = None
    cuda: str | None = None
    cpp: str | None = None


def candidate_source(params: RunKernelInput) -> str:
    """The candidate's source: ``code`` as given, or ``python`` with ``cuda_source`` and ``cpp_source`` defined at the top
    (after any ``from __future__`` import) as string literals of the ``cuda`` and ``cpp`` fields."""
    if (params.code is None) == (params.python is None):
        raise ValueError("give exactly one of 'code' (the complete Python source defining ModelNew) and 'python' (with "
                         "optional 'cuda' and 'cpp' sources)")  # fmt: skip
    if params.code is not None:
        if params.cuda is not None or params.cpp is not None:
            raise ValueError("'cuda' and 'cpp' go with 'python', not with 'code'")
        return params.code
    python = params.python or ""
    header = "".join(f"{name} = {value!r}\n" for name, value in (("cuda_source", params.cuda), ("cpp_source", params.cpp))
                     if value is not None)  # fmt: skip
    lines = python.splitlines(keepends=True)
    at = _after_future_imports(python)
    return "".join(lines[:at]) + header + "".join(lines[at:])


def _after_future_imports(source: str) -> int:
    """The line index after the module docstring and ``from __future__`` imports (0 when the source does not parse:
    the judge reports its syntax error)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return 0
    end = 0
    for i, node in enumerate(body):
        docstring = i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            end = node.end_lineno or end
        else:
            break
    return end


def split_name(level: str) -> str:
    return f"level{level}" if level[:1].isdigit() else level


def _splits(service: _Service) -> dict[str, list[dict[str, Any]]]:
    """Every split's tasks: the levels, the named subsets that name served problems, and ``dev``."""
    from pytest_kernelbench.problems import load_subset

    catalog = service.settings.catalog
    problems = {level: catalog.level(level) for level in catalog.levels or []}
    splits = {split_name(level): [_task(p) for p in found] for level, found in problems.items() if found}
    for name in named_subsets():
        subset = load_subset(name)
        chosen = [_task(p) for found in problems.values() for p in found if subset is not None and subset.selects(p)]
        if chosen and name not in splits:
            splits[name] = chosen
    first = next(iter(splits.values()), [])
    return {"dev": first[:1], **splits}


def _task(problem: Any) -> dict[str, Any]:
    return {"problem": f"{problem.level}/{problem.problem_id}", "level": problem.level, "problem_id": problem.problem_id,
            "name": problem.name}  # fmt: skip


class KernelBenchBase(Environment):
    """One session: one episode of the service's log on one task."""

    service: _Service  # set on the class made for one app (:func:`environment_class`)
    tasks_by_split: dict[str, list[dict[str, Any]]]

    def __init__(self, task_spec: Any = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 - the SDK's signature
        super().__init__(task_spec, secrets)
        spec = dict(task_spec or {})
        try:
            ref = ProblemRef(level=str(spec["level"]), problem_id=int(spec["problem_id"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"task {json.dumps(spec)[:200]}: not a task of this service (it needs 'level' and 'problem_id'; "
                             "list them with list_tasks)") from None  # fmt: skip
        self.problem = self.service.resolve(ref)
        config = self.service.config({})
        self.language = normalize_language(spec.get("language"), "cuda" if config.device == "cuda" else "cpu")
        self.target = Target(self.language, "cuda" if config.device == "cuda" else "cpu", config.for_level(self.problem.level).tol,
                             varied=config.inputs == "varied")
        self.episode = self.service.episodes.start(self.problem, {}, self.language)

    @classmethod
    def list_splits(cls) -> list[Split | str]:
        return [Split(name=name, type="validation" if name == "dev" else "test") for name in cls.tasks_by_split]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, Any]]:
        return list(cls.tasks_by_split[split])

    def get_prompt(self) -> list[TextBlock]:
        system, user = (m["content"] for m in code_messages(self.problem.source, None, self.target))
        return [TextBlock(text=f"{system}\n\n{user}")]

    @tool
    async def run_kernel(self, params: RunKernelInput) -> ToolOutput:
        """Judge a ModelNew against the task's reference: correctness on fresh inputs, then speed. Give `code` (the complete
        Python source defining class ModelNew) or `python` with the optional `cuda` and `cpp` sources it compiles (seen
        by the Python code as the strings cuda_source and cpp_source). The reward is speedup - 1 when correct (0 for a
        gain the timing cannot tell from noise); -2 incorrect ... -7 timeout."""
        try:
            code = candidate_source(params)
        except ValueError as exc:
            return ToolOutput(blocks=[TextBlock(text=f"Not judged: {exc}.")], reward=None, finished=False)
        service, episode = self.service, self.episode
        try:
            service.episodes.begin_run(episode)
        except BadRequest as exc:
            return ToolOutput(blocks=[TextBlock(text=str(exc))], reward=None, finished=False)
        result = None
        try:
            result = await service.judge(self.problem, code, {}, f"openreward {episode.id}")
        except BadRequest as exc:  # the queue is full or the request waited too long: nothing judged
            return ToolOutput(blocks=[TextBlock(text=f"Not judged: {exc}")], reward=None, finished=False)
        finally:
            call = service.episodes.end_run(episode, code, result)
        brief = {k: result.get(k) for k in ("outcome", "reward", "speedup", "stage", "ref_ms", "new_ms")}
        return ToolOutput(blocks=[TextBlock(text=feedback_text(result))], metadata={**brief, "call": call, "episode_id": episode.id},
                          reward=result.get("reward"), finished=False)  # fmt: skip

    @tool
    async def finish(self) -> ToolOutput:
        """End the episode: its reward is the best reward of its run_kernel calls."""
        try:
            summary = self.service.episodes.finish(self.episode)
        except BadRequest as exc:
            return ToolOutput(blocks=[TextBlock(text=str(exc))], reward=None, finished=False)
        best = summary["best_reward"]
        text = (f"Episode finished: best reward {best:+.3f} (call {summary['best_call']} of {summary['calls']})." if best is not None
                else f"Episode finished after {summary['calls']} run_kernel call(s), none with a verdict.")  # fmt: skip
        metadata = {k: summary[k] for k in ("episode_id", "best_reward", "best_call", "last_reward", "rewards")}
        return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=best, finished=True)


def environment_class(service: _Service) -> type[KernelBenchBase]:
    """The environment for one service: its splits and tasks are the service's catalog, listed once at start."""
    return type("KernelBench", (KernelBenchBase,), {"service": service, "tasks_by_split": _splits(service),
                                                     "__module__": __name__})  # fmt: skip


class ClosingApp:
    """ASGI: the SDK's app, with the service closed when it shuts down (in-flight evaluations stopped; answered ones
    are on disk already)."""

    def __init__(self, app: Any, service: _Service):
        self.app = app
        self.service = service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def closing_send(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                self.service.pool.close()
                self.service.episodes.close()
            await send(message)

        await self.app(scope, receive, closing_send)


def create_openreward_app(settings: ServiceSettings, evaluate: EvaluateFn | None = None) -> Guard:
    """The ASGI app of ``--protocol openreward``, behind the service's guard (token, Host, Origin, JSON bodies, body
    limit; ``/health`` and ``/version`` public as in the SDK). ``evaluate``: the judge (default: the real one)."""
    if evaluate is None:
        from pytest_kernelbench.judge.controller import evaluate
    service = _Service(settings, evaluate)
    if not settings.catalog.levels:
        raise BadRequest("--protocol openreward lists its tasks by level: give --level (e.g. --level 1,2 or --level mini)")
    server = Server([environment_class(service)], return_errors="exception")
    guard = Guard(ClosingApp(server.app, service), settings.token, max_body=MAX_BODY_BYTES, hosts=settings.allow_hosts,
                  public=PUBLIC_PATHS)  # fmt: skip
    guard.refused = service.refused
    return guard
