"""``--device cpu-check``'s headers: what a GPU machine's compile finds and a CPU-only machine's may not.

The standard library only: :func:`header_env` runs in the candidate's build step (:mod:`.compile_only`), :func:`missing_header`
in the controller, which trusts a build's message only as far as this machine's folders confirm it.

A GPU machine compiles a candidate against a CUDA build of torch and a whole CUDA toolkit. A CPU-only machine has a
CPU wheel of torch, whose ``c10/cuda`` and ``ATen/cuda`` headers are there but not the two its CMake build generates
(``c10/cuda/impl/cuda_cmake_macros.h``, which ``c10/cuda/CUDAMacros.h`` includes, and ``ATen/cuda/CUDAConfig.h``), and
often a minimal toolkit: nvcc and the runtime, none of the math libraries' headers (``cusparse.h``, ``cublas_v2.h``,
``cublasLt.h``, ``cusolverDn.h``: ``ATen/cuda/CUDAContext.h`` includes all four; ``curand_kernel.h``). They come from:

- this package's ``cuda_include/`` folder: the two generated torch headers, with a Linux CUDA build's values (the only
  pip-installable source of the real ones is a CUDA wheel of torch, about 1 GB more);
- pip wheels of NVIDIA's libraries, the ``cpu-check`` extra (nvidia-cublas, nvidia-cusparse, nvidia-cusolver,
  nvidia-curand for CUDA 13.0: about 1.2 GB installed, almost all of it libraries this never loads), whose headers lie
  in ``site-packages/nvidia/cu13/include`` (CUDA 12's wheels: ``nvidia/<library>/include``).

Both reach the compilers as ``CPLUS_INCLUDE_PATH`` (gcc, and nvcc's preprocessing, which is gcc's), searched after every
``-isystem`` folder of the command line: never in place of a header torch or the toolkit has. A header that is still
missing is the machine's fault, not the candidate's (:func:`missing_header`).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

OWN_INCLUDE = Path(__file__).with_name("cuda_include")
INSTALL = "pip install 'pytest-kernelbench[cpu-check]'"
# the libraries whose headers a GPU machine's toolkit has, by header-name prefix: the wheel that carries them
LIBRARY_WHEELS = {"cublas": "nvidia-cublas", "cusparse": "nvidia-cusparse", "cusolver": "nvidia-cusolver", "curand": "nvidia-curand",
                  "cufft": "nvidia-cufft", "nvrtc": "nvidia-cuda-nvrtc", "nvJitLink": "nvidia-nvjitlink"}  # fmt: skip
IN_EXTRA = ("nvidia-cublas", "nvidia-cusparse", "nvidia-cusolver", "nvidia-curand")  # pyproject's cpu-check extra
# "<file>:<line>:<col>: fatal error: <header>: No such file or directory" (gcc, also under nvcc);
# '<file>(<line>): catastrophic error: cannot open source file "<header>"' (nvcc's EDG front end)
_MISSING = re.compile(r'^(?P<file>\S+?)(?::\d+:\d+:|\(\d+\):) (?:fatal|catastrophic) error: '
                      r'(?:(?P<gcc>[^\s:]+): No such file or directory|cannot open source file "(?P<edg>[^"]+)")',
                      re.MULTILINE)  # fmt: skip
_HEADER_NAME = re.compile(r"[\w.+-]+(?:/[\w.+-]+)*", re.ASCII)


def wheel_include_dirs() -> list[str]:
    """The include folders of NVIDIA's pip wheels in this environment: ``nvidia/cu13/include`` (CUDA 13's, one folder
    for every library) and ``nvidia/<library>/include`` (CUDA 12's)."""
    spec = importlib.util.find_spec("nvidia")
    found: list[str] = []
    for root in spec.submodule_search_locations if spec and spec.submodule_search_locations else []:
        for folder in sorted(Path(root).glob("*/include")):
            if folder.is_dir() and str(folder) not in found:
                found.append(str(folder))
    return found


def header_dirs() -> list[str]:
    """Where --device cpu-check's compiles look for a header torch's and the toolkit's include folders lack."""
    return [str(OWN_INCLUDE), *wheel_include_dirs()]


def header_env() -> dict[str, str]:
    """The build's environment for :func:`header_dirs`: ``CPLUS_INCLUDE_PATH`` (for the supervisor's ``check_env``: the
    sandboxed build step and the runners get it; the user's own, like any variable outside the runner's allowlist, not)."""
    return {"CPLUS_INCLUDE_PATH": os.pathsep.join(header_dirs())}


def _known_dirs(cuda_home: str, torch_include: str, env: dict[str, str]) -> list[Path]:
    extra = [d for d in env.get("CPLUS_INCLUDE_PATH", "").split(os.pathsep) if d]
    return [Path(d) for d in (os.path.join(cuda_home, "include") if cuda_home else "", torch_include, *extra) if d]


def _wheel_for(header: str) -> str:
    name = header.rsplit("/", 1)[-1]
    return next((wheel for prefix, wheel in LIBRARY_WHEELS.items() if name.startswith(prefix)), "")


def missing_header(message: str, cuda_home: str, torch_include: str, env: dict[str, str]) -> str:
    """Why a failed --device cpu-check build is the machine's fault ('' when it is the candidate's): its compiler's
    ``message`` says a header is missing that belongs to CUDA or torch (one of NVIDIA's libraries', or one that a
    header of torch or the toolkit includes), and it is indeed in none of the build's include folders (``cuda_home``'s,
    ``torch_include``, ``env``'s CPLUS_INCLUDE_PATH). The message comes from the candidate's build step, so it is only
    believed where this machine agrees; the answer names what to install."""
    home = os.path.realpath(cuda_home) if cuda_home else ""
    ours = [os.path.realpath(torch_include), *([home] if home else []), *(os.path.realpath(d) for d in wheel_include_dirs())]
    for found in _MISSING.finditer(message):
        header = found.group("gcc") or found.group("edg")
        if not _HEADER_NAME.fullmatch(header):  # no header of CUDA or torch is named so: the candidate's text
            continue
        try:  # the paths are the candidate's text: one the OS cannot take (a NUL byte) is not the machine's fault
            including = os.path.realpath(found.group("file"))
            here = any((d / header).is_file() for d in _known_dirs(cuda_home, torch_include, env))
        except (ValueError, OSError):
            continue
        from_ours = any(including.startswith(root + os.sep) for root in ours)
        wheel = _wheel_for(header)
        if not (from_ours or wheel) or here:
            continue
        fix = f"pip install {wheel}" if wheel and wheel not in IN_EXTRA else f"{INSTALL} (it has {wheel})" if wheel else (
            f"{INSTALL}, or a CUDA build of torch and a whole CUDA toolkit")  # fmt: skip
        where = f"{found.group('file')} includes it" if from_ours else "the candidate includes it"
        return (f"--device cpu-check: this machine lacks the header {header} ({where}), which a GPU machine's CUDA toolkit "
                f"or CUDA build of torch has: not the candidate's fault. Install it: {fix}")  # fmt: skip
    return ""


def torch_include_dir() -> str:
    """torch's include folder, found without importing torch ("" without torch)."""
    spec = importlib.util.find_spec("torch")
    roots = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(roots[0], "include") if roots else ""
