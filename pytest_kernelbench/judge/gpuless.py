"""A build step without the GPU: its sandbox has no GPU device file, so the candidate's module, imported there to build
its ``load_inline`` extensions, cannot launch kernels while another judge times (no device lock is held while it
builds). What honest modules ask of the GPU as they are imported (its architecture, to pick flags: 4 of the 90 PIKE
level-3-metr files) is answered from the GPU's own properties, which the supervisor passes in :data:`ENV`. A module
that does use the device as it is imported fails there for want of it (:func:`wanted`), and its build step runs again
with the GPU, holding the device lock shared (docs/judge.md, "The device lock").

Both sides import this module: the runner (the sandboxed side: the standard library only) and the supervisor.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

ENV = "KB_BUILD_GPU"  # the GPU's properties (JSON) in a build step's environment: it has no GPU, the module asks of one
MARK = "the build step has no GPU"  # what torch says here when the module's code makes a CUDA context
_PROPERTIES = ("name", "major", "minor", "total_memory", "multi_processor_count", "L2_cache_size", "warp_size",
               "max_threads_per_multi_processor", "max_threads_per_block", "regs_per_multiprocessor",
               "shared_memory_per_block", "shared_memory_per_block_optin", "shared_memory_per_multiprocessor")  # fmt: skip
# what a module that uses the device meets in a sandbox without its device files (torch, Triton, the driver)
# (numba, CuPy, ctypes on libcuda); a wrong match costs one more build step, a missed one the candidate's compile_error
_WANTED = re.compile(re.escape(MARK) + r"|No CUDA GPUs are available|Found no NVIDIA driver|no CUDA-capable device"
                     r"|CUDA driver initialization failed|CUDA_ERROR_(?:NO_DEVICE|NOT_INITIALIZED|UNKNOWN)|cudaErrorNoDevice"
                     r"|cudaErrorInitializationError|cuInit|0 active drivers")  # fmt: skip


def describe(torch: Any, device: Any) -> str:
    """The properties a build step answers with (:data:`ENV`'s value), read from ``device`` here."""
    props = torch.cuda.get_device_properties(device)
    return json.dumps({name: getattr(props, name) for name in _PROPERTIES if isinstance(getattr(props, name, None), (int, str))})


def install(torch: Any, text: str) -> None:
    """In a build step, before the candidate's module runs: ``torch.cuda``'s questions about the GPU answered from
    ``text`` (:func:`describe`), and a CUDA context refused with :data:`MARK`."""
    props = SimpleNamespace(**json.loads(text))
    cuda = torch.cuda

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"{MARK}: a kernel or a CUDA tensor made as the module is imported")

    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.get_device_properties = lambda *args, **kwargs: props
    cuda.get_device_capability = lambda *args, **kwargs: (props.major, props.minor)
    cuda.get_device_name = lambda *args, **kwargs: props.name
    cuda._lazy_init = refuse  # torch's C++ side makes its context through this too


def wanted(message: str) -> bool:
    """Whether a build step failed because its module used the GPU (not its compiler or its own code)."""
    return bool(_WANTED.search(message))
