"""Detect candidate code that patches the clocks, torch, or the harness itself.

A snapshot holds every callable in the namespaces a measurement
or a reference computation depends on; after each candidate stage the snapshot is
compared again. Attributes a candidate *adds* are fine; ones it *replaces* or
*deletes* are reported by name, and the judge rejects the candidate.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch


def _namespaces() -> dict[str, Any]:
    spaces: dict[str, Any] = {
        "time": time,
        "torch": torch,
        "torch.nn.functional": torch.nn.functional,
        "torch.Tensor": torch.Tensor,
        "torch._C.TensorBase": torch._C.TensorBase,
        "torch.nn.Module": torch.nn.Module,
        "torch._C._nn": torch._C._nn,
    }
    if torch.cuda.is_available():
        spaces["torch.cuda"] = torch.cuda
        spaces["torch.cuda.Event"] = torch.cuda.Event
        spaces["torch._C._CudaEventBase"] = torch._C._CudaEventBase
    for name, module in list(sys.modules.items()):
        if name.startswith("pytest_kernelbench") and module is not None:
            spaces[name] = module
            for attr, value in list(vars(module).items()):  # the harness's own classes, e.g. timing.Clocks
                if isinstance(value, type) and value.__module__ == name:
                    spaces[f"{name}.{attr}"] = value
    return spaces


def snapshot() -> dict[str, Any]:
    ids: dict[str, Any] = {}
    for space_name, space in _namespaces().items():
        for attr, value in list(vars(space).items()):
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                ids[f"{space_name}.{attr}"] = value
    return ids


def changed_since(before: dict[str, Any]) -> list[str]:
    """Names whose value was replaced or deleted since ``before`` was taken."""
    spaces = _namespaces()
    changed = []
    for key, original in before.items():
        space_name, _, attr = key.rpartition(".")
        space = spaces.get(space_name)
        if space is None:
            changed.append(key)
            continue
        value = vars(space).get(attr, _MISSING)
        if value is not original and not _wrapped_by_dynamo(value, original):
            changed.append(key)
    return changed


def _wrapped_by_dynamo(value: Any, original: Any) -> bool:
    """Importing torch._dynamo (a candidate that uses torch.compile) wraps ``torch.manual_seed``
    in ``torch._disable_dynamo``'s wrapper (code from torch/_compile.py): that is torch, not the candidate."""
    wrapper_module = sys.modules.get("torch._compile")
    code = getattr(value, "__code__", None)
    return (
        "torch._dynamo" in sys.modules
        and wrapper_module is not None
        and getattr(value, "__wrapped__", None) is original
        and code is not None
        and code.co_filename == wrapper_module.__file__
    )


_MISSING = object()
