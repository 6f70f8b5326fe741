"""The house rules, read off the source with ``ast``: in pytest_kernelbench/ and kbagent/ no module over
600 lines, no class over 400 lines or 30 methods, and no import circle among the packages' modules.

An import counts wherever it stands (a function-level import is part of a circle all the same), except
under ``if TYPE_CHECKING:``. ``from pkg import name`` leads to ``pkg.name`` when that is a module, else to
``pkg`` (its ``__init__``); importing ``a.b.c`` leads to ``a.b.c`` only, not to ``a`` and ``a.b``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pytest_kernelbench", "kbagent")
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400
MAX_METHODS = 30
# Files that still break a rule while they are being split (paths from the repository root). Their size and class
# findings are not failures, nor is an import circle through one of them. Empty it once they are split.
PENDING: set[str] = set()  # files allowed to break the rules for now: none


# --- the checker ----------------------------------------------------------------------------------------------


def find_modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the packages (a package's name for its ``__init__``)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, but none in the body of ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def _known_prefix(name: str, known: dict[str, Path]) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules among ``known`` that module ``name`` (file ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(t for t in (_known_prefix(alias.name, known) for alias in node.names) if t)
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join([*base, node.module] if node.module else base)
        else:
            module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            target = full if full in known else _known_prefix(module, known)
            if target:
                targets.add(target)
    targets.discard(name)
    return targets


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    known = find_modules(root, packages)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted; a module in one imports itself through the rest."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def long_modules(root: Path, packages: tuple[str, ...] = PACKAGES, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Path (from ``root``) -> line count, for every module over ``limit`` lines."""
    counts = {path.relative_to(root).as_posix(): len(path.read_text().splitlines()) for path in find_modules(root, packages).values()}
    return {path: lines for path, lines in counts.items() if lines > limit}


def big_classes(
    root: Path, packages: tuple[str, ...] = PACKAGES, max_lines: int = MAX_CLASS_LINES, max_methods: int = MAX_METHODS
) -> dict[str, str]:
    """``path::Class`` -> what it breaks, for every class (nested ones too) over ``max_lines`` lines or ``max_methods`` methods."""
    found = {}
    for path in find_modules(root, packages).values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            methods = sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) for item in node.body)
            if lines > max_lines or methods > max_methods:
                found[f"{path.relative_to(root).as_posix()}::{node.name}"] = f"{lines} lines, {methods} methods"
    return found


def _pending(path: str) -> bool:
    return path.partition("::")[0] in PENDING


def _module_path(name: str, known: dict[str, Path]) -> str:
    return known[name].relative_to(ROOT).as_posix()


# --- the rules over this repository ---------------------------------------------------------------------------


def test_no_module_is_over_600_lines():
    over = {path: lines for path, lines in long_modules(ROOT).items() if not _pending(path)}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them along their concerns): {over}"


def test_no_class_is_over_400_lines_or_30_methods():
    over = {name: what for name, what in big_classes(ROOT).items() if not _pending(name)}
    assert not over, f"classes over {MAX_CLASS_LINES} lines or {MAX_METHODS} methods: {over}"


def test_no_import_circle():
    known = find_modules(ROOT)
    circles = [group for group in import_circles(import_graph(ROOT)) if not any(_module_path(m, known) in PENDING for m in group)]
    assert not circles, f"import circles (function-level imports count): {circles}"


def test_every_pending_file_still_breaks_a_rule():
    """A file split at last leaves PENDING, so that the rules hold for it from then on."""
    known = find_modules(ROOT)
    breaking = set(long_modules(ROOT)) | {name.partition("::")[0] for name in big_classes(ROOT)}
    breaking |= {_module_path(m, known) for group in import_circles(import_graph(ROOT)) for m in group}
    stale = sorted(PENDING - breaking)
    assert not stale, f"PENDING names files that break no rule now (or are gone): remove {stale} from tests/test_house.py"


# --- the checker on packages made up for it -------------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_circle_through_a_function_level_import_but_not_through_type_checking(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import thing\n",
            "pkg/b.py": "def thing():\n    from . import c\n    return c\n",
            "pkg/c.py": "from pkg import VERSION\nfrom . import a\n",
            "pkg/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\nelse:\n    import os\n",
            "pkg/e.py": "import pkg.d as d\n",
            "pkg/sub/__init__.py": "from .f import x\n",
            "pkg/sub/f.py": "from ..sub import g\nx = 1\n",
            "pkg/sub/g.py": "from pkg.sub import x\n",
        },
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.b"] == {"pkg.c"}
    assert graph["pkg.c"] == {"pkg", "pkg.a"}
    assert graph["pkg.d"] == set()
    assert graph["pkg.sub.f"] == {"pkg.sub.g"}
    assert import_circles(graph) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.sub", "pkg.sub.f", "pkg.sub.g"]]


def test_the_checker_counts_module_lines_class_lines_and_methods(tmp_path):
    methods = "".join(f"    def m{i}(self):\n        pass\n" for i in range(31))
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "x = 1\n" * 601,
            "pkg/ok.py": "x = 1\n" * 597 + "class Small:\n    async def m(self):\n        pass\n",
            "pkg/many.py": f"class Many:\n{methods}",
            "pkg/long.py": "class Outer:\n    class Inner:\n" + "        x = 1\n" * 400,
        },
    )
    assert long_modules(tmp_path, ("pkg",)) == {"pkg/__init__.py": 601}
    assert big_classes(tmp_path, ("pkg",)) == {
        "pkg/many.py::Many": "63 lines, 31 methods",
        "pkg/long.py::Outer": "402 lines, 0 methods",
        "pkg/long.py::Inner": "401 lines, 0 methods",
    }
