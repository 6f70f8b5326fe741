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

First, by default (``KB_LIGHT_HEADERS=aten``), a ``.cu`` that includes ``torch/extension.h`` is tried as a lighter
copy still: every ``torch/extension.h`` and ``torch/types.h`` include, ``load_inline``'s own too, made ``aten_prelude.h``
beside this file (the ATen headers kernels' host code uses, and torch's dtype names); then the ``torch/types.h`` copy,
then the original. ``KB_LIGHT_HEADERS=1`` skips the prelude copy (docs/performance.md, "The build", gives what each
saved, and the GPU runs that judged the PIKE corpus both ways).

This file is the wrapper's program: ``python light.py [--aten] REAL_NVCC ARGS...`` (standard library only).
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
ATEN_PRELUDE = Path(__file__).resolve().with_name("aten_prelude.h")
TORCH_HEADERS = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(?:extension|types)\.h[>"]', re.MULTILINE)


def light_source(text: str) -> str | None:
    """``text`` with each ``torch/extension.h`` include made ``torch/types.h``; or, in a ``.cu`` that has none,
    without the ``torch/types.h`` that ``load_inline`` put in front of it (a comment line instead: the line numbers
    stay), for one that includes the light headers its kernels use. None where neither applies."""
    if HEAVY.search(text):
        return HEAVY.sub(LIGHT, text)
    if text.startswith(IMPLICIT):
        return IMPLICIT_LIGHT + text[len(IMPLICIT) :]
    return None


def aten_source(text: str) -> str | None:
    """``text`` with each ``torch/extension.h`` and ``torch/types.h`` include made :data:`ATEN_PRELUDE` (the line
    count kept); None where it has neither, or names ``requires_grad`` (torch's factories honour it, ATen's refuse it)."""
    if "requires_grad" in text or not TORCH_HEADERS.search(text):
        return None
    return TORCH_HEADERS.sub(f'#include "{ATEN_PRELUDE}"  // kb: was a torch/ header (pytest_kernelbench/build/light.py)', text)


def tiers(text: str, aten: bool) -> list[tuple[str, str]]:
    """The copies of a ``.cu`` to compile in turn before the original: with ``torch/extension.h``, the ATen prelude's
    (with ``aten``) then ``torch/types.h``'s; with light headers of its own, its copy without ``load_inline``'s
    ``torch/types.h`` and then (with ``aten``) the prelude's, for a ``.cu`` that leant on that ``torch/types.h``."""
    light, prelude = light_source(text), aten_source(text) if aten else None
    ordered = [("aten", prelude), ("light", light)] if HEAVY.search(text) else [("light", light), ("aten", prelude)]
    return [(how, copied) for how, copied in ordered if copied is not None]


def wrap(real: str, args: list[str], aten: bool = False) -> int:
    """Run nvcc with ``args``: a ``.cu`` compile is tried first with its lighter copies (:func:`tiers`), in turn.
    (``KB_LIGHT_HEADERS=0`` is read by the judge, which then does not set this wrapper at all.)"""
    source = _cu_source(args)
    copies: list[tuple[str, str]] = []
    if source is not None:
        try:
            if source.stat().st_size <= MAX_SOURCE:
                copies = tiers(source.read_text(errors="replace"), aten)
        except OSError:
            copies = []
    if not copies:
        return subprocess.call([real, *args])
    copy = source.with_name(source.stem + ".kb-light" + source.suffix)
    started = time.monotonic()
    for how, copied in copies:
        tried = _compile_copy(real, args, source, copy, copied)
        if tried is not None and tried.returncode == 0:
            sys.stdout.buffer.write(tried.stdout)
            sys.stderr.buffer.write(tried.stderr)
            _note(source, how, time.monotonic() - started)
            return 0
    _note(source, "fallback", time.monotonic() - started)
    return subprocess.call([real, *args])


def _compile_copy(real: str, args: list[str], source: Path, copy: Path, text: str) -> subprocess.CompletedProcess | None:
    """nvcc's compile of ``text`` written to ``copy`` in place of ``source``; None where the copy cannot be written."""
    try:
        copy.write_text(text)
        # dated as the source: ninja dates an object by its command's start and marks it stale when a dependency (this
        # copy, named in its depfile) is newer, so a copy dated now had every cached build compiled again in the runner
        stat = source.stat()
        os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        return subprocess.run([real, *[str(copy) if a == str(source) else a for a in args]], capture_output=True)
    except OSError:
        return None


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


def nvcc_command(real_nvcc: str, aten: bool = False) -> str:
    """``PYTORCH_NVCC``'s value: this wrapper around ``real_nvcc`` (trying the ATen prelude first with ``aten``), as the
    shell words torch's ninja file runs."""
    words = (sys.executable, os.path.abspath(__file__), *(("--aten",) if aten else ()), real_nvcc)
    return " ".join(shlex.quote(word) for word in words)


if __name__ == "__main__":
    first = sys.argv[1] == "--aten"
    sys.exit(wrap(sys.argv[2 if first else 1], sys.argv[3 if first else 2 :], aten=first))
