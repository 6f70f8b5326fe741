"""The wire between the supervisor and a runner: framed JSON, file descriptors, shared tensor memory.

* Messages are JSON objects behind a 4-byte length, over a Unix stream socket. Nothing a runner
  sends is ever unpickled. Decoding is bounded and total: a message over ``MAX_MESSAGE`` bytes, nested
  deeper than ``MAX_DEPTH``, with an integer of more than ``MAX_INT_DIGITS`` digits, a non-finite number
  (``NaN``, ``Infinity``, ``1e999``), or that is not a JSON object is a :class:`ProtocolError`, and
  nothing else escapes ``recv`` but :class:`ChannelClosed` and :class:`ChannelTimeout`.
* File descriptors travel with a message (SCM_RIGHTS), supervisor -> runner only: the supervisor
  reads with no room for descriptors, so any a runner sends are closed by the kernel.
* Tensor memory both sides map is allocated by the supervisor (:class:`SharedBuffer`): a memfd on
  CPU, sealed against shrinking (``open`` checks it: a runner holds a descriptor of it, and a mapping
  past a truncated end faults in whichever process reads it); on CUDA a VMM allocation
  (``cuMemCreate``) exported as a POSIX file descriptor, allocated while any process maps it. Legacy CUDA
  IPC (``cudaIpcGetMemHandle``, what ``torch.multiprocessing`` uses) refuses a process in another
  PID namespace, and the runner lives in its own; a VMM allocation travels as a file descriptor and
  maps in whichever process receives it. Each buffer is its own allocation: mapping one shows
  nothing else of the supervisor's memory.

Standard library only at import time (torch is imported when a buffer is made): the runner loads
this module before any candidate code exists.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import math
import mmap
import os
import re
import socket
import struct
import time
import weakref
from typing import Any

MAX_MESSAGE = 16 << 20
MAX_FDS = 64
MAX_DEPTH = 100  # JSON nesting of a message: an honest one (a request's argument trees) stays far below
MAX_INT_DIGITS = 1000  # digits of a JSON integer
_LENGTH = struct.Struct("!I")


class ChannelClosed(Exception):
    """The other side closed the socket (or died)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class Channel:
    """One end of a Unix stream socket carrying length-prefixed JSON objects."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        return cls(socket.socket(fileno=fd))

    def send(self, message: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
        body = json.dumps(message, allow_nan=False, separators=(",", ":")).encode()
        if len(body) > MAX_MESSAGE:
            raise ProtocolError(f"message of {len(body)} bytes is over the {MAX_MESSAGE}-byte limit")
        header = _LENGTH.pack(len(body))
        self.sock.settimeout(None)
        try:
            if fds:  # the descriptors ride on the header's bytes
                sent = socket.send_fds(self.sock, [header], list(fds))
                self.sock.sendall(header[sent:] + body)
            else:
                self.sock.sendall(header + body)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ChannelClosed(str(exc)) from None

    def recv(self, timeout: float | None = None, *, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
        """The next message and the descriptors that came with it; ``max_fds=0`` accepts none."""
        deadline = None if timeout is None else time.monotonic() + timeout
        header, fds = self._read(_LENGTH.size, deadline, max_fds)
        (size,) = _LENGTH.unpack(header)
        if size > MAX_MESSAGE:
            _close_all(fds)
            raise ProtocolError(f"message of {size} bytes announced, over the {MAX_MESSAGE}-byte limit")
        body, _ = self._read(size, deadline, 0)
        try:
            return decode(body), fds
        except ProtocolError:
            _close_all(fds)
            raise

    def _read(self, size: int, deadline: float | None, max_fds: int) -> tuple[bytes, list[int]]:
        chunks: list[bytes] = []
        fds: list[int] = []
        got = 0
        while got < size:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    _close_all(fds)
                    raise ChannelTimeout(f"no message within the deadline ({got} of {size} bytes)")
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            try:
                if max_fds and not fds:
                    data, new_fds, _flags, _addr = socket.recv_fds(self.sock, size - got, max_fds)
                    fds.extend(new_fds)
                else:
                    data = self.sock.recv(size - got)
            except TimeoutError:
                continue  # the loop's deadline check raises
            except (ConnectionResetError, OSError) as exc:
                _close_all(fds)
                raise ChannelClosed(str(exc)) from None
            if not data:
                _close_all(fds)
                raise ChannelClosed("the other side closed the connection")
            chunks.append(data)
            got += len(data)
        return b"".join(chunks), fds

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def decode(body: bytes) -> dict[str, Any]:
    """A message's JSON object, within the bounds above; anything else is a :class:`ProtocolError`."""
    # a per-integer check costs a Python call per number: only a body with a long run of digits somewhere gets it
    decoder = _CHECKING if _LONG_DIGITS.search(body) else _PLAIN
    try:
        message = decoder.decode(body.decode())
    except RecursionError:  # the C decoder's own guard, ~1000 levels: deeper than MAX_DEPTH anyway
        raise ProtocolError(f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, MemoryError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ProtocolError(f"not JSON within the protocol's bounds: {str(exc)[:200]}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"expected a JSON object, got {type(message).__name__}")
    _check_tree(message)
    return message


def _check_tree(message: dict[str, Any]) -> None:
    """Depth and finite numbers, iteratively (any depth is safe to walk): one pass over what the decoder made."""
    stack: list[tuple[Any, int]] = [(message, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ProtocolError(f"nested deeper than {MAX_DEPTH} levels")
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is float and not math.isfinite(child):  # 1e999 decodes to inf
                raise ProtocolError("a number out of range")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not a number the protocol carries")


_PLAIN = json.JSONDecoder(parse_constant=_constant)
_CHECKING = json.JSONDecoder(parse_int=_int, parse_constant=_constant)
_LONG_DIGITS = re.compile(rb"\d{%d}" % (MAX_INT_DIGITS + 1))


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


# ---------------------------------------------------------------- shared tensor memory


class SharedMemoryError(RuntimeError):
    """A shared buffer could not be made or mapped."""


class SharedBuffer:
    """``nbytes`` of memory that the supervisor and a runner both map.

    ``create`` (supervisor) allocates and keeps an exportable descriptor in ``fd``; ``open``
    (runner) maps a descriptor it received. ``view`` gives tensors over the memory. The mapping
    lives while this object or any tensor made from it does.
    """

    def __init__(self, nbytes: int, device: Any, mapping: Any, fd: int | None):
        self.nbytes = nbytes
        self.device = device
        self._mapping = mapping  # _HostMapping or _DeviceMapping: keeps the memory mapped
        self.fd = fd
        self._base = mapping.tensor()

    @classmethod
    def create(cls, nbytes: int, device: Any, align: int = 0, pad: int = 0) -> SharedBuffer:
        """``align``, ``pad`` (device only, bytes): the mapping's virtual-address alignment and its size's rounding unit,
        beyond the driver's granularity (0: the granularity)."""
        if device.type == "cuda":
            mapping, fd = _DeviceMapping.create(max(nbytes, 1), device, align, pad)
        else:
            fd = os.memfd_create("kb-shared", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, max(nbytes, 1))
            # the pages are this process's from the start: a runner that writes its outputs into them is not charged for
            # them in its cgroup (cgroups.py counts the candidate's own shared memory, not the judge's buffers)
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, 0, max(nbytes, 1))
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            mapping = _HostMapping(fd, max(nbytes, 1))
        return cls(nbytes, device, mapping, fd)

    @classmethod
    def open(cls, fd: int, nbytes: int, device: Any, align: int = 0, pad: int = 0) -> SharedBuffer:
        """Map a received descriptor (``align``, ``pad`` as the creator's); the descriptor is closed here (the mapping
        keeps the memory)."""
        try:
            if device.type == "cuda":
                mapping = _DeviceMapping.open(fd, max(nbytes, 1), device, align, pad)
            else:
                _check_sealed(fd)
                if os.fstat(fd).st_size < max(nbytes, 1):
                    raise SharedMemoryError(f"shared buffer is {os.fstat(fd).st_size} bytes, {nbytes} announced")
                try:
                    mapping = _HostMapping(fd, max(nbytes, 1))
                except (OSError, ValueError) as exc:  # a memfd sealed against writing, say
                    raise SharedMemoryError(f"shared buffer cannot be mapped read-write: {exc}") from None
        finally:
            os.close(fd)
        return cls(nbytes, device, mapping, None)

    def view(self, dtype: Any, shape: list[int], stride: list[int] | None = None, offset: int = 0) -> Any:
        """A tensor of ``dtype``/``shape``/``stride`` (elements) starting ``offset`` bytes in."""
        import torch

        itemsize = torch.empty((), dtype=dtype).element_size()
        if stride is None:
            stride = contiguous_strides(shape)
        span = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True)) if all(shape) else 0
        end = offset + span * itemsize
        if offset < 0 or end > self.nbytes or offset % itemsize:
            raise SharedMemoryError(f"view [{offset}, {end}) does not fit a {self.nbytes}-byte buffer")
        flat = self._base[offset : offset + max(span, 0) * itemsize].view(dtype)
        return flat.as_strided(shape, stride)

    def offset_of(self, view: Any) -> int:
        """Where ``view`` (made by :meth:`view`) starts, in bytes from this buffer's start."""
        return view.data_ptr() - self._base.data_ptr()

    def close_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _check_sealed(fd: int) -> None:
    """A host buffer must be a memfd sealed against shrinking: a mapping past a truncated end faults (SIGBUS)."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as exc:
        raise SharedMemoryError(f"shared buffer is not a sealable memfd ({exc.strerror})") from None
    if not seals & fcntl.F_SEAL_SHRINK:
        raise SharedMemoryError("shared buffer is not sealed against shrinking")


def contiguous_strides(shape: list[int]) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]


class _HostMapping:
    def __init__(self, fd: int, nbytes: int):
        self.mm = mmap.mmap(fd, nbytes)

    def tensor(self) -> Any:
        import torch

        return torch.frombuffer(self.mm, dtype=torch.uint8)


# CUDA driver API (libcuda), just the VMM calls. Constants and layouts from cuda.h (CUDA 12 and 13).
_CU_MEM_ALLOCATION_TYPE_PINNED = 1
_CU_MEM_LOCATION_TYPE_DEVICE = 1
_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
_CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0


class _CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _CUmemAllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _CUmemAllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _CUmemLocation),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _CUmemAllocFlags)]


class _CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", _CUmemLocation), ("flags", ctypes.c_int)]


_driver: Any = None


def _cuda() -> Any:
    global _driver
    if _driver is None:
        lib = ctypes.CDLL("libcuda.so.1")
        u64, size_t, vp = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_void_p
        signatures = {
            "cuMemGetAllocationGranularity": [ctypes.POINTER(size_t), ctypes.POINTER(_CUmemAllocationProp), ctypes.c_int],
            "cuMemCreate": [ctypes.POINTER(u64), size_t, ctypes.POINTER(_CUmemAllocationProp), u64],
            "cuMemExportToShareableHandle": [vp, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), vp, ctypes.c_int],
            "cuMemAddressReserve": [ctypes.POINTER(u64), size_t, size_t, u64, u64],
            "cuMemMap": [u64, size_t, size_t, u64, u64],
            "cuMemSetAccess": [u64, size_t, ctypes.POINTER(_CUmemAccessDesc), size_t],
            "cuMemUnmap": [u64, size_t],
            "cuMemAddressFree": [u64, size_t],
            "cuMemRelease": [u64],
            "cuCtxGetCurrent": [ctypes.POINTER(vp)],
            "cuCtxPushCurrent_v2": [vp],
            "cuCtxPopCurrent_v2": [ctypes.POINTER(vp)],
            "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        }
        for name, argtypes in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        _driver = lib
    return _driver


def _check(rc: int, what: str) -> None:
    if rc != 0:
        name = ctypes.c_char_p()
        _cuda().cuGetErrorName(rc, ctypes.byref(name))
        raise SharedMemoryError(f"{what} failed: {(name.value or b'?').decode()} ({rc})")


class _DeviceSpan:
    """A device address range seen as a uint8 array (``__cuda_array_interface__``); keeps its mapping alive."""

    def __init__(self, ptr: int, nbytes: int, owner: _DeviceMapping):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2}
        self.owner = owner


class _DeviceMapping:
    """A VMM allocation mapped read-write into this process's address space on one device."""

    def __init__(self, ptr: int, size: int, nbytes: int, device: Any, context: int):
        self.ptr, self.size, self.nbytes, self.device = ptr, size, nbytes, device
        weakref.finalize(self, _unmap, ptr, size, context)

    @staticmethod
    def _context(device: Any) -> int:
        import torch

        with torch.cuda.device(device):
            torch.cuda.synchronize()  # makes the primary context current on this thread
        ctx = ctypes.c_void_p()
        _check(_cuda().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise SharedMemoryError("no CUDA context is current on this thread")
        return ctx.value

    @staticmethod
    def _prop(device: Any) -> _CUmemAllocationProp:
        prop = _CUmemAllocationProp()
        prop.type = _CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop.location = _CUmemLocation(_CU_MEM_LOCATION_TYPE_DEVICE, device.index or 0)
        return prop

    @classmethod
    def _rounded(cls, nbytes: int, device: Any, pad: int = 0) -> int:
        granularity = ctypes.c_size_t()
        prop = cls._prop(device)
        _check(_cuda().cuMemGetAllocationGranularity(ctypes.byref(granularity), ctypes.byref(prop),
                                                      _CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity")
        g = granularity.value
        unit = max(g, -(-pad // g) * g)
        return (nbytes + unit - 1) // unit * unit

    @classmethod
    def _map(cls, handle: int, size: int, nbytes: int, device: Any, context: int, align: int = 0) -> _DeviceMapping:
        cu = _cuda()
        ptr = ctypes.c_ulonglong()
        _check(cu.cuMemAddressReserve(ctypes.byref(ptr), size, align, 0, 0), "cuMemAddressReserve")
        try:
            _check(cu.cuMemMap(ptr.value, size, 0, handle, 0), "cuMemMap")
            access = _CUmemAccessDesc(_CUmemLocation(_CU_MEM_LOCATION_TYPE_DEVICE, device.index or 0),
                                      _CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            _check(cu.cuMemSetAccess(ptr.value, size, ctypes.byref(access), 1), "cuMemSetAccess")
        except SharedMemoryError:
            cu.cuMemUnmap(ptr.value, size)
            cu.cuMemAddressFree(ptr.value, size)
            raise
        return cls(ptr.value, size, nbytes, device, context)

    @classmethod
    def create(cls, nbytes: int, device: Any, align: int = 0, pad: int = 0) -> tuple[_DeviceMapping, int]:
        cu = _cuda()
        context = cls._context(device)
        size = cls._rounded(nbytes, device, pad)
        handle = ctypes.c_ulonglong()
        prop = cls._prop(device)
        _check(cu.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), f"cuMemCreate({size} bytes)")
        try:
            fd = ctypes.c_int(-1)
            _check(cu.cuMemExportToShareableHandle(ctypes.byref(fd), handle.value,
                                                   _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle")
            mapping = cls._map(handle.value, size, nbytes, device, context, align)
        finally:
            cu.cuMemRelease(handle.value)  # the mapping keeps the memory; unmapping frees it
        return mapping, fd.value

    @classmethod
    def open(cls, fd: int, nbytes: int, device: Any, align: int = 0, pad: int = 0) -> _DeviceMapping:
        cu = _cuda()
        context = cls._context(device)
        size = cls._rounded(nbytes, device, pad)
        handle = ctypes.c_ulonglong()
        _check(cu.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd),
                                                 _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), "cuMemImportFromShareableHandle")
        try:
            return cls._map(handle.value, size, nbytes, device, context, align)
        finally:
            cu.cuMemRelease(handle.value)

    def tensor(self) -> Any:
        import torch

        return torch.as_tensor(_DeviceSpan(self.ptr, self.nbytes, self), device=self.device)


def _unmap(ptr: int, size: int, context: int) -> None:
    cu = _driver
    if cu is None:
        return
    cu.cuCtxPushCurrent_v2(context)
    try:
        cu.cuMemUnmap(ptr, size)
        cu.cuMemAddressFree(ptr, size)
    finally:
        popped = ctypes.c_void_p()
        cu.cuCtxPopCurrent_v2(ctypes.byref(popped))
