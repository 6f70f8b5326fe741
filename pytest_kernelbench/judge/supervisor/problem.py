"""Where a problem's own code runs: ``get_init_inputs()`` and ``get_inputs()``, which make every value both sides get.

:class:`LocalProblem`: the problem's module loaded in the supervisor. A problem is trusted code (a dataset's, or the
user's own files), so this is the default: no process boundary to cross for every input set.

:class:`SandboxedProblem`: a client's problem (``kbagent serve --allow-problem-code``: ``EvalConfig.problem_sandbox``).
Its module is loaded in a runner of its own, started like a candidate's (bwrap, a cgroup, the allowlisted environment,
frozen between requests); the reference's runners are started the same way (``Runners.start_reference``). Each input
set is one request: the runner calls ``get_inputs()`` under the seed the supervisor drew and writes the values into a
buffer it shares with the supervisor, which copies them out. No code of such a problem runs in a judge's process.

Both give the same values for the same seed: ``torch.manual_seed(seed)``, then ``get_inputs()`` under the judged device
(``--inputs-on device``; on the host where that fails), its tensors moved to the device.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .. import protocol as p
from ..footprint import gib, host_available
from .buffers import expect_node, nbytes, tensor_leaves
from .plan import BUFFER_ALIGN, input_bytes
from .record import Context, Verdict

if TYPE_CHECKING:
    from .buffers import Buffers
    from .sides import Runners, Side

NEEDED = ("Model", "get_inputs", "get_init_inputs")
VALUES_CLASS = "KBProblemValues"

# Appended to a client's problem in its runner: the model whose "call" makes the problem's values. Its own names only
# (kb_...): the problem's may be anything.
VALUES_SHIM = f'''

import torch as _kb_torch


def _kb_to(value, device):
    if isinstance(value, _kb_torch.Tensor):
        return value.to(device).contiguous()
    if isinstance(value, (list, tuple)):
        return type(value)(_kb_to(v, device) for v in value)
    if isinstance(value, dict):
        return {{k: _kb_to(v, device) for k, v in value.items()}}
    return value


class {VALUES_CLASS}(_kb_torch.nn.Module):
    """The judge's: get_init_inputs() ("init") or get_inputs() ("inputs"; "meta": on the meta device, for shapes)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("kb_anchor", _kb_torch.zeros(0))

    def forward(self, which, seed, on_device):
        device = self.kb_anchor.device
        _kb_torch.manual_seed(seed)
        if which == "meta":
            with _kb_torch.device("meta"):
                return tuple(get_inputs())
        if which == "init":
            return _kb_to(tuple(get_init_inputs()), device)
        if on_device and device.type != "cpu":
            try:
                with device:
                    return _kb_to(tuple(get_inputs()), device)
            except Exception:  # a get_inputs that only works on the host
                _kb_torch.manual_seed(seed)
        return _kb_to(tuple(get_inputs()), device)
'''


class LocalProblem:
    """The problem's module, loaded in the supervisor (trusted code)."""

    def __init__(self, ctx: Context, path: str):
        self.ctx = ctx
        self.module = load_module("kb_problem", path)
        for needed in NEEDED:
            if not hasattr(self.module, needed):
                raise Verdict("harness_error", f"the problem defines no {needed}")

    def seed_all(self, seed: int) -> None:
        """Seed the generators ``get_inputs`` draws from: the CPU's and the judged GPU's (``torch.manual_seed``
        seeds every device and backend: 1.3 ms a call on the H100, twice per timed pair)."""
        torch.default_generator.manual_seed(seed)
        if self.ctx.on_gpu:
            torch.cuda.default_generators[self.ctx.device.index or 0].manual_seed(seed)

    def init_values(self, seed: int) -> list[Any]:
        self.seed_all(seed)
        return list(self.module.get_init_inputs())

    def inputs(self, seed: int) -> list[Any]:
        """One input set from ``seed``, on the judged device."""
        ctx = self.ctx
        self.seed_all(seed)
        if ctx.cfg.inputs_on == "device" and ctx.on_gpu:
            try:
                with ctx.device:
                    values = list(self.module.get_inputs())
            except Exception:  # noqa: BLE001 - a get_inputs that only works on the host
                self.seed_all(seed)
                values = list(self.module.get_inputs())
        else:
            values = list(self.module.get_inputs())
        return [v.to(ctx.device) if isinstance(v, torch.Tensor) else v for v in values]

    def input_bytes(self) -> float:
        return input_bytes(self.module)


class SandboxedProblem:
    """A client's problem: its values made in a sandboxed runner of its own, one request an input set."""

    def __init__(self, ctx: Context, runners: Runners, buffers: Buffers):
        self.ctx, self.runners, self.buffers = ctx, runners, buffers
        self.side: Side = runners.start_client("problem")
        runners.problem = self.side
        runners.set_up(self.side)
        source = Path(ctx.spec.problem_path).read_text()
        for needed in NEEDED:  # by name only: none of its code runs here
            if needed not in source:
                raise Verdict("harness_error", f"the client's problem defines no {needed}")
        runners.ask(self.side, p.Load(source + VALUES_SHIM, "kb_problem.py", VALUES_CLASS), p.Done)
        runners.ask(self.side, p.Init([], 0), p.Done)
        self.specs: dict[str, p.Node] = {}  # the structure of each kind of value set ("init", "inputs")
        self.slots: dict[str, tuple[int, p.Node, list[torch.Tensor]]] = {}  # its buffer id, the expect tree, the views
        self._meta = self._call_meta()

    def init_values(self, seed: int) -> list[Any]:
        return self._values("init", seed)

    def inputs(self, seed: int) -> list[Any]:
        return self._values("inputs", seed)

    def input_bytes(self) -> float:
        """Bytes of one input set, from its shapes on the meta device; inf if unknown."""
        if self._meta is None:
            return math.inf
        return float(sum(nbytes(leaf) for leaf in tensor_leaves(self._meta)))

    # ------------------------------------------------------------------ requests

    def _args(self, which: str, seed: int) -> list[p.Node]:
        return [{"v": which}, {"v": seed}, {"v": self.ctx.cfg.inputs_on == "device" and self.ctx.on_gpu}]

    def _call_meta(self) -> p.Node | None:
        reply = self.runners.ask(self.side, p.Call(self._args("meta", 0), None), p.Called, fail_ok=True)
        if not reply.ok or reply.structure is None or any(leaf.get("shape") is None for leaf in tensor_leaves(reply.structure)):
            return None
        self.specs.setdefault("inputs", reply.structure)
        return reply.structure

    def _values(self, which: str, seed: int) -> list[Any]:
        """The values of one set, copied out of the shared buffer; its structure learnt again once if it changed. A
        structure its runner sent that cannot be laid out here (a bad dtype, a shape of petabytes, leaves that do not
        add up) is the client's problem's failure, named as such, not the judge's."""
        try:
            return self._made(which, seed)
        except Verdict:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever its runner's reply makes the layout raise
            why = f"{type(exc).__name__}: {exc}"[:300]
            raise Verdict("harness_error", f"the client's problem gave values the judge cannot lay out ({why})") from None

    def _made(self, which: str, seed: int) -> list[Any]:
        for attempt in range(2):
            if which not in self.specs or attempt:
                reply = self.runners.ask(self.side, p.Call(self._args(which, seed), None), p.Called)
                self.specs[which] = reply.structure
                self.slots.pop(which, None)
            buf_id, expect, views = self._slots(which)
            reply = self.runners.ask(self.side, p.Call(self._args(which, seed), expect), p.Called)
            if not reply.mismatch:
                values = _rebuild(self.specs[which], iter(views), iter(reply.values))
                return list(values) if isinstance(values, (list, tuple)) else [values]
        raise Verdict("harness_error", f"the client's problem gave values of another structure on each call ({reply.mismatch})")

    def _slots(self, which: str) -> tuple[int, p.Node, list[torch.Tensor]]:
        """A shared buffer shaped as the set's structure, mapped by the problem's runner (again after a phase's end
        unmapped it)."""
        held = self.slots.get(which)
        if held is not None and held[0] in self.side.buffers:
            return held
        leaves = tensor_leaves(self.specs[which])
        offsets, total = [], 0
        for leaf in leaves:
            offsets.append(total)
            total += -(-nbytes(leaf) // BUFFER_ALIGN) * BUFFER_ALIGN
        room = self._room()
        if room is not None and total > room:
            raise Verdict("harness_error", f"the client's problem gave a {which} set of {gib(total)}, more than the {gib(room)} "
                          f"free for it on {'the GPU' if self.ctx.on_gpu else 'this host'}")  # fmt: skip
        buf_id, buf = self.buffers.share(self.side, max(total, BUFFER_ALIGN))
        views = [buf.view(getattr(torch, leaf["dtype"]), leaf["shape"], offset=o) for o, leaf in zip(offsets, leaves, strict=True)]
        expect = expect_node(self.specs[which], iter([(buf_id, o, leaf) for o, leaf in zip(offsets, leaves, strict=True)]))
        self.slots[which] = (buf_id, expect, views)
        return self.slots[which]

    def _room(self) -> int | None:
        """Bytes one value set may take where its buffer goes: the GPU's free memory, or the host's available memory."""
        if self.ctx.on_gpu:
            return int(torch.cuda.mem_get_info(self.ctx.device)[0])
        return host_available()


def load_module(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _rebuild(spec: p.Node, tensors: Iterator[torch.Tensor], values: Iterator[Any]) -> Any:
    """The values ``spec`` describes: its tensors copied out of their slots (the next set overwrites them), its
    values as the runner sent them."""
    if "t" in spec:
        return next(tensors).clone()
    if "seq" in spec:
        items = [_rebuild(item, tensors, values) for item in spec["seq"]]
        return tuple(items) if spec.get("tuple") else items
    if "map" in spec:
        return {key: _rebuild(item, tensors, values) for key, item in spec["map"]}
    return next(values)
