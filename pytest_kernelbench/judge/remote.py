"""Evaluations on a Ray cluster: one task per candidate, one GPU each, results streamed back.

``--ray-address auto|HOST:PORT`` (or ``local`` for an in-process instance) submits every
item's evaluation when collection finishes; each item then waits for its own result,
so the cluster works on all of them at once while pytest reports in order. A task
whose worker or node dies is retried elsewhere (Ray's ``max_retries`` for system
failures); a candidate's own faults never kill the task, because :func:`evaluate`
contains them in a subprocess and turns them into results.

Every node needs this package (and torch) importable, as on the driver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import math
import os
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

from ..candidates import Candidate
from ..config import EvalConfig
from ..errors import KernelBenchUsageError
from ..problems import Problem
from ..result import EvalResult

NODE_LOSS_RETRIES = 3
CONNECT_SECONDS = 15.0  # ray.init against a cluster's address, at most (a port that answers but is no Ray: Ray waits minutes)
PROBE_SECONDS = 5.0  # a TCP connection to the address first: nothing listening is said at once
GRACE_SECONDS = 120  # ... and Ray's own client stays quiet this much longer: the process ends before it speaks (connect)


def _evaluate_task(problem: dict[str, Any], candidate: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    from .controller import evaluate

    # Ray points CUDA_VISIBLE_DEVICES at the GPU it gave this task: that GPU is cuda:0 here. Folders
    # are the node's own defaults (a PCH switched off stays off).
    pch_dir = "off" if config.get("pch_dir") == "off" else ""
    cfg = EvalConfig(**{**config, "device_index": 0, "lock_dir": "", "build_dir": "", "pch_dir": pch_dir})
    return evaluate(Problem(**problem), Candidate(**candidate), cfg).to_dict()


def connect_seconds() -> float:
    """How long ``ray.init`` may take: ``KB_RAY_CONNECT_SECONDS`` (a cluster slow to answer), else CONNECT_SECONDS; a
    value that is not a number of seconds above 0 is a one-line usage error."""
    given = os.environ.get("KB_RAY_CONNECT_SECONDS", "")
    if not given:
        return CONNECT_SECONDS
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise KernelBenchUsageError(f"KB_RAY_CONNECT_SECONDS={given!r}: give a number of seconds above 0 (default {CONNECT_SECONDS:g})")
    return seconds


def connect(address: str, timeout: float | None = None) -> None:
    """Connect this process to the cluster at ``address`` (``auto`` or ``HOST:PORT``; ``local`` starts one later, on first
    use), or a :class:`KernelBenchUsageError` of one line: Ray not installed, no cluster found, nothing listening there,
    or no Ray answering within ``timeout``. ``ray.init`` runs in a helper thread while this one waits, so that SIGTERM
    and Ctrl-C stop the wait (Ray's connection loop, in C++, keeps neither from the main thread otherwise)."""
    if importlib.util.find_spec("ray") is None:
        raise KernelBenchUsageError(f"--ray-address {address}: Ray is not installed here; pip install 'ray>=2.30'")
    if address == "local":
        return
    timeout = connect_seconds() if timeout is None else timeout
    # Ray's C++ client warns on stderr each time its connection has waited this long (5 s by default). Once the wait
    # below gives up, the process ends, its stderr back: a warning of the still-waiting client printed after the one
    # line on a slow machine (CI, 2026-11-30). Read when Ray is first imported; a user's own setting is kept.
    os.environ.setdefault("RAY_gcs_rpc_server_connect_timeout_s", str(int(timeout) + GRACE_SECONDS))
    import ray

    if ray.is_initialized():
        return
    _probe(address, _bootstrap(address))
    found: dict[str, BaseException] = {}

    def init() -> None:
        quiet = logging.getLogger("ray")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # "SIGTERM handler is not set ...": on purpose, SIGTERM keeps its default here
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except BaseException as exc:  # noqa: BLE001 - said in the main thread
            found["error"] = exc
        finally:
            quiet.setLevel(level)

    thread = threading.Thread(target=init, name="kb-ray-connect", daemon=True)
    with _quiet_stderr():  # Ray's C++ client warns every few seconds while it waits: the outcome is said in one line
        thread.start()
        thread.join(timeout)
    if thread.is_alive():
        raise KernelBenchUsageError(f"--ray-address {address}: no Ray cluster answered there within {timeout:g} s; check the "
                                    "address (ray status on the head node prints it)")  # fmt: skip
    if "error" in found:
        raise KernelBenchUsageError(f"--ray-address {address}: {_one_line(found['error'])}")


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null while the block runs (this thread only waits meanwhile)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _bootstrap(address: str) -> str:
    """``HOST:PORT`` of the cluster: the address itself, or the one Ray finds for ``auto`` (RAY_ADDRESS, a running local cluster)."""
    if address != "auto":
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise KernelBenchUsageError(f"--ray-address {address}: expected auto, local or HOST:PORT (e.g. 10.0.0.5:6379)")
        return address
    from ray._private.services import canonicalize_bootstrap_address

    try:
        found = canonicalize_bootstrap_address(address)
    except Exception as exc:  # noqa: BLE001 - Ray's ConnectionError: no cluster found
        raise KernelBenchUsageError(f"--ray-address auto: {_one_line(exc)}; start one with ray start --head, or pass "
                                    "HOST:PORT or local") from None  # fmt: skip
    if not found:
        raise KernelBenchUsageError("--ray-address auto: no running Ray cluster found; start one with ray start --head, or pass local")
    return found


def _probe(address: str, bootstrap: str) -> None:
    host, _, port = bootstrap.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise KernelBenchUsageError(f"--ray-address {address}: nothing answers at {bootstrap} ({why}); start the cluster "
                                    "(ray start --head), or pass local for one in this process") from None  # fmt: skip


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


class RayEvaluator:
    def __init__(self, address: str, config: EvalConfig):
        import ray

        self._ray = ray
        if not ray.is_initialized():
            if address == "local":
                ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
            else:
                connect(address)
        gpus = 1 if config.device == "cuda" else 0
        self._task = ray.remote(num_gpus=gpus, num_cpus=1, max_retries=NODE_LOSS_RETRIES, retry_exceptions=False)(_evaluate_task)
        self._config = config.to_dict()
        self._pending: dict[tuple[str, str], Any] = {}

    def submit(self, problem: Problem, candidate: Candidate) -> None:
        key = (problem.id, candidate.source_hash)
        if key not in self._pending:
            self._pending[key] = self._task.remote(dataclasses.asdict(problem), dataclasses.asdict(candidate), self._config)

    def result(self, problem: Problem, candidate: Candidate) -> EvalResult:
        """This item's result (submitting it first if it was not)."""
        self.submit(problem, candidate)
        ref = self._pending.pop((problem.id, candidate.source_hash))
        return EvalResult.from_dict(self._ray.get(ref))

    def close(self) -> None:
        for ref in self._pending.values():
            self._ray.cancel(ref, force=True)
        self._pending.clear()
