"""The ``kbagent`` command line."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import sys
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from kbagent import cache, compare
from pytest_kernelbench.config import cuda_available, pick_device
from pytest_kernelbench.problems import DATASET_ENV
from pytest_kernelbench.report.text import markup, printable

app = typer.Typer(help="KernelBench agent tools: judge candidates, run agent searches.", no_args_is_help=True, add_completion=False)


@app.callback()
def main() -> None:
    """KernelBench agent tools."""


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r}: choose {', '.join(choices)}")
        return value

    return parse


def judge_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a typer command every judge option of ``pytest_kernelbench.config.JUDGE_OPTIONS`` (the table the
    pytest plugin reads too); the command receives the ones given as ``judge: dict``."""
    from pytest_kernelbench.config import JUDGE_OPTIONS

    extra = []
    for opt in JUDGE_OPTIONS:
        if opt.kind is bool:
            info = typer.Option(None, f"{opt.flag}/--no-{opt.flag[2:]}", help=opt.help_text(), show_default=False)
        elif opt.choices:
            info = typer.Option(None, opt.flag, help=opt.help_text(), show_default=False, parser=_choice(opt.choices),
                                metavar="|".join(opt.choices))
        else:
            info = typer.Option(None, opt.flag, help=opt.help_text(), show_default=False)
        extra.append(inspect.Parameter(f"kb_{opt.field}", inspect.Parameter.KEYWORD_ONLY, default=info, annotation=opt.kind | None))
    signature = inspect.signature(command)
    own = [param for name, param in signature.parameters.items() if name != "judge"]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        given = {k[3:]: kwargs.pop(k) for k in list(kwargs) if k.startswith("kb_")}
        return command(**kwargs, judge={k: v for k, v in given.items() if v is not None})

    wrapper.__signature__ = signature.replace(parameters=own + extra)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {k: v for k, v in typing.get_type_hints(command).items() if k != "judge"}
    wrapper.__annotations__.update({p.name: p.annotation for p in extra})
    return wrapper


@app.command("eval")
@judge_options
def eval_command(
    problem_file: Path = typer.Argument(..., help="KernelBench-format problem (defines Model, get_inputs, get_init_inputs)"),
    solution_file: Path = typer.Argument(..., help="candidate that defines ModelNew"),
    as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object on stdout"),
    judge: dict[str, Any] | None = None,
) -> None:
    """Judge one candidate against one problem. Exit code: 0 correct (--device cpu-check: built), 1 judged but not
    correct, 2 bad input."""
    from pytest_kernelbench.candidates import load_candidate_file
    from pytest_kernelbench.errors import KernelBenchUsageError
    from pytest_kernelbench.judge.controller import evaluate
    from pytest_kernelbench.problems import problem_from_path

    values = dict(judge or {})
    try:
        if not solution_file.is_file():
            raise KernelBenchUsageError(f"{solution_file}: no such solution file")
        problem = problem_from_path(problem_file)
        device = pick_device(values.pop("device", None))
        config = _eval_config(device, values)
    except (KernelBenchUsageError, _BadInput) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    result = evaluate(problem, load_candidate_file(solution_file), config)
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
    else:
        from rich.console import Console
        from rich.markup import escape

        from pytest_kernelbench.report.summary import capped_note

        console, name = Console(), markup(problem.name)
        if result.correct:
            console.print(
                f"[green]correct[/] {name}: {result.speedup:.3f}x (reference {result.ref_ms:.4g} ms, "
                f"candidate {result.new_ms:.4g} ms, reward {result.reward:+.3f}) on {markup(result.device_name or device)}"
                + (" [yellow]noisy: the timing's spread cannot tell this speedup from none[/]" if result.extra.speedup_noisy else "")
                + (f" [yellow]{escape(capped_note(result).strip())}[/]" if capped_note(result) else "")
            )
        elif result.outcome.value == "built":
            console.print(f"[green]built[/] {name} (--device cpu-check: no timing, no reward)")
            console.print(printable(result.message), markup=False, highlight=False)
        else:
            reward = "no reward: the judge's own failure" if result.reward is None else f"reward {result.reward:+.0f}"
            console.print(f"[red]{result.outcome.value}[/] {name} (stage {markup(result.stage)}, {reward})")
            console.print(printable(result.message), markup=False, highlight=False)
    raise typer.Exit(0 if result.correct or result.outcome.value == "built" else 1)


@app.command("check")
@judge_options
def check_command(
    problem_file: Path = typer.Argument(..., help="KernelBench-format problem (defines Model, get_inputs, get_init_inputs)"),
    solution_file: Path = typer.Argument(..., help="candidate that defines ModelNew"),
    as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object on stdout"),
    judge: dict[str, Any] | None = None,
) -> None:
    """Check one candidate without a GPU: eval with --device cpu-check (a CUDA candidate compiled by nvcc, never run;
    any other run on the CPU, a Triton one in Triton's interpreter, on scaled-down inputs). Exit code: 0 built,
    1 failed (compile_error, incorrect, ...), 2 bad input."""
    eval_command.__wrapped__(problem_file, solution_file, as_json, judge={**(judge or {}), "device": "cpu-check"})


@app.command("serve")
@judge_options
def serve_command(
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    port: int = typer.Option(8000, help="port to listen on (0: a free one; the address is printed on stderr)"),
    token: str | None = typer.Option(
        None, envvar="KBAGENT_SERVE_TOKEN", show_default=False,
        help="token every request but /healthz must send (Authorization: Bearer, or X-API-Key); default: a new one, printed",
    ),
    allow_host: list[str] = typer.Option([], "--allow-host", help="a Host the service also answers to (NAME or NAME:PORT), "
                                         "besides the address it listens on"),
    state: Path = typer.Option(Path("kbagent-serve"), help="folder of the episodes' log, written as they go and read back on start"),
    workers: int | None = typer.Option(None, help="evaluations at once (default: half the cores, at most 16, at least one per GPU)"),
    queue: int = typer.Option(64, help="evaluations that may wait beyond --workers; more are answered 429 with Retry-After"),
    request_timeout: float = typer.Option(300.0, help="seconds one request may take, its wait in the queue included"),
    level: str | None = typer.Option(None, "--level", help="serve only these levels, comma-separated (default: any level of the data)"),
    subset: str | None = typer.Option(
        None, "--subset", help="serve only the problems a file names (19_ReLU or 1/19, one a line), or a named subset: metr-level3, ..."
    ),
    dataset: list[str] = typer.Option(
        [], "--dataset", help=f"KernelBench data: a problems.jsonl, a folder of them, a KernelBench checkout, or hf "
        f"(default: ${DATASET_ENV})"
    ),
    log_level: str = typer.Option("info", help="uvicorn's log level", parser=_choice(("critical", "error", "warning", "info", "debug"))),
    allow_problem_code: bool = typer.Option(
        False, "--allow-problem-code", help="judge against a client's own problem_code: its reference and its get_inputs() "
        "run in runners sandboxed like a candidate's (a verdict is as sound as the client's reference)",
    ),
    protocol: str = typer.Option("native", help="native (the /v1 API) or openreward (OpenReward's environment server: needs "
                                 "the openreward extra and --level)", parser=_choice(("native", "openreward"))),
    judge: dict[str, Any] | None = None,
) -> None:
    """The judge as an HTTP service for RL trainers: run_kernel, episodes, health and metrics (see docs/rl.md)."""
    from kbagent.serve.main import ServeError, ServeOptions, serve
    from pytest_kernelbench.config import env_values
    from pytest_kernelbench.errors import KernelBenchUsageError

    options = ServeOptions(host, port, token or None, state, workers, queue, request_timeout, level, subset, list(dataset), log_level,
                           allow_problem_code, tuple(allow_host), protocol)  # fmt: skip
    try:
        values = env_values(dict(judge or {}))  # the service's requests are judged with these: the environment's too
        device = pick_device(values.pop("device", None))
        _eval_config(device, values)  # the service's judge options, checked once
        serve(options, device, values)
    except (_BadInput, KernelBenchUsageError, ServeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command("table")
def table_command(reports: list[Path] = typer.Argument(..., help="JSON files written by --kb-report")) -> None:
    """Print a Markdown table per report (for docs): timings, speedups, fast_p, geomean."""
    from pytest_kernelbench.report.markdown import report_table

    for path, (data, results) in zip(reports, _reports(reports), strict=True):
        typer.echo(f"### {path.name}\n")
        typer.echo(report_table(data, results))


def _require_reports(paths: list[Path]) -> None:
    for path in paths:
        if not path.is_file():
            typer.echo(f"error: {path}: no such report (write one with pytest --kb-report PATH)", err=True)
            raise typer.Exit(2)


def _reports(paths: list[Path]) -> list[tuple[Any, Any]]:
    """Every report read, or one line on stderr and exit code 2 for the first that is missing or not a report."""
    from pytest_kernelbench.report.writer import ReportError, load_report

    _require_reports(paths)
    try:
        return [load_report(path) for path in paths]
    except ReportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


compare.register(app)  # kbagent compare BASE.json NEW.json
cache.register(app)  # kbagent cache info|prune


@app.command("solutions-table")
def solutions_table_command(
    eager: list[Path] = typer.Option(..., "--eager", help="--kb-report of a --mode eager run of the solutions (repeatable)"),
    compiled: list[Path] = typer.Option([], "--compile", help="--kb-report of a --mode compile run of the same solutions"),
    committed_only: bool = typer.Option(
        False, "--committed-only", help="leave out rows whose solution file no longer exists here (paths as the run saw them)"
    ),
) -> None:
    """Markdown tables (one per level) of eager, torch.compile and our times, for docs/solutions.md."""
    from pytest_kernelbench.report.markdown import solutions_tables

    def committed(result: Any) -> bool:
        return not result.candidate_path or Path(result.candidate_path).is_file()

    typer.echo(solutions_tables(_reports(eager), _reports(compiled), keep=committed if committed_only else None))


@app.command("baseline-json")
def baseline_json_command(
    reports: list[Path] = typer.Argument(..., help="--kb-report files of --solutions baseline runs, or baseline files "
                                         "written before (merged; later inputs win)"),
    out_dir: Path = typer.Option(Path("."), "--out-dir", help="where to write the JSON files"),
    label: str = typer.Option("ours", "--label", help="file name prefix, e.g. H100_ours"),
) -> None:
    """Write baseline timings (eager; torch.compile from --mode compile runs) in KernelBench's JSON shape."""
    from pytest_kernelbench.report.baselines import BaselineError, write_baseline_files
    from pytest_kernelbench.report.writer import ReportError

    _require_reports(reports)  # write_baseline_files reads them
    try:
        for path in write_baseline_files(reports, out_dir, label):
            typer.echo(str(path))
    except (BaselineError, ReportError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command("baseline-compare")
def baseline_compare_command(
    ours: Path = typer.Argument(..., help="a baseline JSON written by baseline-json"),
    theirs: Path = typer.Argument(..., help="KernelBench's JSON of the same mode, e.g. timing/H100_Modal__baseline_time_torch.json"),
) -> None:
    """Markdown table: per level, how far our baseline times are from KernelBench's."""
    from pytest_kernelbench.report.baselines import compare_markdown

    for path in (ours, theirs):
        if not path.is_file():
            typer.echo(f"error: {path}: no such file", err=True)
            raise typer.Exit(2)
    typer.echo(compare_markdown(ours, theirs))


API_KEY_ENV = "KBAGENT_API_KEY"


class _BadInput(Exception):
    """Bad command-line input: one line on stderr, exit code 2."""


def _default_out(level: str) -> Path:
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{level}"


@app.command("search")
@judge_options
def search_command(
    problem_file: Path | None = typer.Argument(
        None, help="KernelBench-format problem (Model, get_inputs, get_init_inputs); or --level/--problem; not needed with --resume"
    ),
    level: str | None = typer.Option(
        None, "--level", help="a dataset level (mini: the bundled problems; 1, 2, 3, ... need --dataset), with --problem"
    ),
    problem_id: int | None = typer.Option(None, "--problem", help="the problem id in --level, e.g. --level 1 --problem 19"),
    dataset: list[str] = typer.Option(
        [], "--dataset", help="KernelBench data for --level: a problems.jsonl, a folder of them, a KernelBench checkout, or hf "
        f"(default: ${DATASET_ENV})"
    ),
    model: str | None = typer.Option(
        None, help="litellm model: gemini/..., openai/..., anthropic/..., or scripted/reference (no key, no network)"
    ),
    num_samples: int | None = typer.Option(None, help="ideas in the brainstorm, and samples per phase (default: 10)"),
    num_phases: int | None = typer.Option(None, help="phases, phase 0 included (default: 3)"),
    max_fix_attempts: int | None = typer.Option(None, help="repair calls per failing sample (default: 2)"),
    num_workers: int | None = typer.Option(None, help="LLM calls in flight (default: 4)"),
    dry_run: bool | None = typer.Option(None, "--dry-run/--no-dry-run", help="the whole loop without evaluating anything"),
    query_budget: int | None = typer.Option(None, help="stop after this many LLM calls (default: none)"),
    max_cost: float | None = typer.Option(
        None, help="stop starting LLM calls once this many dollars are spent (default: none); needs a price (litellm's or --price-in/out)"
    ),
    price_in: float | None = typer.Option(
        None, help="USD per million prompt tokens, for a model litellm has no price for (with --price-out)"
    ),
    price_out: float | None = typer.Option(None, help="USD per million completion tokens (with --price-in)"),
    temperature: float | None = typer.Option(None, help="sampling temperature (default: 0.7)"),
    max_tokens: int | None = typer.Option(None, help="max tokens per reply (default: 8192)"),
    api_base: str | None = typer.Option(None, help="OpenAI-compatible base URL (vLLM, a gateway), e.g. http://host:8000/v1"),
    api_key: str | None = typer.Option(
        None, envvar=API_KEY_ENV, show_default=False, help="API key (else the provider's own env variable); never saved or printed"
    ),
    strategy: str | None = typer.Option(None, help="parent selection: lineage-topk (PIKE, default), elite-diverse, tournament, roulette"),
    num_parents: int | None = typer.Option(None, help="parents per improve phase (default: 4)"),
    elitism: bool | None = typer.Option(None, "--elitism/--no-elitism", help="keep the best-ever candidate as a parent (default: on)"),
    language: str | None = typer.Option(None, help="cuda, triton or cpp (default: cuda on GPU, cpp on CPU)"),
    eval_jobs: int | None = typer.Option(None, help="evaluations at once (default: half the cores, at most 8)"),
    search_seed: int | None = typer.Option(None, help="seed of parent selection (default: 0); --seed is the judge's"),
    out: Path | None = typer.Option(None, help="run folder (default: runs/<timestamp>-<level>)"),
    resume: bool = typer.Option(False, "--resume", help="continue the run in --out: finished LLM calls and evaluations are not redone"),
    as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object (the summary) on stdout"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress lines on stderr"),
    judge: dict[str, Any] | None = None,
) -> None:
    """Agent search for one problem: brainstorm, write, fix and improve candidates, judge each one.
    Exit code: 0 a correct candidate was found (dry run: a candidate; --device cpu-check: a built one), 1 none, 2 bad input."""
    from kbagent.preflight import check_cost_cap, check_llm
    from kbagent.search import make_search_llm, run_search_sync
    from pytest_kernelbench.config import MACHINE_FOLDERS
    from pytest_kernelbench.errors import KernelBenchUsageError

    search_given = {
        "model": model, "num_samples": num_samples, "num_phases": num_phases, "max_fix_attempts": max_fix_attempts,
        "num_workers": num_workers, "dry_run": dry_run, "query_budget": query_budget, "max_cost_usd": max_cost,
        "price_in": price_in, "price_out": price_out,
        "temperature": temperature, "max_tokens": max_tokens, "api_base": api_base, "strategy": strategy,
        "num_parents": num_parents, "elitism": elitism, "language": language, "eval_jobs": eval_jobs, "seed": search_seed,
    }  # fmt: skip
    search_given = {k: v for k, v in search_given.items() if v is not None}
    eval_given = dict(judge or {})
    device = eval_given.pop("device", None)
    try:
        given_problem = _given_problem(problem_file, level, problem_id, dataset)
        if resume:
            problem, config, eval_saved, out = _resume_inputs(given_problem, out, search_given)
        else:
            problem, config, eval_saved, out = _fresh_inputs(given_problem, problem_file, out, search_given)
        config.api_key = api_key or None
        dataclasses.replace(config, dry_run=True).validated("cpu")  # all but the language's device: before importing torch
        check_cost_cap(config.llm_settings(), "--max-cost", config.max_cost_usd)
        saved = {k: v for k, v in eval_saved.items() if k not in MACHINE_FOLDERS}  # this machine's folders, not the saved run's
        eval_values = {**saved, **eval_given}
        device = _search_device(device or eval_values.pop("device", None), config.language)
        eval_values.pop("device", None)
        eval_config = _eval_config(device, eval_values)
        config = config.validated(device)
        llm = make_search_llm(config)
        check_llm(config.llm_settings())  # last: no key, unknown provider or model, no server, a one-token request refused
    except (_BadInput, KernelBenchUsageError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    def progress(line: str) -> None:
        if not quiet:
            typer.echo(f"[kbagent] {printable(line)}", err=True)

    progress(f"{problem.name}: model {config.model}, {config.num_samples} samples x {config.num_phases} phases, strategy "
             f"{config.strategy}, language {config.language}, device {eval_config.device_label}{' (dry run)' if config.dry_run else ''}; "
             f"run folder {out}")  # fmt: skip
    try:
        result = run_search_sync(problem, config, eval_config, llm, out, on_event=progress)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: continue with  {resume_hint(out, api_key)}", err=True)
        raise typer.Exit(130) from None
    summary = {**result.summary, "run_dir": str(out)}
    best = summary["best"] or {}
    ok = best.get("outcome") in ("correct", "built") or (config.dry_run and result.best is not None)  # built: --device cpu-check
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        if best:
            speed = f" {best['speedup']:.3f}x" if best.get("speedup") is not None else ""
            if best.get("rejudged"):  # the fresh judgement is the figure; the search's best-of-many beside it
                found = best.get("search_speedup")
                speed += f" re-judged (search: {found:.3f}x)" if found is not None else " re-judged"
            typer.echo(f"best: {best['node']} {best.get('outcome') or 'not evaluated'}{speed} -> {best['path']}")
        else:
            typer.echo("best: no candidate")
        tokens = summary["tokens"]["total"]
        typer.echo(
            f"{summary['llm_calls']} LLM calls ({summary['llm_calls_replayed']} replayed), {tokens} tokens, "
            f"${summary['cost_usd']:.4f}; {summary['evaluations']} evaluations; {summary['stop_reason']}; run folder {out}"
        )
    raise typer.Exit(0 if ok else 1)


def resume_hint(out: Path, api_key: str | None) -> str:
    """The command that continues a run; the key is never saved, so a key given on the command line is asked again
    (named, never printed)."""
    import os

    hint = f"kbagent search --resume --out {out}"
    if api_key and os.environ.get(API_KEY_ENV) != api_key:
        hint += f" --api-key KEY (the key is never saved; or set {API_KEY_ENV})"
    return hint


def _given_problem(problem_file: Path | None, level: str | None, problem_id: int | None, datasets: list[str]) -> Any:
    """The problem named on the command line: a PROBLEM_FILE, or ``--level L --problem ID [--dataset PATH]``; None if neither."""
    from pytest_kernelbench.problems import BUNDLED_LEVEL, dataset_specs, parse_levels, problem_from_path, select_problems

    if problem_file is not None:
        if level is not None or problem_id is not None or datasets:
            raise _BadInput(f"{problem_file}: give a PROBLEM_FILE or --level L --problem ID [--dataset PATH], not both")
        return problem_from_path(problem_file)
    if level is None and problem_id is None:
        if datasets:
            raise _BadInput("--dataset needs --level L --problem ID (the problem to search for)")
        return None
    if level is None:
        raise _BadInput(f"--problem {problem_id} needs --level, e.g. --level mini --problem {problem_id}")
    if problem_id is None:
        raise _BadInput(f"--level {level} needs --problem ID, e.g. --level {level} --problem 1")
    levels = parse_levels(level)
    if len(levels) != 1:
        raise _BadInput(f"--level {level}: one level only (the search is for one problem)")
    specs = dataset_specs(datasets)
    available = select_problems(levels, None, specs)
    for problem in available:
        if problem.problem_id == problem_id:
            return problem
    ids = _id_ranges([p.problem_id for p in available])
    where = f" of {', '.join(specs)}" if specs and levels[0] != BUNDLED_LEVEL else ""
    raise _BadInput(f"--problem {problem_id}: level {levels[0]}{where} has no such problem; choose one of its ids: {ids}")


def _id_ranges(ids: list[int]) -> str:
    """``[1, 2, 3, 5, 7, 8]`` -> ``"1-3, 5, 7-8"``."""
    spans: list[list[int]] = []
    for i in sorted(set(ids)):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in spans)


def _fresh_inputs(
    problem: Any, problem_file: Path | None, out: Path | None, given: dict[str, Any]
) -> tuple[Any, Any, dict[str, Any], Path]:
    from kbagent.runfolder import RunFolder
    from kbagent.search import SearchConfig

    if problem is None:
        raise _BadInput("missing PROBLEM_FILE or --level L --problem ID (or continue a run with --resume --out RUN_FOLDER)")
    if problem.level != "file" or problem_file is None:
        level = problem.level
    else:
        level = problem_file.resolve().parent.name or "file"
    out = out or _default_out(level)
    if out.exists() and not out.is_dir():
        raise _BadInput(f"--out {out}: not a folder")
    if not RunFolder(out).is_empty():
        raise _BadInput(f"--out {out}: the folder is not empty; add --resume to continue that run, or choose another --out")
    if "model" not in given:
        raise _BadInput("--model is required (a litellm model such as openai/gpt-4o, or scripted/reference)")
    return problem, SearchConfig(**given), {}, out


def _resume_inputs(given_problem: Any, out: Path | None, given: dict[str, Any]) -> tuple[Any, Any, dict[str, Any], Path]:
    from kbagent.runfolder import RunFolder
    from kbagent.search import SearchConfig
    from pytest_kernelbench.problems import Problem

    if out is None:
        raise _BadInput("--resume needs --out RUN_FOLDER (the run to continue)")
    saved = RunFolder(out).load_config()
    source_path = out / "problem.py"
    if not isinstance(saved, dict) or not source_path.is_file():
        raise _BadInput(f"--out {out}: no run to resume there (no config.json and problem.py)")
    p = saved.get("problem", {})
    problem = Problem(str(p.get("level", "file")), int(p.get("problem_id", 0)), str(p.get("name", "problem")),
                      source_path.read_text(encoding="utf-8"), str(p.get("origin", "")))  # fmt: skip
    if given_problem is not None and given_problem.source_hash != problem.source_hash:
        raise _BadInput(f"{given_problem.origin or given_problem.id}: not the problem of the run in {out}")
    config = SearchConfig.from_public(saved.get("search", {}), **given)
    return problem, config, dict(saved.get("eval", {})), out


def _eval_config(device: str, values: dict[str, Any]) -> Any:
    from pytest_kernelbench.config import EvalConfig, check_folders, env_values, mode_unavailable

    fields = {f.name for f in dataclasses.fields(EvalConfig)} - {"device"}
    values = {k: v for k, v in env_values(values).items() if k in fields}
    if values.get("trials", 1) < 1:
        raise _BadInput("--trials must be at least 1")
    if values.get("timeout", 1) <= 0:
        raise _BadInput("--timeout must be a positive number of seconds")
    config = EvalConfig(device=device, **values)
    check_folders(config)
    unavailable = mode_unavailable(config.mode, config.device)
    if unavailable:  # --mode tensorrt without torch-tensorrt (or a GPU): nothing to judge against
        raise _BadInput(unavailable)
    from pytest_kernelbench.judge.sandbox import SandboxUnavailable, resolve

    try:
        resolve(config.sandbox)
    except SandboxUnavailable as exc:
        raise _BadInput(str(exc)) from None
    return config


@app.command("report")
def report_command(
    run_folder: Path = typer.Argument(..., help="a search run folder, or a folder of them (a pytest --model run's --out)"),
    plots: Path | None = typer.Option(None, help="where the PNG plots go (default: RUN_FOLDER/plots)"),
    no_plots: bool = typer.Option(False, "--no-plots", help="print the table only"),
) -> None:
    """Table of the searches in RUN_FOLDER, and plots: speedup per phase per task, geomean speedup vs
    phase, speedup vs LLM calls and vs dollars, fast_p vs p."""
    from kbagent import plots as kbplots
    from kbagent.runfolder import find_runs

    if not run_folder.is_dir():
        typer.echo(f"error: {run_folder}: no such run folder", err=True)
        raise typer.Exit(2)
    runs = [kbplots.load_run(path) for path in find_runs(run_folder)]
    if not runs:
        typer.echo(f"error: {run_folder}: no search runs in it (no summary.json)", err=True)
        raise typer.Exit(2)
    typer.echo(kbplots.table(runs))
    if no_plots:
        return
    try:
        written = kbplots.draw(runs, plots or run_folder / "plots")
    except ImportError:
        typer.echo("error: the plots need matplotlib: pip install 'pytest-kernelbench[plot]'", err=True)
        raise typer.Exit(2) from None
    for path in written:
        typer.echo(f"wrote {path}")


def entry(argv: list[str] | None = None) -> None:
    """The ``kbagent`` script: like ``app()``, but a usage error (a bad option value, an unknown
    option) is one line on stderr and exit code 2."""
    try:
        code = app(args=argv, standalone_mode=False)
    except Exception as exc:
        format_message = getattr(exc, "format_message", None)
        exit_code = getattr(exc, "exit_code", None)
        if not callable(format_message) or not isinstance(exit_code, int):
            raise
        message = " ".join(str(format_message()).split())
        if message:
            typer.echo(f"error: {message}", err=True)
        sys.exit(exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


def _search_device(device: str | None, language: str | None) -> str:
    """The search's judge device: as asked, except that a search for GPU kernels (--device cuda, or --language cuda or
    triton) where no GPU is visible checks its candidates with --device cpu-check, so its fix loop still makes progress."""
    gpu_search = device == "cuda" or (device is None and (language or "").lower() in ("cuda", "triton"))
    if gpu_search and not cuda_available(asked=device == "cuda"):
        return "cpu-check"
    return pick_device(device)


if __name__ == "__main__":
    entry()
