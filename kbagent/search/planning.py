"""What each LLM call of the search is asked: the brainstorm, a phase's samples (one per idea in
phase 0; in phases 1..n parents picked by the strategy, each shown with its runtime, speedup, op and
kernel profile, what failed before in its line and other lines' ideas) and the fix prompt of a
failing candidate. Node ids are made here (``p0-i3``, ``p1-n2``; fixes append ``-f1``)."""

from __future__ import annotations

from kbagent import prompts, strategies
from kbagent.llm import Messages
from kbagent.search.config import SearchConfig
from kbagent.search.nodes import Node, Tree, rank_reward

HISTORY_LINES = 8  # earlier attempts of a line shown to the improve agent
OTHER_IDEAS = 3  # brainstorm ideas from other lines offered to the improve agent


class Planner:
    """The prompts of one search, read off its :class:`Tree` (phases are barriers: a phase is planned once the last one finished)."""

    def __init__(self, source: str, config: SearchConfig, target: prompts.Target, tree: Tree):
        self.source = source
        self.cfg = config
        self.target = target
        self.tree = tree

    def ideas_messages(self) -> Messages:
        return prompts.ideas_messages(self.source, self.cfg.num_samples, self.target)

    def fresh_samples(self, phase: int) -> list[tuple[Node, Messages]]:
        """Samples from ideas (phase 0, or a phase with nothing to improve)."""
        ideas_found = self.tree.ideas
        if phase == 0:
            ideas: list[str | None] = list(ideas_found) or [None] * self.cfg.num_samples
        else:
            ideas = [ideas_found[j % len(ideas_found)] if ideas_found else None for j in range(self.cfg.num_samples)]
        out = []
        for i, idea in enumerate(ideas):
            node_id = f"p0-i{i}" if phase == 0 else f"p{phase}-n{i}"
            node = Node(id=node_id, phase=phase, index=i, kind="sample", lineage=node_id, sample=node_id, idea=idea)
            out.append((node, prompts.code_messages(self.source, idea, self.target)))
        return out

    def improve_samples(self, phase: int) -> list[tuple[Node, Messages]]:
        rng = strategies.phase_rng(self.cfg.seed, phase)
        plan = strategies.plan_phase(self.cfg.strategy, self._pool(), self.cfg.num_samples, self.cfg.num_parents, rng, self.cfg.elitism)
        if not plan:
            return self.fresh_samples(phase)
        out = []
        j = 0
        for scored, count in plan:
            parent = self.tree.nodes[scored.id]
            messages = prompts.improve_messages(
                self.source, self._parent_view(parent), self._history(parent), self.target, self._other_ideas(parent)
            )
            for _ in range(count):
                node_id = f"p{phase}-n{j}"
                node = Node(id=node_id, phase=phase, index=j, kind="improve", lineage=parent.lineage, sample=node_id, parent=parent.id)
                out.append((node, messages))
                j += 1
        return out

    def fix_messages(self, failing: Node, attempt: int) -> Messages:
        r = failing.result
        assert r is not None
        return prompts.fix_messages(
            self.source,
            failing.code or "",
            outcome=r.outcome.value,
            stage=r.stage,
            message=r.message,
            max_abs_diff=r.max_abs_diff,
            attempt=attempt,
            max_attempts=self.cfg.max_fix_attempts,
            target=self.target,
        )

    def _pool(self) -> list[strategies.Scored]:
        pool = []
        for node in self.tree.nodes.values():
            if node.code is None or (node.result is None and not self.cfg.dry_run):
                continue
            pool.append(
                strategies.Scored(
                    id=node.id,
                    lineage=node.lineage,
                    speedup=node.speedup,
                    reward=rank_reward(node.result),
                    order=node.order,
                )
            )
        return pool

    def _parent_view(self, node: Node) -> prompts.ParentView:
        r = node.result
        ops: dict[str, int] = {}
        if r is not None and isinstance(r.extra.aten_ops, dict):
            try:
                from pytest_kernelbench.judge.policy import compute_ops

                ops = compute_ops(r.extra.aten_ops)
            except ImportError:  # no torch in this process: show them all
                ops = dict(r.extra.aten_ops)
        return prompts.ParentView(
            id=node.id,
            code=node.code or "",
            outcome=r.outcome.value if r else None,
            speedup=r.speedup if r else None,
            ref_ms=r.ref_ms if r else None,
            new_ms=r.new_ms if r else None,
            device_name=(r.device_name or r.device) if r else "",
            stage=r.stage if r else "",
            message=r.message if r else "",
            aten_ops=ops,
            kernels=_kernel_profile(r.extra.kernel_profile) if r is not None else [],
        )

    def _history(self, parent: Node) -> list[str]:
        """Earlier attempts of the parent's line (all finished: phases are barriers), oldest first."""
        lines = []
        nodes = self.tree.nodes.values()
        line_nodes = sorted((n for n in nodes if n.lineage == parent.lineage and n.id != parent.id), key=lambda n: n.order)
        for n in line_nodes[-HISTORY_LINES:]:
            if n.status == "unusable":
                lines.append(f"{n.id}: the reply was unusable ({n.reason})")
            elif n.result is not None and n.correct:
                note = ""
                if parent.speedup is not None and n.speedup is not None and n.speedup < parent.speedup:
                    note = ", slower than the current candidate"
                lines.append(f"{n.id}: correct, {n.speedup:.3f}x{note}" if n.speedup is not None else f"{n.id}: correct")
            elif n.result is not None:
                r = n.result
                lines.append(f"{n.id}: {r.outcome.value} at stage '{r.stage or '-'}': {prompts.first_line(r.message, 200)}")
        return lines

    def _other_ideas(self, parent: Node) -> list[str]:
        root = self.tree.nodes.get(parent.lineage)
        own = root.idea if root else None
        return [idea for idea in self.tree.ideas if idea != own][:OTHER_IDEAS]


def _kernel_profile(found: object) -> list[tuple[str, float, int]]:
    """(kernel, microseconds, launches) from a result's ``kernel_profile``, longest first; anything malformed is left out."""
    rows = []
    if isinstance(found, dict):
        for name, entry in found.items():
            if isinstance(entry, dict) and isinstance(entry.get("us"), (int, float)) and isinstance(entry.get("launches"), int):
                rows.append((str(name), float(entry["us"]), entry["launches"]))
    return sorted(rows, key=lambda row: -row[1])
