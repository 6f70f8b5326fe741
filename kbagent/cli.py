"""The ``kbagent`` command line."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(help="KernelBench agent tools: judge candidates, run agent searches.", no_args_is_help=True, add_completion=False)


@app.callback()
def main() -> None:
    """KernelBench agent tools."""


@app.command("eval")
def eval_command(
    problem_file: Path = typer.Argument(..., help="KernelBench-format problem (defines Model, get_inputs, get_init_inputs)"),
    solution_file: Path = typer.Argument(..., help="candidate that defines ModelNew"),
    device: str | None = typer.Option(None, help="cpu or cuda (default: cuda if available)"),
    timeout: float = typer.Option(300.0, help="wall-clock seconds for the whole evaluation"),
    mode: str = typer.Option("eager", help="reference as 'eager' or 'compile' (torch.compile)"),
    atol: float = typer.Option(1e-2, help="absolute tolerance"),
    rtol: float = typer.Option(1e-2, help="relative tolerance"),
    trials: int = typer.Option(5, help="correctness trials with fresh seeded inputs"),
    seed: int = typer.Option(42, help="base random seed"),
    strict: bool = typer.Option(False, "--strict", help="reject candidates whose forward runs PyTorch compute ops"),
    as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object on stdout"),
) -> None:
    """Judge one candidate against one problem. Exit code: 0 correct, 1 judged but not correct, 2 bad input."""
    from pytest_kernelbench.candidates import load_candidate_file
    from pytest_kernelbench.config import EvalConfig
    from pytest_kernelbench.errors import KernelBenchUsageError
    from pytest_kernelbench.evaluate import evaluate
    from pytest_kernelbench.problems import problem_from_path

    try:
        if device not in (None, "cpu", "cuda"):
            raise KernelBenchUsageError(f"--device {device}: choose cpu or cuda")
        if mode not in ("eager", "compile"):
            raise KernelBenchUsageError(f"--mode {mode}: choose eager or compile")
        if not solution_file.is_file():
            raise KernelBenchUsageError(f"{solution_file}: no such solution file")
        problem = problem_from_path(problem_file)
        device = _pick_device(device)
    except KernelBenchUsageError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    config = EvalConfig(device=device, timeout=timeout, mode=mode, atol=atol, rtol=rtol, trials=trials, seed=seed, strict=strict)
    result = evaluate(problem, load_candidate_file(solution_file), config)
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
    else:
        from rich.console import Console

        console = Console()
        if result.correct:
            console.print(
                f"[green]correct[/] {problem.name}: {result.speedup:.3f}x (reference {result.ref_ms:.4g} ms, "
                f"candidate {result.new_ms:.4g} ms, reward {result.reward:+.3f}) on {result.device_name or device}"
            )
        else:
            console.print(f"[red]{result.outcome.value}[/] {problem.name} (stage {result.stage}, reward {result.reward:+.0f})")
            console.print(result.message, markup=False, highlight=False)
    raise typer.Exit(0 if result.correct else 1)


@app.command("table")
def table_command(reports: list[Path] = typer.Argument(..., help="JSON files written by --kb-report")) -> None:
    """Print a Markdown table per report (for docs): timings, speedups, fast_p, geomean."""
    from pytest_kernelbench.markdown import report_table
    from pytest_kernelbench.report import load_report

    for path in reports:
        if not path.is_file():
            typer.echo(f"error: {path}: no such report", err=True)
            raise typer.Exit(2)
        data, results = load_report(path)
        typer.echo(f"### {path.name}\n")
        typer.echo(report_table(data, results))


def _pick_device(device: str | None) -> str:
    import torch

    from pytest_kernelbench.errors import KernelBenchUsageError

    if device == "cuda" and not torch.cuda.is_available():
        raise KernelBenchUsageError("--device cuda: no CUDA device is visible; use --device cpu")
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


if __name__ == "__main__":
    app()
