"""The test module of ``--suite``: one ``test_op`` item per ATen op. Users do not import this; the plugin adds it."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_kernelbench.config import EvalConfig
from pytest_kernelbench.plugin import _pytest_timeout_mark, judge
from pytest_kernelbench.plugin.session import result_key, session_key
from pytest_kernelbench.report.text import printable
from pytest_kernelbench.suites.run import evaluate_op


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kb_op" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash.get(session_key, None)
    run = session.suite if session is not None else None
    timeout = session.eval_config.timeout if session is not None else 300.0
    params = []
    for task in run.tasks if run is not None else []:
        mark = _pytest_timeout_mark(timeout * (1 + len(task.performance)))
        params.append(pytest.param(task, id=task.name, marks=[mark] if mark is not None else []))
    metafunc.parametrize("kb_op", params)


def correctness_config(cfg: EvalConfig) -> EvalConfig:
    """The correctness evaluation's settings: its speedup is not used, so its timing phase is kept short, in one pair of
    runner processes (on the CPU a speedup of three samples outside +-5% would start up to four more pairs)."""
    return dataclasses.replace(cfg, warmup=1, min_reps=3, max_reps=3, process_pairs=1)


def test_op(kb_op, kb_session, request, record_property):
    run = kb_session.suite
    impl = run.implementation(kb_op)
    if impl is None:
        pytest.skip(f"no implementation of {kb_op.op} (looked for {', '.join(run.backend.looked_for(kb_op))})")
    quick = dataclasses.replace(kb_session, eval_config=correctness_config(kb_session.eval_config))

    def judged(problem, candidate, timed):
        return judge(request.config, problem, candidate, kb_session if timed else quick)

    result = evaluate_op(kb_op, run.suite.name, run.index(kb_op), impl, judged)
    request.node.stash[result_key] = result
    entry = result.extra.op_suite
    properties = {"op": kb_op.op, "outcome": result.outcome.value, "correct": entry["correct"], "performance": entry["performance"],
                  "speedup": result.speedup, "implementation": entry["implementation"],
                  "tolerance": result.tolerance.get("name", "")}  # fmt: skip
    for name, value in properties.items():
        record_property(name, value)
    if not result.correct:
        pytest.fail(f"{kb_op.name}: {result.outcome.value} (stage {result.stage or '-'})\n{printable(result.message)}", pytrace=False)
    if result.speedup is not None and result.speedup < kb_session.min_speedup:
        pytest.fail(f"{kb_op.name}: correct but {result.speedup:.3f}x is below --min-speedup {kb_session.min_speedup:g}", pytrace=False)
