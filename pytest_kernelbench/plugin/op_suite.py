"""``--suite smoke|opinfo``: BackendBench-style op suites in the plugin (options, the run, the header, JUnit scores).

The items are ``test_op[<op>]`` of :data:`OP_ITEMS_MODULE`, which the plugin adds to the session's
arguments instead of the kernel items, so a run works from any folder without a test file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ..config import SUITE_LEVELS, EvalConfig
from ..errors import KernelBenchUsageError
from ..suites.backend_dir import Backend, Implementation, backend_for
from ..suites.base import OpTask, Suite, parse_ops
from ..suites.scores import KEY, scores
from .sharding import shard

OP_ITEMS_MODULE = Path(__file__).with_name("op_items.py")
SUITES = SUITE_LEVELS  # an op's items have the suite's name as their level
DTYPES = ("float32", "bfloat16", "float16", "float64")
# Options that ask for a suite run, and those of KernelBench runs that do not go with one.
TRIGGERS = ("kb_suite", "kb_ops", "kb_backend_dir", "kb_op_dtype")
_KERNEL_OPTIONS = {"kb_level": "--level", "kb_problems": "--problems", "kb_subset": "--subset", "kb_dataset": "--dataset",
                   "kb_solutions": "--solutions", "kb_model": "--model"}  # fmt: skip


def add_options(group: Any) -> None:
    group.addoption("--suite", dest="kb_suite", choices=SUITES,
                    help="judge ATen ops instead of KernelBench problems: BackendBench's smoke or opinfo suite, one item per op")
    group.addoption("--ops", dest="kb_ops", help="with --suite: only these ops, comma-separated (relu, add.Tensor, aten.mm.default)")
    group.addoption("--backend-dir", dest="kb_backend_dir",
                    help="with --suite: implementations in BackendBench's layout, DIR/<op>/<op>_implementation*.py defining "
                    "<op>_kernel_impl; 'aten' (default) judges PyTorch against itself")
    group.addoption("--op-dtype", dest="kb_op_dtype", choices=DTYPES, help="with --suite: the samples' floating-point dtype (float32)")


def requested(config: pytest.Config) -> bool:
    return any(config.getoption(name, None) for name in TRIGGERS)


@dataclasses.dataclass
class SuiteRun:
    """The session's suite: its selected ops (``tasks``), where their implementations come from, what was left out."""

    suite: Suite
    tasks: list[OpTask]
    backend: Backend
    dtype: str
    left_out: list[str] = dataclasses.field(default_factory=list)  # ops without an implementation, not asked for by --ops

    def implementation(self, task: OpTask) -> Implementation | None:
        return self.backend.find(task)

    def index(self, task: OpTask) -> int:
        return self.tasks.index(task)


def build(config: pytest.Config, eval_config: EvalConfig) -> SuiteRun:
    """The suite run the options ask for; :class:`KernelBenchUsageError` for options that do not fit."""
    name = config.getoption("kb_suite")
    if not name:
        raise KernelBenchUsageError("--ops, --backend-dir and --op-dtype go with --suite smoke|opinfo")
    clashing = [flag for dest, flag in _KERNEL_OPTIONS.items() if config.getoption(dest, None)]
    if clashing:
        raise KernelBenchUsageError(f"--suite judges ATen ops, not KernelBench problems: leave out {', '.join(clashing)}")
    wanted = parse_ops(config.getoption("kb_ops"))
    dtype = config.getoption("kb_op_dtype") or "float32"
    backend = backend_for(config.getoption("kb_backend_dir"))
    if name == "smoke":
        from ..suites.smoke import smoke_suite

        suite = smoke_suite(dtype)
    else:
        from ..suites.opinfo import opinfo_suite

        suite = opinfo_suite(eval_config.device, dtype, wanted)
    tasks = suite.select(wanted)
    left_out = [] if wanted else [t.name for t in tasks if backend.find(t) is None]
    tasks = [t for t in tasks if t.name not in left_out]
    if not tasks:
        raise KernelBenchUsageError(f"--backend-dir {backend.label}: no op of the {name} suite has an implementation there "
                                    "(DIR/<op>/<op>_implementation*.py, e.g. DIR/relu/relu_implementation.py)")  # fmt: skip
    return SuiteRun(suite, shard(tasks, config.getoption("kb_shard")), backend, dtype, left_out)


def header(run: SuiteRun, cfg: EvalConfig, sandbox: str) -> list[str]:
    samples = sum(len(t.correctness) for t in run.tasks)
    lines = [
        f"kernelbench: {run.suite.name} suite, {len(run.tasks)} ops ({samples} correctness samples, {run.dtype}), "
        f"implementations: {run.backend.label}, device: {cfg.device_label}, timeout: {cfg.timeout:g}s, "
        f"tolerance: {cfg.for_level(run.suite.name).tol.label}",
    ]
    if run.left_out:
        lines.append(f"kernelbench: {len(run.left_out)} ops of the suite have no implementation in {run.backend.label}: left out")
    if run.suite.skipped:
        reasons = "; ".join(f"{why}: {n}" for why, n in sorted(run.suite.skipped.items(), key=lambda kv: -kv[1]))
        lines.append(f"kernelbench: samples left out ({reasons})")
    lines.append(f"kernelbench: candidate runners: sandbox {sandbox}")
    return lines


def report_options(run: SuiteRun) -> dict[str, Any]:
    return {"suite": run.suite.name, "ops": [t.op for t in run.tasks], "backend_dir": run.backend.label, "op_dtype": run.dtype,
            "left_out_ops": run.left_out, "samples_left_out": run.suite.skipped}  # fmt: skip


def configure(config: pytest.Config) -> None:
    """Controller side: the suite's scores as JUnit ``<testsuite>`` properties."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ScoreProperties(), "kernelbench-op-scores")


class ScoreProperties:
    """Gathers the op results as their reports arrive (also from xdist workers); before the JUnit file is
    written, adds the scores to its ``<testsuite>`` properties."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = (getattr(report, "kb_result", None) or {}).get("extra", {}).get(KEY)
        if isinstance(entry, dict):
            self.entries.append(entry)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from _pytest.junitxml import xml_key

        xml = session.config.stash.get(xml_key, None)
        values = scores(self.entries)
        if xml is None or values is None:
            return
        for name in ("ops", "correct_ops", "correctness_score", "performance_score"):
            xml.add_global_property(f"kb_{name}", values[name])
        for name, value in values["perf_at_p"].items():
            xml.add_global_property(f"kb_{name}", value)
