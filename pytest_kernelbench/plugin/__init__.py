"""The pytest plugin: options, items, fixtures and reports.

Every selected problem becomes one item ``test_kernel[L1-19_ReLU]`` of the module
``pytest_kernelbench/plugin/kernel_items.py``, which the plugin adds to the session's
arguments, so a run works from any folder with no test file of the user's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..build.pool import Prebuilder, default_build_jobs, judging_order
from ..build.prune import caps_gb
from ..candidates import BASELINE, Candidate, candidate_paths, find_candidate
from ..config import EvalConfig, add_judge_options, check_folders, judge_values, mode_unavailable, pick_device
from ..errors import KernelBenchUsageError
from ..problems import Problem, dataset_specs, load_subset, parse_id_ranges, parse_levels, select_problems
from ..report import progress
from ..report.terminal import render_summary
from ..report.writer import ReportWriter, environment
from ..result import EvalResult

if TYPE_CHECKING:
    from ..judge.remote import RayEvaluator
from . import benchmark_bridge, op_suite, resume
from .session import KernelBenchSession, result_key, session_key
from .sharding import shard

ITEMS_MODULE = Path(__file__).with_name("kernel_items.py")
# Options whose presence on the command line asks for a kernelbench run (kb_model: kbagent's --model).
_TRIGGERS = ("kb_level", "kb_problems", "kb_subset", "kb_dataset", "kb_solutions", "kb_model", *op_suite.TRIGGERS)
_HAS_PYTEST_TIMEOUT = importlib.util.find_spec("pytest_timeout") is not None
__all__ = ["KernelBenchSession", "result_key", "session_key", "shard"]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernelbench", "KernelBench problems as pytest items")
    group.addoption("--level", dest="kb_level", help="problem level(s): mini (bundled, default), 0, 1, 2, 3, 3-metr, 4, 5; comma-separated")
    group.addoption("--problems", dest="kb_problems", help="problem ids and inclusive ranges, e.g. 1-5,7")
    group.addoption(
        "--subset",
        dest="kb_subset",
        help="narrow the levels to the problems a file names, one a line (a name like 19_ReLU, or level/id like 1/19), "
        "or to a named subset shipped here: metr-level3 (METR's filtered level 3), metr-level3-old",
    )
    group.addoption(
        "--dataset",
        dest="kb_dataset",
        action="append",
        help="KernelBench problems: a problems.jsonl, a folder of them, a KernelBench checkout, or 'hf' "
        "(repeatable; env KERNELBENCH_DATASET)",
    )
    group.addoption("--solutions", dest="kb_solutions", help="folder of ModelNew files (solutions/<level>/<name>.py), or 'baseline'")
    # The judge's own options (device, timeout, tolerances, timer, sandbox, ...): one table, shared with kbagent.
    add_judge_options(group.addoption, pytest=True, leave_out=frozenset({"--timeout"}) if _HAS_PYTEST_TIMEOUT else frozenset())
    group.addoption("--kb-report", dest="kb_report", help="write every result and the run's metadata to this JSON file")
    resume.add_option(group)
    group.addoption("--min-speedup", dest="kb_min_speedup", type=float, default=0.0, help="fail correct items slower than this")
    group.addoption(
        "--kb-progress",
        dest="kb_progress",
        choices=("auto", "on", "off"),
        default="auto",
        help="progress lines (built/judged/failed, ETA) during long runs; auto: on unless -q or CI is set",
    )
    group.addoption(
        "--kb-progress-interval", dest="kb_progress_interval", type=float, default=30.0, help="seconds between progress lines"
    )
    group.addoption(
        "--build-jobs",
        dest="kb_build_jobs",
        type=int,
        default=None,
        help="parallel ahead-of-time builds of load_inline candidates (default: the CPU core count; 0: off)",
    )
    group.addoption(
        "--ray-address",
        dest="kb_ray_address",
        help="judge on a Ray cluster: auto, HOST:PORT, or local (an in-process instance); one task and one GPU per candidate",
    )
    group.addoption("--shard", dest="kb_shard", help="run shard I of N (1-based, e.g. 2/4): a deterministic split of the problems")
    op_suite.add_options(group)
    parser.addini("kb_run_by_default", "run the kernelbench items when pytest gets no path arguments", type="bool", default=False)
    parser.addini("kb_solutions", "default --solutions, relative to the rootdir", default="")


def _active(config: pytest.Config) -> bool:
    if any(config.getoption(name, None) for name in _TRIGGERS):
        return True
    return bool(config.getini("kb_run_by_default")) and config.args_source != pytest.Config.ArgsSource.ARGS


def _timeout(config: pytest.Config) -> float:
    value = config.getoption("kb_timeout")
    if value is None and _HAS_PYTEST_TIMEOUT:
        value = config.getoption("timeout", None) or None  # pytest-timeout owns --timeout
    if value is not None and value <= 0:
        raise KernelBenchUsageError(f"--timeout {value:g}: must be a positive number of seconds")
    return float(value or EvalConfig.timeout)


def _solutions(config: pytest.Config) -> str:
    value = config.getoption("kb_solutions") or config.getini("kb_solutions") or BASELINE
    if value == BASELINE:
        return value
    path = Path(value)
    if not path.is_absolute() and not config.getoption("kb_solutions"):
        path = config.rootpath / path
    if not path.is_dir():
        raise KernelBenchUsageError(f"--solutions {value}: no such folder; pass a folder of ModelNew files or 'baseline'")
    return str(path.resolve())


def _build_session(config: pytest.Config) -> KernelBenchSession:
    levels = parse_levels(config.getoption("kb_level"))
    ids = parse_id_ranges(config.getoption("kb_problems"))
    subset = load_subset(config.getoption("kb_subset"))
    problems = select_problems(levels, ids, dataset_specs(config.getoption("kb_dataset")), subset=subset)
    problems = shard(problems, config.getoption("kb_shard"))
    values = judge_values(config.getoption)
    values["device"] = pick_device(values.get("device"))
    values["timeout"] = _timeout(config)
    if values.get("trials", 1) < 1:
        raise KernelBenchUsageError("--trials must be at least 1")
    index = _device_index() if values["device"] == "cuda" else 0  # a CPU judge's worker never imports torch for it
    eval_config = EvalConfig(device_index=index, **values)
    check_folders(eval_config)
    caps_gb()  # KB_CACHE_CAPS read now: a bad one is one line before any work
    _check_sandbox(eval_config)
    if (config.getoption("kb_build_jobs") or 0) < 0:
        raise KernelBenchUsageError("--build-jobs must be 0 (off) or more")
    if not config.getoption("kb_min_speedup") >= 0:
        raise KernelBenchUsageError(f"--min-speedup {config.getoption('kb_min_speedup')}: must be 0 or more")
    if not config.getoption("kb_progress_interval") >= 0:  # 0: a line after every result
        raise KernelBenchUsageError(f"--kb-progress-interval {config.getoption('kb_progress_interval')}: must be 0 seconds or more")
    _check_ray(config)
    if op_suite.requested(config):  # BackendBench-style: ATen ops are the items
        return KernelBenchSession([], BASELINE, eval_config, config.getoption("kb_min_speedup"), op_suite.build(config, eval_config))
    return KernelBenchSession(problems, _solutions(config), eval_config, config.getoption("kb_min_speedup"))


def _check_ray(config: pytest.Config) -> None:
    """``--ray-address``: a cluster that answers, connected now (xdist workers connect on first use), or one line."""
    address = config.getoption("kb_ray_address")
    if address and not hasattr(config, "workerinput"):
        from ..judge.remote import connect

        connect(address)


def _check_sandbox(config: EvalConfig) -> None:
    from ..judge.sandbox import SandboxUnavailable, resolve

    try:
        resolve(config.sandbox)
    except SandboxUnavailable as exc:
        raise KernelBenchUsageError(str(exc)) from None


def _report_writer(config: pytest.Config, session: KernelBenchSession) -> ReportWriter:
    options = {
        "levels": sorted({p.level for p in session.problems}),
        "problems": config.getoption("kb_problems"),
        "subset": config.getoption("kb_subset"),
        "datasets": dataset_specs(config.getoption("kb_dataset")),
        "solutions": session.solutions,
        "min_speedup": session.min_speedup,
        **session.eval_config.public(),
        **(op_suite.report_options(session.suite) if session.suite else {}),
    }
    writer = ReportWriter(config.getoption("kb_report"), options, environment(session.eval_config.device_label))
    writer.keep(resume.earlier_results(config, options))
    resume.check_writable(writer)
    return writer


_ITEM_ID = re.compile(r"^(.*?)(::test_(kernel|op)(?:\[.*\])?)$")


def _item_arg(arg: str) -> str:
    """A node id of one of our items as pytest prints it, pasted back from any folder: the same item of the items
    module. pytest prints ``::test_kernel[L1-19_ReLU]`` outside this package's folder, ``.../kernel_items.py::...``
    inside it, and, where an option's path became its rootdir (``--dataset`` from a folder without a pytest config),
    that folder's path relative to where it ran (``../../data/kernelbench::test_kernel[...]``). Any other argument,
    a ``::test_kernel`` of a test file of the user's included, is returned unchanged."""
    found = _ITEM_ID.match(arg)
    if not found:
        return arg
    path = found.group(1)
    if path.endswith(".py") and not path.endswith(("kernel_items.py", "op_items.py")):
        return arg
    return f"{ITEMS_MODULE if found.group(3) == 'kernel' else op_suite.OP_ITEMS_MODULE}{found.group(2)}"


def _device_index() -> int:
    """xdist workers spread over the visible GPUs: gw0 -> cuda:0, gw1 -> cuda:1, ..."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return 0
    try:
        import torch

        count = torch.cuda.device_count()
    except ImportError:
        count = 0
    return int(worker[2:]) % count if count else 0


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")
    # Our items record JUnit properties on purpose; readers of the XML (CI dashboards) accept them.
    config.addinivalue_line("filterwarnings", "ignore:record_property is incompatible with junit_family")
    if not _active(config):
        return
    try:
        session = _build_session(config)
    except KernelBenchUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[session_key] = session
    items = str(op_suite.OP_ITEMS_MODULE if session.suite else ITEMS_MODULE)
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        picked = [_item_arg(arg) for arg in config.args]
        if any(arg != orig for arg, orig in zip(picked, config.args, strict=True)):
            config.args[:] = picked  # pasted node ids of our items: just those
        else:
            config.args.append(items)
    else:
        config.args[:] = [items]
    if not hasattr(config, "workerinput"):  # xdist workers send their reports to the controller
        try:
            writer = _report_writer(config, session)
        except KernelBenchUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(ResultReporter(session, writer), "kernelbench-reporter")
    if session.suite is not None:
        op_suite.configure(config)
    if config.pluginmanager.hasplugin("benchmark"):
        config.pluginmanager.register(benchmark_bridge, "kernelbench-benchmark-bridge")
        benchmark_bridge.narrow_table(config)
    if hasattr(config, "workerinput") and not config.getoption("collectonly") and not config.getoption("kb_ray_address", None):
        from ..judge.controller import start_ahead

        start_ahead(session.eval_config)  # an xdist worker judges: its fork server starts while it collects


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(session_key, None)
    if session is None:
        return []
    from ..judge.sandbox import resolve

    cfg = session.eval_config
    if session.suite is not None:
        return op_suite.header(session.suite, cfg, resolve(cfg.sandbox).label)
    levels = sorted({p.level for p in session.problems})
    return [
        f"kernelbench: {len(session.problems)} problems (level {', '.join(levels)}), candidates: {session.solutions}, "
        f"device: {cfg.device_label}, mode: {cfg.mode}, ref mode: {cfg.ref_mode or 'by level'}, timeout: {cfg.timeout:g}s, "
        f"tolerance: {', '.join(sorted({cfg.for_level(level).tol.label for level in levels}))}",
        f"kernelbench: candidate runners: sandbox {resolve(cfg.sandbox).label}",
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kb_problem" not in metafunc.fixturenames:
        return
    session = metafunc.config.stash.get(session_key, None)
    problems = session.problems if session else []
    marks = {"4": pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason=_LEVEL4_REASON)}
    timeout = session.eval_config.timeout if session else 300.0
    unavailable = mode_unavailable(session.eval_config.mode, session.eval_config.device) if session else ""
    mode_mark = pytest.mark.skip(reason=unavailable) if unavailable else None  # --mode tensorrt without torch-tensorrt
    params = [
        pytest.param(
            p,
            id=p.id,
            marks=[m for m in (marks.get(p.level), mode_mark, _pytest_timeout_mark(timeout)) if m is not None],
        )
        for p in problems
    ]
    metafunc.parametrize("kb_problem", params)


_LEVEL4_REASON = "level 4 needs Hugging Face transformers and model weights: pip install transformers and make the weights loadable"


def _pytest_timeout_mark(timeout: float) -> Any:
    # With pytest-timeout installed, give items room beyond our own per-candidate limit.
    return pytest.mark.timeout(timeout * 2 + 120) if _HAS_PYTEST_TIMEOUT else None


@pytest.fixture
def kb_session(request: pytest.FixtureRequest) -> KernelBenchSession:
    session = request.config.stash.get(session_key, None)
    if session is None:
        pytest.skip("not a kernelbench run")
    return session


@pytest.fixture
def kb_candidate(kb_problem: Problem, kb_session: KernelBenchSession, request: pytest.FixtureRequest) -> Candidate:
    """The candidate to judge: from a plugin (kbagent's search), else the solutions folder; skips when there is none."""
    supplied = request.config.hook.pytest_kernelbench_candidate(problem=kb_problem, session=kb_session, request=request)
    if supplied is not None:
        return supplied
    device = kb_session.eval_config.target_device  # cpu-check checks the .cuda.py solutions
    candidate = find_candidate(kb_session.solutions, kb_problem, device)
    if candidate is None:
        looked = ", ".join(p.name for p in candidate_paths(Path(kb_session.solutions), kb_problem, device)[:2])
        pytest.skip(
            f"no solution for {kb_problem.id} in {kb_session.solutions} "
            f"(looked for {looked} under level{kb_problem.level}/, {kb_problem.level}/ and the folder itself)"
        )
    return candidate


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Our items are benchmarks: let pytest-benchmark see that (--benchmark-only / --benchmark-skip).
    if config.pluginmanager.hasplugin("benchmark"):
        for item in items:
            names = getattr(item, "fixturenames", None)
            if names is not None and "kb_problem" in names and "benchmark" not in names:
                names.append("benchmark")
    kb = config.stash.get(session_key, None)
    if kb is not None:
        resume.deselect_judged(config, items)
    if kb is not None and _pool_jobs(config, kb):  # the same order on every xdist worker: a pure function of the files
        planned = [_planned_candidate(item, kb) for item in items]
        items[:] = [items[i] for i in judging_order(planned)]


prebuilder_key = pytest.StashKey["Prebuilder"]()
remote_key = pytest.StashKey["RayEvaluator"]()


def judge(config: pytest.Config, problem: Problem, candidate: Candidate, session: KernelBenchSession) -> EvalResult:
    """One item's result: from the Ray cluster when ``--ray-address`` is given, else judged here."""
    remote = config.stash.get(remote_key, None)
    if remote is not None:
        return remote.result(problem, candidate)
    from ..judge.controller import evaluate

    return evaluate(problem, candidate, session.eval_config)


def ray_evaluator(config: pytest.Config, eval_config: EvalConfig) -> RayEvaluator | None:
    """The session's Ray cluster client with ``--ray-address`` (made on first use, closed at session
    finish), else None. Eval-only items and kbagent's searches share it."""
    address = config.getoption("kb_ray_address", None)
    if not address:
        return None
    remote = config.stash.get(remote_key, None)
    if remote is None:
        from ..judge.remote import RayEvaluator

        remote = config.stash[remote_key] = RayEvaluator(address, eval_config)
    return remote


def _planned_candidate(item: pytest.Item, kb: KernelBenchSession) -> Candidate | None:
    problem = getattr(item, "callspec", None) and item.callspec.params.get("kb_problem")
    return find_candidate(kb.solutions, problem, kb.eval_config.target_device) if isinstance(problem, Problem) else None


def _planned(session: pytest.Session, kb: KernelBenchSession) -> list[tuple[Problem, Candidate]]:
    planned = []
    for item in session.items:
        candidate = _planned_candidate(item, kb)
        if candidate is not None:
            planned.append((item.callspec.params["kb_problem"], candidate))
    return planned


def _pool_jobs(config: pytest.Config, kb: KernelBenchSession) -> int:
    """The build pool's parallel builds in this run: 0 without one (an agent's search, a Ray cluster, the baseline)."""
    if config.getoption("kb_model", None) or config.getoption("kb_ray_address", None) or kb.solutions == BASELINE:
        return 0
    jobs = config.getoption("kb_build_jobs")
    return default_build_jobs() if jobs is None else jobs


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the work ahead of the items: every evaluation on the Ray cluster, or the build pool.

    Under xdist every worker collects every item; only gw0 runs the pool, and the
    keyed build cache lets any worker use what it built (or wait for a build in flight).
    """
    config = session.config
    kb = config.stash.get(session_key, None)
    if kb is None or config.getoption("kb_model", None) or config.getoption("collectonly"):
        return
    remote = ray_evaluator(config, kb.eval_config)
    if remote is not None:
        for problem, candidate in _planned(session, kb):
            remote.submit(problem, candidate)
        return
    if session.items and not hasattr(config, "workerinput"):  # this process judges (a worker's started at configure)
        from ..judge.controller import start_ahead

        start_ahead(kb.eval_config)
    jobs = _pool_jobs(config, kb)
    if jobs == 0 or os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    prebuilder = Prebuilder(kb.eval_config, jobs)
    config.stash[prebuilder_key] = prebuilder
    for problem, candidate in _planned(session, kb):
        prebuilder.submit(problem, candidate)


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    kb = config.stash.get(session_key, None)
    if kb is None or hasattr(config, "workerinput"):
        return
    if not progress.wanted(config.getoption("kb_progress"), config.get_verbosity()):
        return
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        line = progress.ProgressLine(len(kb.problems), interval=config.getoption("kb_progress_interval"))
        config.pluginmanager.register(progress.ProgressReporter(line, terminal), "kernelbench-progress")


def pytest_sessionfinish(session: pytest.Session) -> None:
    prebuilder = session.config.stash.get(prebuilder_key, None)
    if prebuilder is not None:
        prebuilder.close(wait=False)  # every item has run: builds still in flight are for nothing
    remote = session.config.stash.get(remote_key, None)
    if remote is not None:
        remote.close()
    kb = session.config.stash.get(session_key, None)
    if kb is not None and not hasattr(session.config, "workerinput"):
        from ..build.prune import enforce_caps

        with contextlib.suppress(OSError):  # each cache within its cap (KB_CACHE_CAPS; kbagent cache info)
            enforce_caps(kb.eval_config.build_dir, kb.eval_config.pch_dir)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    result = item.stash.get(result_key, None)
    if result is not None and report.when == "call":
        report.kb_result = result.to_dict()  # travels to the xdist controller with the report
    return report


class ResultReporter:
    """Controller-side: gathers every item's result as its report arrives (also from xdist workers),
    writes the JSON report as it goes, and prints the summary table at the end."""

    def __init__(self, session: KernelBenchSession, writer: ReportWriter):
        self.session = session
        self.writer = writer

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items and not session.config.getoption("collectonly"):  # none on an xdist controller: see below
            self.writer.select([i for i in (resume.item_id(item.nodeid) for item in session.items) if i])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.writer.selected and not node.config.getoption("collectonly"):
            self.writer.select([i for i in map(resume.item_id, ids) if i])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "kb_result", None)
        if data:
            self.writer.add(EvalResult.from_dict(data))
        resume.record(self.writer, report)

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        self.writer.close()
        for line in resume.summary_lines(self.writer):
            terminalreporter.write_line(line)
        if not self.writer.results:
            return
        tw = terminalreporter._tw
        text = render_summary(
            self.writer.results, verbose=config.getoption("verbose") > 0, width=max(tw.fullwidth, 60), color=tw.hasmarkup
        )
        terminalreporter.write_sep("=", "kernelbench")
        terminalreporter.write(text)
        if self.writer.path:
            terminalreporter.write_line(f"kernelbench report: {self.writer.path}")
