"""One judge, one GPU: on a host of several GPUs, a judge's processes see only the GPU it judges on.

xdist's workers spread over the host's GPUs (``cuda:N``, the worker's number modulo the GPUs it sees). Each judge's
supervisor, before CUDA starts in it, sets ``CUDA_VISIBLE_DEVICES`` to its GPU alone, as CUDA numbers it in the worker
(:func:`pin`): the supervisor, the reference's runner and the candidate's number it ``cuda:0``, and CUDA starts up and
maps memory for that GPU only. The candidate's sandbox gets that GPU's device node alone (``/dev/nvidiaN``, its
minor number from the driver's ``/proc/driver/nvidia/gpus``, matched by UUID; :func:`device_nodes`), besides the
driver's shared nodes (``nvidiactl``, ``nvidia-uvm``). A candidate that unsets the variable in a process of its own
still cannot open another GPU: without that node there, it cannot launch work on, or fill the memory of, the GPU where
another judge is timing. Where the GPU's node is not known for certain (no driver folder, a MIG instance, GPUs of
different models numbered fastest first) every node stays, as before. ``KB_GPU_PIN=0`` turns it off.

Standard library only: the supervisor calls it before torch starts CUDA, and a test calls it with a fake driver folder.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

ENV = "KB_GPU_PIN"
DRIVER = Path("/proc/driver/nvidia/gpus")
NUMBERED = re.compile(r"nvidia(\d+)")  # a GPU's own device node; every other nvidia* node is the driver's, shared


@dataclasses.dataclass(frozen=True)
class Gpu:
    """One GPU as the driver lists it."""

    bus: str  # PCI location, the order NVML and CUDA_DEVICE_ORDER=PCI_BUS_ID number GPUs in
    minor: int  # its device node: /dev/nvidia<minor>
    uuid: str  # "GPU-..."
    model: str


@dataclasses.dataclass(frozen=True)
class Pin:
    """What :func:`pin` did: the judge's CUDA ordinal in this process now, the device node to keep (None: every node),
    the GPUs the host showed this process before, and what the record says."""

    index: int
    minor: int | None = None
    host_gpus: int = 0
    label: str = ""


def driver_gpus(root: Path = DRIVER) -> list[Gpu]:
    """The GPUs the driver lists, in PCI order; [] where it lists none or a file does not read as expected."""
    found = []
    for info in sorted(root.glob("*/information")):
        try:
            fields = dict(line.split(":", 1) for line in info.read_text().splitlines() if ":" in line)
            found.append(Gpu(info.parent.name, int(fields["Device Minor"]), fields["GPU UUID"].strip(), fields.get("Model", "").strip()))
        except (OSError, KeyError, ValueError):
            return []
    return sorted(found, key=lambda gpu: gpu.bus)


def visible_entries(environ: dict[str, str]) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES``'s entries up to the first invalid one (CUDA ignores what follows: "-1" hides every GPU);
    None where unset."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return None
    entries = []
    for entry in (e.strip() for e in listed.split(",")):
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def physical(entry: str, gpus: list[Gpu], environ: dict[str, str]) -> Gpu | None:
    """The GPU a ``CUDA_VISIBLE_DEVICES`` entry names: by UUID (or a unique prefix of one, as CUDA accepts), or by
    CUDA's number where that number is the PCI order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, or GPUs all of one model:
    CUDA's default, fastest first, leaves the order among equals to the bus). None where not certain."""
    if entry.startswith("GPU-"):
        named = [gpu for gpu in gpus if gpu.uuid.startswith(entry)]
        return named[0] if len(named) == 1 else None
    if not entry.isdigit() or int(entry) >= len(gpus):
        return None
    if environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len({gpu.model for gpu in gpus}) != 1:
        return None
    return gpus[int(entry)]


def pin(index: int, environ: dict[str, str] | None = None, root: Path = DRIVER) -> Pin:
    """Make ``cuda:index`` (as this process's CUDA would number it) the only GPU this process and its children see,
    by setting ``CUDA_VISIBLE_DEVICES`` in ``environ`` (default: this process's environment). Call it before CUDA starts
    here. Where there is nothing to pin (``KB_GPU_PIN=0``, no such GPU) ``environ`` is left alone and ``index`` kept."""
    environ = os.environ if environ is None else environ
    entries = visible_entries(environ)
    gpus = driver_gpus(root)
    count = len(entries) if entries is not None else len(gpus)
    if environ.get(ENV, "1") == "0":
        return Pin(index, host_gpus=count, label=f"off ({ENV}=0)")
    if index >= count:
        return Pin(index, host_gpus=count, label=f"off (cuda:{index} of {count} GPUs listed)")
    entry = entries[index] if entries is not None else str(index)
    gpu = physical(entry, gpus, environ)
    environ["CUDA_VISIBLE_DEVICES"] = gpu.uuid if gpu is not None else entry
    if gpu is None:  # the variable alone: CUDA still shows this process one GPU, a candidate's sandbox keeps every node
        return Pin(0, host_gpus=count, label=f"{entry}, every device node kept (its own not known for certain)")
    return Pin(0, gpu.minor, count, f"{gpu.uuid} (/dev/nvidia{gpu.minor})")


def device_nodes(names: list[str], minor: int | None) -> list[str]:
    """The ``/dev`` entries (names) a candidate's sandbox binds: every ``nvidia*`` one, but of the numbered (one per
    GPU) only ``nvidia<minor>`` where ``minor`` is known."""
    keep = []
    for name in sorted(names):
        numbered = NUMBERED.fullmatch(name)
        if name.startswith("nvidia") and (minor is None or numbered is None or int(numbered.group(1)) == minor):
            keep.append(name)
    return keep
