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

import dataclasses
from typing import Any

from ..candidates import Candidate
from ..config import EvalConfig
from ..problems import Problem
from ..result import EvalResult

NODE_LOSS_RETRIES = 3


def _evaluate_task(problem: dict[str, Any], candidate: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    from .controller import evaluate

    # Ray points CUDA_VISIBLE_DEVICES at the GPU it gave this task: that GPU is cuda:0 here. Folders
    # are the node's own defaults (a PCH switched off stays off).
    pch_dir = "off" if config.get("pch_dir") == "off" else ""
    cfg = EvalConfig(**{**config, "device_index": 0, "lock_dir": "", "build_dir": "", "pch_dir": pch_dir})
    return evaluate(Problem(**problem), Candidate(**candidate), cfg).to_dict()


class RayEvaluator:
    def __init__(self, address: str, config: EvalConfig):
        import ray

        self._ray = ray
        if not ray.is_initialized():
            if address == "local":
                ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
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
