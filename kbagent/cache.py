"""``kbagent cache info`` and ``kbagent cache prune``: the judge's caches on disk (pytest_kernelbench/build/prune.py)."""

from __future__ import annotations

from typing import Any

import typer

cache_app = typer.Typer(help="The judge's caches on disk (builds, JIT, PCH, bytecode): sizes, caps, pruning.", no_args_is_help=True)

_BUILD_CACHE = typer.Option("", "--build-cache", help="the build cache folder (default: env KB_BUILD_CACHE, else the user cache)")
_BUILD_PCH = typer.Option("", "--build-pch", help="the PCH folder (default: env KB_PCH_DIR, else the user cache)")


def register(app: Any) -> None:
    app.add_typer(cache_app, name="cache")


def _caches(build_cache: str, build_pch: str, names: list[str] | None = None) -> list[Any]:
    from pytest_kernelbench.build.prune import caches
    from pytest_kernelbench.errors import KernelBenchUsageError

    try:
        found = caches(build_cache, build_pch)
    except KernelBenchUsageError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    unknown = sorted(set(names or []) - {c.name for c in found})
    if unknown:
        typer.echo(f"error: --cache {unknown[0]}: no such cache; the caches are {', '.join(c.name for c in found)}", err=True)
        raise typer.Exit(2)
    return [c for c in found if not names or c.name in names]


@cache_app.command("info")
def info_command(build_cache: str = _BUILD_CACHE, build_pch: str = _BUILD_PCH) -> None:
    """Each cache: its folder, entries, size and cap."""
    from pytest_kernelbench.build.prune import gib

    total = 0
    for cache in _caches(build_cache, build_pch):
        entries = cache.entries()
        size = sum(e.size for e in entries)
        total += size
        cap = "no cap" if cache.cap is None else f"cap {gib(cache.cap)}"
        typer.echo(f"{cache.name:<13} {gib(size):>11}  {len(entries):>5} entries  {cap:<14} {cache.root}")
    typer.echo(f"{'total':<13} {gib(total):>11}  (kbagent cache prune: down to the caps; KB_CACHE_CAPS=builds=20,jit=5 sets them)")


@cache_app.command("prune")
def prune_command(
    cache: list[str] = typer.Option([], "--cache", help="only this cache (repeatable): builds, jit, pch, bytecode, judge-triton"),
    max_gb: float | None = typer.Option(None, "--max-gb", help="down to this many GB each (default: each cache's cap)"),
    older_than: float | None = typer.Option(None, "--older-than", help="also every entry unused for this many days"),
    remove_all: bool = typer.Option(False, "--all", help="every entry not in use"),
    dry_run: bool = typer.Option(False, "--dry-run", help="say what would go, remove nothing"),
    build_cache: str = _BUILD_CACHE,
    build_pch: str = _BUILD_PCH,
) -> None:
    """Remove the least recently used entries until each cache is within its cap (or --max-gb); entries a judge may be
    using (touched in the last 10 minutes, a build whose lock is held) are kept."""
    from pytest_kernelbench.build.prune import GIB, gib, prune

    for value, flag in ((max_gb, "--max-gb"), (older_than, "--older-than")):
        if value is not None and not value >= 0:
            typer.echo(f"error: {flag} {value:g}: give 0 or more", err=True)
            raise typer.Exit(2)
    for found in _caches(build_cache, build_pch, cache):
        limit = 0 if remove_all else int(max_gb * GIB) if max_gb is not None else found.cap
        age = older_than * 86400 if older_than is not None else None
        done = prune(found, max_bytes=limit, older_than_s=age, dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        kept = f", {done.kept_in_use} in use kept" if done.kept_in_use else ""
        typer.echo(f"{found.name}: {verb} {done.removed} entries, {gib(done.freed)}{kept}")
