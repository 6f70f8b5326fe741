"""``kbagent serve`` from its options to a listening service: every check that can fail happens before it listens."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from kbagent.serve import STATE_LOCK, bind, run_service
from kbagent.serve.guard import host_problem, new_token, token_problem

DEFAULT_QUEUE = 64
PROTOCOLS = ("native", "openreward")


class ServeError(Exception):
    """A reason not to start: one line on stderr, exit code 2."""


@dataclasses.dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    state: Path = Path("kbagent-serve")
    workers: int | None = None
    queue: int = DEFAULT_QUEUE
    request_timeout: float = 300.0
    levels: str | None = None
    subset: str | None = None
    datasets: list[str] = dataclasses.field(default_factory=list)
    log_level: str = "info"
    allow_problem_code: bool = False
    allow_hosts: tuple[str, ...] = ()
    protocol: str = "native"  # native (the /v1 API) or openreward (OpenReward's environment server)


def default_workers(gpus: int) -> int:
    """Half the cores (compiles are the CPU's work), at most 16, and at least one per GPU."""
    return max(1, gpus, min(16, (os.cpu_count() or 2) // 2))


def _check(opts: ServeOptions) -> None:
    for problem in [token_problem(opts.token) if opts.token else "", *map(host_problem, opts.allow_hosts)]:
        if problem:
            raise ServeError(problem)
    if not 0 <= opts.port <= 65535:
        raise ServeError(f"--port {opts.port}: choose a port from 0 to 65535 (0: a free one)")
    if opts.workers is not None and opts.workers < 1:
        raise ServeError("--workers must be at least 1")
    if opts.queue < 0:
        raise ServeError("--queue must be 0 or more")
    if opts.request_timeout <= 0:
        raise ServeError("--request-timeout must be a positive number of seconds")
    if opts.protocol not in PROTOCOLS:
        raise ServeError(f"--protocol {opts.protocol}: choose {' or '.join(PROTOCOLS)}")
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ServeError("kbagent serve needs Starlette and uvicorn: pip install 'pytest-kernelbench[serve]'") from None
    if opts.protocol == "openreward":
        _check_openreward(opts)


def _check_openreward(opts: ServeOptions) -> None:
    if not opts.levels:
        raise ServeError("--protocol openreward lists its tasks by level: give --level (e.g. --level 1,2 or --level mini)")
    try:
        import openreward.environments  # noqa: F401
    except ImportError:
        raise ServeError("--protocol openreward needs OpenReward's SDK (Python 3.11 or newer): "
                         "pip install 'pytest-kernelbench[openreward]'") from None  # fmt: skip


def _lock_state(folder: Path) -> Any:
    from filelock import FileLock, Timeout

    lock = FileLock(str(folder / STATE_LOCK))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)
    except Timeout:
        raise ServeError(f"--state {folder}: another kbagent serve uses this folder; stop it or choose another --state") from None
    except OSError as exc:
        raise ServeError(f"--state {folder}: cannot make or write it ({exc.strerror or exc}); pass a writable folder") from None
    return lock


def serve(opts: ServeOptions, device: str, judge: dict[str, Any]) -> None:
    """Check everything, then serve until stopped. ``judge``: the judge options given (checked by the caller)."""
    import torch

    from kbagent.serve.app import ServiceSettings, create_app
    from kbagent.serve.catalog import Catalog
    from pytest_kernelbench.problems import dataset_specs, load_subset, parse_levels

    _check(opts)
    levels = parse_levels(opts.levels) if opts.levels else None
    catalog = Catalog(levels, dataset_specs(opts.datasets), load_subset(opts.subset))
    catalog.preload()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    workers = opts.workers or default_workers(gpus)
    lock = _lock_state(opts.state)
    try:
        sock = bind(opts.host, opts.port)
    except OSError as exc:
        lock.release()
        raise ServeError(f"cannot listen on {opts.host}:{opts.port}: {exc.strerror or exc}") from None
    token = opts.token or new_token()
    settings = ServiceSettings(opts.state, catalog, judge, device, gpus, workers, opts.queue, opts.request_timeout, token,
                               opts.allow_problem_code, opts.allow_hosts)  # fmt: skip
    if not opts.token:  # printed once: clients send it as Authorization: Bearer <token> or X-API-Key: <token>
        print(f"kbagent serve: token {token} (send it as Authorization: Bearer <token> or X-API-Key: <token>)", file=sys.stderr,
              flush=True)  # fmt: skip
    factory = create_app
    if opts.protocol == "openreward":
        from kbagent.serve.openreward import create_openreward_app as factory
    try:
        run_service(factory(settings), sock, opts.log_level)
    finally:
        lock.release()
