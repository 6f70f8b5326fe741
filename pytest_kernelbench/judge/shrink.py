"""``--device cpu-check``: a problem's sizes scaled down where its source allows.

A check on the CPU (a Triton kernel in Triton's interpreter runs one Python step per program)
needs small inputs. Sizes written as module-level integer constants (KernelBench's
``batch_size = 16``, ``height = width = 128``, ``input_shape = (32768,)``) are halved together,
those above :data:`MIN_SCALED` only and none below it (kernel sizes, strides, reduction dims and
head counts stay as they are), until one input set, the model's parameters and its output fit in
:data:`BUDGET_BYTES` (measured on the meta device: no data). The sizes chosen must then run: the
reference built and called once on the CPU (on the meta device when still big); when they do
not, fewer halvings are tried, and a problem that no try passes keeps its sizes. Runs in the
supervisor: problems are trusted code.
"""

from __future__ import annotations

import ast
import contextlib
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

import torch

BUDGET_BYTES = 8 << 20  # one input set, the parameters and buffers, and the output
RUN_LIMIT_BYTES = 256 << 20  # sizes checked by a real CPU call up to this footprint, on the meta device beyond
MIN_SCALED = 16
MAX_HALVINGS = 12
TIME_LIMIT_S = 30.0

Sizes = dict[str, tuple[int, ast.expr]]  # label -> (value, its node in the source)


def scaled(source: str) -> tuple[str, dict[str, list[int]]]:
    """(the source with its size constants scaled down, {label: [old, new]}); the source unchanged and {} when it is
    small enough already, has no such constants, or no smaller sizes run."""
    sizes = size_constants(source)
    full = footprint(source)
    if not sizes or full is None or full <= BUDGET_BYTES:
        return source, {}
    tries: list[dict[str, int]] = []  # fewer halvings first
    for halvings in range(1, MAX_HALVINGS + 1):
        new = {label: max(MIN_SCALED, value >> halvings) for label, (value, _) in sizes.items()}
        size = footprint(rewrite(source, sizes, new))
        if size is not None and size < full:
            tries.append(new)
            if size <= BUDGET_BYTES:
                break
        if all(value == MIN_SCALED for value in new.values()):
            break
    deadline = time.monotonic() + TIME_LIMIT_S
    for new in reversed(tries):  # the smallest first; fewer halvings when those sizes do not run
        text = rewrite(source, sizes, new)
        if runs(text):
            return text, {label: [sizes[label][0], value] for label, value in new.items() if value != sizes[label][0]}
        if time.monotonic() > deadline:
            break
    return source, {}


def describe(changes: dict[str, list[int]]) -> str:
    return ", ".join(f"{label} {old}->{new}" for label, (old, new) in changes.items())


def size_constants(source: str) -> Sizes:
    """The integers above MIN_SCALED that module-level assignments give (``a = 64``, ``a = b = 64``, ``a, b = 64, 32``,
    ``shape = (64, 3)``, ``m = 128 * 4``), by label (``a``, ``a=b``, ``shape[0]``); bools are not sizes."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found: Sizes = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in node.targets):
            for label, expr in _labelled(node.targets, node.value):
                value = _integer(expr)
                if value is not None and value > MIN_SCALED and expr.lineno == expr.end_lineno:
                    found[label] = (value, expr)
    return found


def _labelled(targets: list[ast.expr], value: ast.expr) -> list[tuple[str, ast.expr]]:
    if all(isinstance(t, ast.Name) for t in targets) and not isinstance(value, (ast.Tuple, ast.List)):
        return [("=".join(t.id for t in targets), value)]  # type: ignore[attr-defined]
    if not isinstance(value, (ast.Tuple, ast.List)) or len(targets) != 1:
        return []
    target = targets[0]
    if isinstance(target, ast.Tuple):  # a, b = 64, 32
        names = [t.id if isinstance(t, ast.Name) else "" for t in target.elts]
        return [(n, v) for n, v in zip(names, value.elts, strict=False) if n] if len(names) == len(value.elts) else []
    return [(f"{target.id}[{i}]", v) for i, v in enumerate(value.elts)]  # type: ignore[attr-defined]


def _integer(expr: ast.expr) -> int | None:
    """The value of an integer literal or of arithmetic on integer literals only (``128 * 4``), else None."""
    if isinstance(expr, ast.Constant):
        return expr.value if type(expr.value) is int else None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow, ast.LShift)):
        left, right = _integer(expr.left), _integer(expr.right)
        if left is None or right is None or (isinstance(expr.op, (ast.Pow, ast.LShift)) and right > 64):
            return None
        ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__,
               ast.Pow: int.__pow__, ast.LShift: int.__lshift__}  # fmt: skip
        try:
            return ops[type(expr.op)](left, right)
        except ZeroDivisionError:
            return None
    return None


def rewrite(source: str, sizes: Sizes, new: dict[str, int]) -> str:
    lines = source.splitlines(keepends=True)
    edits = sorted(((node.lineno, node.col_offset, node.end_col_offset, new[label]) for label, (_, node) in sizes.items()), reverse=True)
    for lineno, start, end, value in edits:  # from the end of the source: earlier offsets stay valid
        line = lines[lineno - 1]
        lines[lineno - 1] = line[:start] + str(value) + line[end:]
    return "".join(lines)


def footprint(source: str) -> int | None:
    """Bytes of one input set, the model's parameters and buffers, and its output, built and called on the meta device
    (nothing allocated, nothing computed; the output left out when its ops have no meta kernel); None when the model or
    its inputs do not build."""
    try:
        with _module(source) as module, torch.device("meta"):
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
            size = sum(_bytes(t) for t in [*_tensors(inputs), *model.parameters(), *model.buffers()])
            with contextlib.suppress(Exception), torch.no_grad():  # an op with no meta kernel: inputs and weights only
                size += sum(_bytes(t) for t in _tensors(model(*inputs)))
            return size
    except Exception:  # noqa: BLE001 - these sizes do not build, or cannot be measured
        return None


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def runs(source: str) -> bool:
    """Whether the reference builds and answers at these sizes: one call on the CPU, or on the meta device (shapes
    only) when the footprint is big."""
    device = "cpu" if (footprint(source) or RUN_LIMIT_BYTES + 1) <= RUN_LIMIT_BYTES else "meta"
    try:
        with _module(source) as module, torch.device(device), torch.no_grad():
            torch.manual_seed(0)
            module.Model(*module.get_init_inputs())(*module.get_inputs())
        return True
    except Exception:  # noqa: BLE001 - a shape the sizes do not fit, an op with no meta kernel, ...
        return False


@contextlib.contextmanager
def _module(source: str) -> Iterator[Any]:
    """The problem's source as a fresh module, registered while in use (dataclasses and pickling look it up)."""
    name = f"kb_problem_scaled_{id(source)}"
    module = sys.modules[name] = types.ModuleType(name)
    try:
        exec(compile(source, "problem.py", "exec"), module.__dict__)  # noqa: S102 - the problem: trusted code
        yield module
    finally:
        sys.modules.pop(name, None)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []
