"""Candidates from any folder of solution files, for ``throughput.py --corpus DIR``.

A solutions folder holds level folders (``<DIR>/level3-metr/10_ResNet101.py``, or ``<DIR>/mini/...``), as
``pytest --solutions DIR`` reads them; a corpus root holds several such folders, one per variant
(``<ROOT>/orig/level3-metr/...``). Each file is matched to its problem the way the plugin matches
(:func:`pytest_kernelbench.candidates.find_candidate`: the level folder and the problem's name), the problems read as
``pytest --level`` reads them (:func:`pytest_kernelbench.problems.select_problems`: ``--dataset``, and the bundled ones
for ``mini``). A file no problem claims is listed, not fatal.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_kernelbench.candidates import Candidate, builds_cuda_extension, builds_extension, find_candidate
from pytest_kernelbench.errors import KernelBenchUsageError
from pytest_kernelbench.problems import KNOWN_LEVELS, Problem, _level_str, select_problems


@dataclasses.dataclass
class FolderCorpus:
    pairs: list[tuple[Problem, Candidate, str]]  # (problem, candidate, kind)
    unmatched: list[Path]  # .py files in a level folder that no problem of the datasets claims
    roots: list[Path]  # the solutions folders read (one per variant)


def _level_dirs(folder: Path) -> list[Path]:
    """The folders ``find_candidate`` looks in: ``level<L>`` or ``<L>`` (a known level)."""
    named = [d for d in folder.iterdir() if d.name.startswith("level") or d.name in KNOWN_LEVELS] if folder.is_dir() else []
    return sorted(d for d in named if d.is_dir() and any(d.glob("*.py")))


def _problems(level: str, datasets: list[str]) -> list[Problem]:
    """The problems of one level, or none where the datasets have none (its files are then unmatched)."""
    try:
        return select_problems([level], None, datasets)
    except KernelBenchUsageError:
        return []


def solution_roots(folder: Path) -> list[Path]:
    """``folder`` when it holds level folders, else each of its subfolders that does (a corpus root of variants)."""
    if _level_dirs(folder):
        return [folder]
    roots = sorted(d for d in folder.iterdir() if d.is_dir() and _level_dirs(d))
    if not roots:
        raise SystemExit(f"error: --corpus {folder}: no level folder (level<L>/<id>_<Name>.py) in it or in its subfolders; "
                         "pass a --solutions folder or a folder of them")  # fmt: skip
    return roots


def kind_of(source: str) -> str:
    """What a candidate mostly is, for the per-kind table: its first-call costs differ by kind."""
    if builds_cuda_extension(source):
        return "cuda"
    if builds_extension(source):
        return "cpp"
    if "triton" in source:
        return "triton"
    if "torch.compile" in source:
        return "compile"
    if "CUDAGraph" in source or "cuda.graph" in source:
        return "graph"
    return "torch"


def folder_pairs(folder: Path, datasets: list[str], device: str = "cuda") -> FolderCorpus:
    """Every file of the folder (or of each variant folder in it) that a problem of ``datasets`` claims."""
    roots = solution_roots(folder)
    levels = sorted({_level_str(d.name) for root in roots for d in _level_dirs(root)})
    problems = [p for level in levels for p in _problems(level, datasets)]
    label_root = len(roots) > 1
    pairs, claimed = [], set()
    for root in roots:
        for problem in problems:
            found = find_candidate(str(root), problem, device)
            if found is None or Path(found.path).parent.parent != root:  # only files inside a level folder
                continue
            claimed.add(Path(found.path))
            label = f"{root.name}/{Path(found.path).name}" if label_root else Path(found.path).name
            pairs.append((problem, Candidate(found.source, found.path, label), kind_of(found.source)))
    files = [f for root in roots for d in _level_dirs(root) for f in sorted(d.glob("*.py"))]
    return FolderCorpus(pairs, [f for f in files if f not in claimed], roots)
