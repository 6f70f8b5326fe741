"""A shared precompiled ``torch/extension.h`` for the binding file of every ``load_inline`` build.

``load_inline`` writes a binding file (``main.cpp``) that starts with
``#include <torch/extension.h>`` and compiles it with the host C++ compiler. Parsing that header is
most of the file's compile time (here: 34 s of it on 2 cores, 13 s with a precompiled header), and
it is the same work for every candidate. GCC can load a precompiled header (``.gch``) instead of the
header it stands for, when the ``.gch`` lies in an include folder searched before the real one and
was built with the same code-generation options.

torch's own ``load_inline(use_pch=True)`` writes the ``.gch`` into torch's install folder, rebuilds it
whenever another build's flags differ, and every build without ``use_pch`` deletes it, so parallel
builds race on one file. Here the compiler is a wrapper (``CXX``, set for the compile stage only):

Inside a candidate's sandboxed build step the root is read-only (``KB_PCH_WANTED`` set): the
wrapper uses a ready ``.gch`` and asks for a missing one in a file the judge's trusted side reads
while the step runs (:class:`Requests`: flags checked against an allowlist, the ``.gch`` built at
once unless the root is full), waiting up to ``KB_PCH_WAIT`` seconds for it while the step's other
sources compile; so candidate code can never write the wrapper, a ``.gch`` or the log, and even the
first builds of a cold root use the header (on the H100, 24 of 64 cold builds had compiled the
whole header while the second sighting's ``.gch`` was awaited).

* a compile of a binding file (one source starting with ``#include <torch/extension.h>``) gets
  ``-I <root>/<key>`` in front, where ``<key>`` hashes the compiler, every flag that reaches the
  header (the module name ``-DTORCH_EXTENSION_NAME`` and the output/dependency paths excepted) and
  the header's identity; the first compile of a key only notes the key (a ``.gch`` costs ~1.6 plain
  compiles to build, a loss for flags used once), the second builds the ``.gch`` under a file lock,
  renames it into place and uses it, later ones use it; a compile that finds the ``.gch`` being
  built compiles without it, it does not wait;
* everything else (``.cu`` host passes never come here; version probes, links, other sources) runs
  the real compiler unchanged.

GCC checks a ``.gch`` itself and ignores one that does not fit (``-Winvalid-pch`` says why; such a
compile is logged as ``rejected``), so the worst case is the old compile time, never a different
object. The cache keeps the newest few keys (each ``.gch`` is ~0.8 GB). Every decision is appended
to ``<root>/events.jsonl``. Linux and GCC only; clang or another platform compiles as before.

This file is also the wrapper's program: ``python pch.py REAL_CXX ROOT ARGS...`` (standard library
and filelock only, so that each compile starts in tens of milliseconds).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a file: its folder must not shadow the standard library
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]

import functools  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

HEADER = "torch/extension.h"
BINDING_START = b"#include <torch/extension.h>"
KEEP = 4  # .gch files kept per root, newest use first
AWAIT_START = 3.0  # a build step waits this long for the judge to start building a header it asked for
BUILD_TIMEOUT_S = 180.0  # a header's compile (~40 s of one core for torch/extension.h): beyond this it is stuck
BUILD_MEMORY_BYTES = 4 << 30  # its address space (GCC 12, torch/extension.h at -O3: 2.1 GB resident at most)
_SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C")
# options whose value is the next argument
_TAKES_VALUE = frozenset(
    "-MF -MT -MQ -o -I -isystem -include -imacros -iquote -idirafter -x -D -U -Xpreprocessor "
    "-Xassembler -Xlinker -iprefix -iwithprefix -iwithprefixbefore -isysroot --param -aux-info".split()
)
_NOT_IN_KEY = ("-MMD", "-MD", "-MP", "-c", "-Winvalid-pch")
_INCLUDE_OPTIONS = ("-I", "-isystem", "-iquote", "-idirafter")


def binding_compile(args: list[str]) -> tuple[Path, list[str]] | None:
    """``(source, key_flags)`` when ``args`` compile one binding file and a PCH can serve it, else None.

    ``key_flags`` are the arguments that decide the header's compile, in their order: everything but
    the source, ``-c``, ``-o``, dependency-file options and the module's name.
    """
    if "-c" not in args:
        return None
    sources: list[str] = []
    flags: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if arg in _TAKES_VALUE and i + 1 < len(args) else None
        i += 2 if value is not None else 1
        if arg in ("-o", "-MF", "-MT", "-MQ") or arg.startswith(("-MF", "-MT", "-MQ", "-o")):
            continue
        if arg in ("-x", "-include", "-imacros") or arg.startswith(("-x", "-include", "-imacros")):
            return None  # a forced include or language would come before the header
        if arg in ("-D", "-U") and value is not None:
            arg, value = arg + value, None
        if arg.startswith("-DTORCH_EXTENSION_NAME="):
            continue
        if arg in _NOT_IN_KEY:
            continue
        if not arg.startswith("-"):
            sources.append(arg)
            continue
        if arg.startswith(_INCLUDE_OPTIONS) and not os.path.isabs(value if value is not None else _attached(arg)):
            return None  # a relative include folder means another header in another build folder
        flags.append(arg)
        if value is not None:
            flags.append(value)
    if len(sources) != 1 or not sources[0].endswith(_SOURCE_SUFFIXES):
        return None
    try:
        with open(sources[0], "rb") as fh:
            if not fh.read(len(BINDING_START) + 1).startswith(BINDING_START):
                return None
    except OSError:
        return None
    return Path(os.path.abspath(sources[0])), flags


def _attached(arg: str) -> str:
    for option in sorted(_INCLUDE_OPTIONS, key=len, reverse=True):
        if arg.startswith(option):
            return arg[len(option):]
    return arg


def find_header(flags: list[str]) -> Path | None:
    """The ``torch/extension.h`` the compile would include: the first include folder that has one."""
    folders: list[str] = []
    for i, arg in enumerate(flags):
        if arg in _INCLUDE_OPTIONS and i + 1 < len(flags):
            folders.append(flags[i + 1])
        elif arg.startswith(_INCLUDE_OPTIONS) and arg not in _INCLUDE_OPTIONS:
            folders.append(_attached(arg))
    for folder in folders:
        candidate = Path(folder) / HEADER
        if candidate.is_file():
            return candidate
    return None


def pch_key(compiler: str, flags: list[str], header: Path) -> str:
    """Hash of what decides the ``.gch``: the compiler binary, the flags, the header and torch's version file."""
    parts = [compiler]
    real = shutil.which(compiler)
    for path in (Path(os.path.realpath(real)) if real else None, header, header.parent.parent.parent / "version.py"):
        if path is not None and path.exists():
            found = path.stat()
            parts.append(f"{path}:{found.st_size}:{found.st_mtime_ns}")
    parts += flags
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def _log(root: Path, **event: object) -> None:
    """Append an event to ``root/events.jsonl``; inside a build step, to the step's own file (the root is read-only)."""
    line = json.dumps({"time": round(time.time(), 3), **event}) + "\n"
    target = os.environ.get("KB_PCH_WANTED") or str(root / "events.jsonl")
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def _evict(root: Path, keep_key: str) -> None:
    """Keep the ``KEEP`` most recently used ``.gch`` folders (a compile touches the one it uses)."""
    gchs = sorted(root.glob(f"*/{HEADER}.gch"), key=lambda p: p.stat().st_mtime, reverse=True)
    for gch in gchs[KEEP:]:
        folder = gch.parent.parent
        if folder.name != keep_key:
            shutil.rmtree(folder, ignore_errors=True)  # a compile reading it keeps its open file


def ensure_pch(root: Path, compiler: str, flags: list[str], source: Path) -> Path | None:
    """The include folder holding a ready ``.gch`` for these flags, building it if nobody else is; else None.

    Inside a candidate's build step (``KB_PCH_WANTED`` names a file there) the root is read-only:
    a ready ``.gch`` is used, a missing one is asked for in that file and waited for while the judge's
    trusted side builds it (:class:`Requests`, :func:`_await`).
    """
    header = find_header(flags)
    if header is None:
        return None
    key = pch_key(compiler, flags, header)
    folder = root / key
    gch = folder / f"{HEADER}.gch"
    if gch.is_file():
        try:
            os.utime(gch)
        except OSError:  # a read-only root: the eviction order is the trusted side's business
            pass
        return folder
    if os.environ.get("KB_PCH_WANTED"):
        _log(root, event="wanted", compiler=compiler, flags=flags, header=str(header), source=str(source))
        return folder if _await(root, key, float(os.environ.get("KB_PCH_WAIT") or 0)) else None
    seen = root / f"{key}.seen"
    if not seen.exists():  # building it costs ~1.6 plain compiles: only for flags seen before
        root.mkdir(parents=True, exist_ok=True)
        seen.touch()
        _log(root, event="first", key=key, source=str(source))
        return None
    return folder if build_pch(root, key, compiler, flags, header, str(source)) else None


def _await(root: Path, key: str, limit: float) -> bool:
    """Inside a build step: whether ``key``'s ``.gch`` is ready within ``limit`` seconds. The judge's side reads
    the step's requests while it runs (:class:`Requests`) and marks a header it builds (``<key>.building``):
    wait while the mark is there, give up if none comes within :data:`AWAIT_START` seconds."""
    gch, mark = root / key / f"{HEADER}.gch", root / f"{key}.building"
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if gch.is_file():
            return True
        try:
            stale = time.time() - mark.stat().st_mtime > limit
        except OSError:
            stale = time.monotonic() - start > AWAIT_START
        if stale:
            return gch.is_file()
        time.sleep(0.1)
    return gch.is_file()


def build_pch(root: Path, key: str, compiler: str, flags: list[str], header: Path, source: str) -> bool:
    """Build ``root/key``'s ``.gch`` unless someone else is (never waited for); whether it is ready."""
    from filelock import FileLock, Timeout

    gch = root / key / f"{HEADER}.gch"
    lock = FileLock(str(root / f"{key}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        _log(root, event="busy", key=key, source=source)
        return False
    mark = root / f"{key}.building"  # build steps waiting for this header wait while it is there (_await)
    try:
        if gch.is_file():
            return True
        mark.write_text(str(os.getpid()))
        start = time.monotonic()
        gch.parent.mkdir(parents=True, exist_ok=True)
        for stale in (*gch.parent.glob("*.tmp"), *gch.parent.glob("*.link")):  # left by a killed build
            stale.unlink(missing_ok=True)
        tmp = gch.with_name(f"{gch.name}.{os.getpid()}.tmp")
        failed = _compile_header([compiler, *flags, "-x", "c++-header", str(header), "-o", str(tmp)])
        if failed:
            tmp.unlink(missing_ok=True)
            _log(root, event="failed", key=key, source=source, stderr=failed)
            return False
        # The header itself beside its .gch: GCC takes the folder where it found the .gch for the
        # header's home, so a binding file that includes torch/extension.h a second time looks there.
        link = gch.with_name(f"{gch.name[:-4]}.{os.getpid()}.link")
        link.unlink(missing_ok=True)
        link.symlink_to(header)
        os.replace(link, gch.with_name(gch.name[:-4]))
        os.replace(tmp, gch)
        _log(root, event="built", key=key, source=source, seconds=round(time.monotonic() - start, 2),
             bytes=gch.stat().st_size, flags=flags)  # fmt: skip
        _evict(root, key)
        return True
    finally:
        mark.unlink(missing_ok=True)
        lock.release()


# Sets the address-space limit, then becomes the compiler: a process of its own, so no preexec_fn in a threaded judge.
_LIMITED = ("import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, (n, n)); "
            "os.execvp(sys.argv[2], sys.argv[2:])")


def _compile_header(argv: list[str]) -> str:
    """Run a header's compile within :data:`BUILD_TIMEOUT_S` and :data:`BUILD_MEMORY_BYTES`; '' or why it failed.
    The compiler's whole process group is killed at the limit (the driver's ``cc1plus`` too)."""
    try:
        proc = subprocess.Popen([sys.executable, "-c", _LIMITED, str(BUILD_MEMORY_BYTES), *argv], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    except OSError as exc:
        return f"the compiler did not start: {exc}"
    try:
        _, err = proc.communicate(timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # killed: the steps waiting for it compile without it (the mark goes away)
        _kill_group(proc)
        return f"no header after {BUILD_TIMEOUT_S:g} s"
    finally:
        _kill_group(proc)  # anything the compiler left running in its group
    return "" if proc.returncode == 0 else err.decode(errors="replace")[-2000:]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass
    if proc.poll() is None:
        proc.communicate()


# ---- the judge's trusted side: headers asked for by sandboxed build steps ----

MAX_FLAGS = 48  # flags a requested header may be built with
MAX_FIELD = 4096  # characters of one field of a request
_FIXED = frozenset({"-DTORCH_API_INCLUDE_EXTENSION_H", "-fPIC", "-fopenmp", "-w"})  # torch's own, and OpenMP
_LEVELS = re.compile(r"-O[0-3s]?|-std=(c|gnu)\+\+(14|17|1z|20|2a|23|2b)")


def safe_flags(flags: list[str], includes: list[Path]) -> str:
    """'' when the header may be built with ``flags`` (a request from a candidate's sandbox), else why not.

    Only what torch's own ``load_inline`` passes a binding compile: its macros (:func:`torch_flags`, and
    ``-DTORCH_API_INCLUDE_EXTENSION_H``), ``-fPIC``, a ``-std=`` and an ``-O`` level, ``-fopenmp``, ``-w``, and include
    folders among ``includes`` (torch's, the CUDA toolkit's, Python's), each once. No other ``-D``, ``-U`` or ``-f``:
    macros and options of a candidate's choosing made one header's compile run for minutes and out of memory.
    """
    if len(flags) > MAX_FLAGS:
        return f"{len(flags)} flags, at most {MAX_FLAGS}"
    allowed, seen, i = _FIXED | torch_flags(), set(), 0
    while i < len(flags):
        flag, folder = flags[i], None
        if flag in ("-I", "-isystem"):
            if i + 1 >= len(flags):
                return f"{flag} without a folder"
            folder, i = flags[i + 1], i + 1
        elif flag.startswith("-I"):
            folder = flag[2:]
        elif flag not in allowed and not _LEVELS.fullmatch(flag):
            return f"flag {flag[:80]!r} is not one a precompiled header is built with"
        if folder is not None and (not os.path.isabs(folder) or Path(os.path.realpath(folder)) not in includes):
            return f"include folder {folder[:200]} is not one of torch's, CUDA's or Python's"
        if (flag, folder) in seen:
            return f"flag {flag[:80]!r} is repeated"
        seen.add((flag, folder))
        i += 1
    return ""


@functools.lru_cache(maxsize=1)
def torch_flags() -> frozenset[str]:
    """The ABI macros this install's ``torch.utils.cpp_extension`` adds to a build (none in recent versions)."""
    found: set[str] = set()
    try:
        from torch.utils import cpp_extension

        with warnings.catch_warnings():  # deprecated in torch 2.9
            warnings.simplefilter("ignore")
            for name in ("_get_glibcxx_abi_build_flags", "_get_pybind11_abi_build_flags"):
                if hasattr(cpp_extension, name):
                    found.update(str(flag) for flag in getattr(cpp_extension, name)())
    except Exception:  # noqa: BLE001 - no torch, or another version's API: torch's macros are then not allowed
        pass
    return frozenset(found)


class Requests:
    """A sandboxed build step's PCH file (untrusted), read by the judge while the step runs and once after it.

    A ``wanted`` header is served at once (:func:`_serve_wanted`), in a thread, while the step's binding compile
    waits for it (:func:`_await`) and its other sources compile: so even the first builds of a cold root use
    it. ``used`` and ``rejected`` go to the root's log at :meth:`close`. One header is built per step at most,
    from the first 64 lines, whatever the step writes.
    """

    def __init__(self, root: Path, path: Path, real_compiler: str | None = None):
        self.root, self.path, self.real_compiler = root, path, real_compiler
        self.counts: dict[str, int] = {}
        self._read, self._lines, self._built = 0, 0, False
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """Serve requests written since the last look (cheap when there are none; never waits)."""
        if self._thread is not None and self._thread.is_alive():
            return
        entries = self._new_entries()
        if entries:
            self._thread = threading.Thread(target=self._serve, args=(entries,), name="kb-pch", daemon=True)
            self._thread.start()

    def building(self) -> bool:
        """Whether a header the step asked for is being built now (the step's binding compile may be waiting for it)."""
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> dict[str, int]:
        """After the step: serve what is left, log what it used; the counts of what happened."""
        if self._thread is not None:
            self._thread.join()
        self._serve(self._new_entries())
        try:
            self.path.unlink()  # read once: a later build in this folder writes its own
        except OSError:
            pass
        return self.counts

    def _new_entries(self) -> list[dict]:
        try:  # the step's folder is the candidate's: not a link, a FIFO that would block, nor a folder
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            return []
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return []
            chunk = os.pread(fd, 1 << 20, self._read)
        finally:
            os.close(fd)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._read += len(complete)
        entries = []
        for line in complete.decode(errors="replace").splitlines():
            self._lines += 1
            if self._lines > 64:
                break
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError, MemoryError):  # the step's data: a deep line is a bad line, no more
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        return entries

    def _serve(self, entries: list[dict]) -> None:
        for entry in entries:
            event = _field(entry, "event")
            if event in ("used", "rejected") and len(self.counts) < 16:
                seconds = entry.get("seconds")
                _log(self.root, event=event, key=_field(entry, "key")[:40], source=_field(entry, "source")[:300],
                     seconds=seconds if type(seconds) is float and 0 <= seconds < 1e6 else None)  # fmt: skip
                outcome = event
            elif event == "wanted" and not self._built:
                outcome = _serve_wanted(self.root, entry, self.real_compiler)
                self._built = outcome == "built"
            else:
                continue
            self.counts[outcome] = self.counts.get(outcome, 0) + 1


def trusted_includes() -> list[Path]:
    """The include folders a requested header may come from: those torch's builds pass (its own, the CUDA toolkit's
    where one is found, by torch or as ``--device cpu-check`` finds it) and Python's."""
    import sysconfig

    folders = [sysconfig.get_path("include", scheme="posix_prefix") or ""]
    try:
        from torch.utils.cpp_extension import include_paths
    except Exception:  # noqa: BLE001 - no torch here
        include_paths = None
    for device in ((), ("cuda",)):  # torch's CPU folders, then with the toolkit's (older torch: a flag, truthy here)
        try:
            folders += include_paths(*device) if include_paths else []
        except Exception:  # noqa: BLE001 - no CUDA toolkit: its folders are not allowed
            pass
    from ..judge.compile_only import cuda_home  # the toolkit a build compiles with where torch finds none (a CPU wheel)

    home = cuda_home()
    folders += [os.path.join(home, "include")] if home else []
    return list(dict.fromkeys(Path(os.path.realpath(folder)) for folder in folders if folder))


def _field(entry: dict, name: str) -> str:
    """A text field of a request line (the step's data): '' unless it is text of at most :data:`MAX_FIELD` characters."""
    value = entry.get(name)
    return value if isinstance(value, str) and len(value) <= MAX_FIELD else ""


def _serve_wanted(root: Path, entry: dict, real_compiler: str | None) -> str:
    compiler, flags, source = _field(entry, "compiler"), entry.get("flags"), _field(entry, "source")[:300]
    if not compiler or not isinstance(flags, list) or len(flags) > MAX_FLAGS or not all(
        isinstance(f, str) and len(f) <= MAX_FIELD for f in flags
    ):
        return "refused"
    real = real_compiler or shutil.which(os.environ.get("CXX") or "c++") or ""
    if not real or os.path.realpath(compiler) != os.path.realpath(real):  # only the compiler the wrapper wraps
        return "refused"
    why = safe_flags(flags, trusted_includes())
    if why:
        _log(root, event="refused", why=why)
        return "refused"
    header = find_header(flags)
    if header is None:
        return "refused"
    key = pch_key(compiler, flags, header)
    if (root / key / f"{HEADER}.gch").is_file():
        return "ready"
    seen = root / f"{key}.seen"
    if not seen.exists() and len(list(root.glob(f"*/{HEADER}.gch"))) >= KEEP:  # a full root: only flags seen twice
        root.mkdir(parents=True, exist_ok=True)
        seen.touch()
        _log(root, event="first", key=key, source=source)
        _drop_stale_mark(root, key)  # nobody builds it now: a step must not wait on a mark a killed builder left
        return "first"
    root.mkdir(parents=True, exist_ok=True)
    seen.touch()
    return "built" if build_pch(root, key, compiler, flags, header, source) else "not built"


def _drop_stale_mark(root: Path, key: str) -> None:
    from filelock import FileLock, Timeout

    lock = FileLock(str(root / f"{key}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return  # a build is in flight: its mark is true
    try:
        (root / f"{key}.building").unlink(missing_ok=True)
    finally:
        lock.release()


def wrap(real: str, root: Path, args: list[str]) -> int:
    """Run one compiler call: a binding compile with the shared PCH, anything else as it is."""
    found = binding_compile(args)
    try:
        include = ensure_pch(root, real, found[1], found[0]) if found else None
    except OSError as exc:  # an unwritable or full cache folder costs the speed-up, never the build
        _log(root, event="failed", source=str(found[0]) if found else "", error=str(exc))
        include = None
    if include is None:
        return subprocess.run([real, *args]).returncode
    start = time.monotonic()
    done = subprocess.run([real, "-I", str(include), "-Winvalid-pch", *args], capture_output=True)
    sys.stdout.buffer.write(done.stdout)
    sys.stderr.buffer.write(done.stderr)
    why = [line for line in done.stderr.decode(errors="replace").splitlines() if "[-Winvalid-pch]" in line]
    _log(root, event="rejected" if why else "used", key=include.name, source=str(found[0]),  # type: ignore[index]
         seconds=round(time.monotonic() - start, 2), returncode=done.returncode, **({"why": why[0]} if why else {}))  # fmt: skip
    return done.returncode


# ---- the worker's side: point CXX at the wrapper ----


def _is_gcc(compiler: str) -> bool:
    try:
        out = subprocess.run([compiler, "-v"], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return False
    text = out.stdout + out.stderr
    return "gcc version" in text and "clang" not in text


def compiler_wrapper(root: str | os.PathLike[str]) -> str | None:
    """Path of an executable ``g++`` wrapper for the current ``CXX`` (default ``c++``) under ``root``.

    None where a PCH cannot help: not Linux, the compiler is not GCC, or ``root`` is not writable.
    The wrapper's path depends only on (python, real compiler, this file), so ninja files that name
    it stay the same from one run to the next and a cached build is not redone; once written, it is
    returned without probing the compiler again.
    """
    if not sys.platform.startswith("linux"):
        return None
    real = os.environ.get("CXX") or "c++"
    resolved = shutil.which(real)
    if resolved is None:
        return None
    if _is_wrapper(Path(resolved)):  # CXX already names one (a nested run): do not wrap it twice
        return resolved
    root = Path(root).resolve()
    tag = hashlib.sha256("\0".join((sys.executable, resolved, os.path.realpath(resolved), __file__)).encode()).hexdigest()[:12]
    wrapper = root / f"cc-{tag}" / "g++"  # torch accepts a compiler whose path says g++ without probing it
    if wrapper.is_file():  # written only after the GCC check below, for this very compiler binary
        return str(wrapper)
    if not _is_gcc(resolved):
        return None
    script = f"#!/bin/sh\nexec {_sh(sys.executable)} {_sh(__file__)} {_sh(resolved)} {_sh(str(root))} \"$@\"\n"
    try:
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        tmp = wrapper.with_name(f"g++.{os.getpid()}.tmp")
        tmp.write_text(script)
        tmp.chmod(0o755)
        os.replace(tmp, wrapper)
    except OSError:
        return None
    return str(wrapper)


def _is_wrapper(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(2) == b"#!" and Path(__file__).name.encode() in fh.read(4096)
    except OSError:
        return False


def _sh(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    sys.exit(wrap(sys.argv[1], Path(sys.argv[2]), sys.argv[3:]))
