"""Lighter headers for a candidate's ``.cu``: ``torch/extension.h`` compiled as ``torch/types.h`` where that builds.

Most agent-written CUDA candidates start their ``.cu`` with ``#include <torch/extension.h>`` (86 of the 90 files of
the PIKE corpus). That header is torch's C++ frontend (``torch/all.h``: modules, optimizers, data loaders,
serialization) and its Python bindings (pybind11), and nvcc parses it three times (cudafe++, cicc, the host compiler):
most of a candidate's build (docs/performance.md, "Where a CUDA candidate's build time goes"). A ``.cu`` needs its
tensor type and factories (``torch::Tensor``, ``torch::empty``, ``TORCH_CHECK``, ``at::Half``), which
``torch/types.h`` declares, and which ``load_inline`` puts in front of every ``.cu`` anyway.

This is nvcc's wrapper (``PYTORCH_NVCC``, which torch's build uses in place of nvcc; set by the judge for a build
step and the candidate's runner alike, so a cached build is not redone): for a compile of a ``.cu`` that includes
``torch/extension.h`` it first compiles a copy beside it whose such lines include ``torch/types.h``. Where that copy
does not compile (a ``.cu`` that uses pybind11 or the C++ frontend), the original is compiled as it is and only its
messages are shown: the worst case is the first attempt's time, never a different outcome. A ``.cu`` that includes
no ``torch/extension.h`` but the light ATen/c10 headers its kernels use (as the agent's prompt asks) is first compiled
without the ``torch/types.h`` that ``load_inline`` put in front of it, the same way. Every other nvcc call runs
unchanged. ``KB_LIGHT_HEADERS=0`` (read by the judge) turns it off. Each decision is a line of ``kb-light.jsonl`` beside the source.

This file is the wrapper's program: ``python light.py REAL_NVCC ARGS...`` (standard library only).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a file: its folder must not shadow the standard library
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]

import json  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HEAVY = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"]', re.MULTILINE)
LIGHT = "#include <torch/types.h>  // kb: was torch/extension.h (pytest_kernelbench/build/light.py)"
# what load_inline writes in front of every .cu (its first line costs nvcc a parse of torch's tensor API three times)
IMPLICIT = "#include <torch/types.h>\n"
IMPLICIT_LIGHT = "// kb: load_inline's #include <torch/types.h> left out (pytest_kernelbench/build/light.py)\n"
EVENTS = "kb-light.jsonl"
MAX_SOURCE = 4 << 20  # a larger .cu is compiled as it is


def light_source(text: str) -> str | None:
    """``text`` with each ``torch/extension.h`` include made ``torch/types.h``; or, in a ``.cu`` that has none,
    without the ``torch/types.h`` that ``load_inline`` put in front of it (a comment line instead: the line numbers
    stay), for one that includes the light headers its kernels use. None where neither applies."""
    if HEAVY.search(text):
        return HEAVY.sub(LIGHT, text)
    if text.startswith(IMPLICIT):
        return IMPLICIT_LIGHT + text[len(IMPLICIT) :]
    return None


def wrap(real: str, args: list[str]) -> int:
    """Run nvcc with ``args``: a ``.cu`` compile that :func:`light_source` can lighten first with the lighter copy.
    (``KB_LIGHT_HEADERS=0`` is read by the judge, which then does not set this wrapper at all.)"""
    source = _cu_source(args)
    light = None
    if source is not None:
        try:
            if source.stat().st_size <= MAX_SOURCE:
                light = light_source(source.read_text(errors="replace"))
        except OSError:
            light = None
    if light is None:
        return subprocess.call([real, *args])
    copy = source.with_name(source.stem + ".kb-light" + source.suffix)
    started = time.monotonic()
    try:
        copy.write_text(light)
        # dated as the source: ninja dates an object by its command's start and marks it stale when a dependency (this
        # copy, named in its depfile) is newer, so a copy dated now had every cached build compiled again in the runner
        stat = source.stat()
        os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        tried = subprocess.run([real, *[str(copy) if a == str(source) else a for a in args]], capture_output=True)
    except OSError:
        tried = None
    if tried is not None and tried.returncode == 0:
        sys.stdout.buffer.write(tried.stdout)
        sys.stderr.buffer.write(tried.stderr)
        _note(source, "light", time.monotonic() - started)
        return 0
    _note(source, "fallback", time.monotonic() - started)
    return subprocess.call([real, *args])


def _cu_source(args: list[str]) -> Path | None:
    """The ``.cu`` file a compile (``-c``) names, if there is exactly one."""
    if "-c" not in args and "--compile" not in args:
        return None
    sources = [a for a in args if a.endswith(".cu") and not a.startswith("-")]
    return Path(sources[0]) if len(sources) == 1 else None


def _note(source: Path, how: str, seconds: float) -> None:
    try:
        with (source.parent / EVENTS).open("a") as fh:
            fh.write(json.dumps({"source": source.name, "how": how, "s": round(seconds, 2)}) + "\n")
    except OSError:
        pass


def nvcc_command(real_nvcc: str) -> str:
    """``PYTORCH_NVCC``'s value: this wrapper around ``real_nvcc``, as the shell words torch's ninja file runs."""
    return " ".join(shlex.quote(word) for word in (sys.executable, os.path.abspath(__file__), real_nvcc))


if __name__ == "__main__":
    sys.exit(wrap(sys.argv[1], sys.argv[2:]))
