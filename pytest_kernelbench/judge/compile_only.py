"""``--device cpu-check``'s build step: ``load_inline`` compiles a candidate's sources, links nothing.

Installed in the candidate's sandboxed build runner before its module is imported
(:class:`~pytest_kernelbench.judge.protocol.Load` with ``compile_only``). torch's own code still
writes the sources and the ``build.ninja`` (the same nvcc and c++ commands, include paths and
flags a GPU build runs, the architecture from ``TORCH_CUDA_ARCH_LIST``, which the supervisor sets);
only the last step changes: ninja builds the object files (CUDA ones first, so that the usual
failure is reported without waiting for the binding file) instead of the library, and the call
returns a stand-in module whose functions refuse to run. A CPU build of torch has no CUDA
libraries to link against and no GPU to load onto, but nvcc needs neither to compile. The headers such
a machine lacks and a GPU machine has (torch's generated CUDA ones, the CUDA libraries') are searched
where :mod:`.cuda_headers` finds them.

Imports torch and the standard library only: this runs where candidate code runs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import types
from pathlib import Path
from typing import Any

_OBJECT = re.compile(r"^build (\S+\.o): (\w*compile) ", re.MULTILINE)


class CompiledOnly(Exception):
    """Every object file of an extension compiled; nothing linked or loaded."""


class NotLoaded(types.ModuleType):
    """What ``load_inline`` returns under ``--device cpu-check``: its functions exist but never run."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)

        def not_run(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"{self.__name__}.{attr}: compiled only (--device cpu-check has no GPU to run it on)")

        return not_run


def cuda_home() -> str:
    """The CUDA toolkit to compile with: ``CUDA_HOME``, else /usr/local/cuda, else the one nvcc on PATH belongs to;
    the first with both nvcc and the runtime's headers ("" if none)."""
    nvcc = shutil.which("nvcc")
    beside = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else ""
    for home in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", beside):
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")) and os.path.isfile(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    return ""


def compile_only() -> None:
    """Make ``load_inline`` and ``load`` compile without linking or loading, in this process (idempotent)."""
    from torch.utils import cpp_extension as ext

    if getattr(ext, "_kb_compile_only", False):
        return
    ext._kb_compile_only = True
    from .cuda_headers import header_env  # the standard library only

    os.environ.update(header_env())  # read by the compilers ninja runs
    if not ext.CUDA_HOME:  # a CPU build of torch looks for no toolkit
        ext.CUDA_HOME = cuda_home() or None
    ext._run_ninja_build = compile_objects
    for name in ("load", "load_inline"):
        setattr(ext, name, _stand_in(getattr(ext, name)))


def _stand_in(load: Any) -> Any:
    @functools.wraps(load)
    def compiled_only(name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return load(name, *args, **kwargs)
        except CompiledOnly:
            return NotLoaded(name)

    return compiled_only


def compile_objects(build_directory: str, verbose: bool, error_prefix: str) -> None:
    """In place of torch's ``_run_ninja_build``: ninja builds the object files only, CUDA ones first; raises
    RuntimeError with the compiler's output when one fails, else :class:`CompiledOnly`."""
    targets = _OBJECT.findall(Path(build_directory, "build.ninja").read_text())
    cuda = [obj for obj, rule in targets if rule == "cuda_compile"]
    rest = [obj for obj, rule in targets if rule != "cuda_compile"]
    jobs = ["-j", os.environ["MAX_JOBS"]] if os.environ.get("MAX_JOBS", "").isdigit() else []
    for group in (cuda, rest):
        if not group:
            continue
        done = subprocess.run(["ninja", "-v", *jobs, *group], cwd=build_directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, text=True, errors="replace")  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{error_prefix} (compile only, --device cpu-check): {done.stdout}")
    raise CompiledOnly(", ".join(cuda + rest))
