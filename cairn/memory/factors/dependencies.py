"""Readiness over DEPENDS_ON, computed in Python on a subgraph fetched under the caller's scope.

The rule (one definition, used by why-blocked, what-if and capabilities):

* an edge ``X -DEPENDS_ON{min_value}-> Y`` is **met** when Y has a value and ``value(Y) >= min_value``;
* walk from X along DEPENDS_ON through nodes the caller can see (a hidden node is a leaf: it is
  never entered, and its value is never read);
* X is **blocked** when that walk reaches an unmet edge, **ready** when every edge it reaches is
  met and it reaches no hidden node, and otherwise **undetermined** (everything visible is met, but
  something the caller cannot see is also required).

So readiness is transitive (a factor whose own prerequisites fail cannot carry an option), and a
hidden node never changes an answer: the three-valued verdict deliberately does not depend on
anything behind the ACL. Nor does how many hidden prerequisites a node has: the graph keeps at
most one anonymous edge per node, so nothing built on it can count them. The evaluation is a
monotone flag propagation, which terminates on any input — including a cyclic one that the
loader would have refused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cairn.memory.factors.models import Scale, Status


@dataclass(frozen=True)
class DepNode:
    id: str
    label: str  # "Factor" or "Option"
    name: str
    category: str | None = None
    value: float | None = None
    confidence: float | None = None
    scale: Scale | None = None
    masked: tuple[str, ...] = ()  # ("name",) where the scope hides the name (``name`` is the id)


@dataclass(frozen=True)
class DepEdge:
    source: str
    target: str | None  # None: a prerequisite the caller cannot see (never named)
    min_value: float
    weight: float | None = None


@dataclass(frozen=True)
class Blocker:
    """An unmet edge reachable from the start; ``path`` runs from the start to ``edge.source``."""

    edge: DepEdge
    path: tuple[str, ...]
    value: float | None


@dataclass(frozen=True)
class HiddenRequirement:
    """A visible node that requires something the caller cannot see (one per node, however many)."""

    source: str
    path: tuple[str, ...]


Values = Mapping[str, float | None]


class DepGraph:
    """Visible nodes and the DEPENDS_ON edges leaving them.

    Hidden targets are kept as anonymous leaves, at most one per source node: an anonymous edge
    says only that the node needs something the caller cannot see.
    """

    def __init__(self, nodes: Iterable[DepNode], edges: Iterable[DepEdge]) -> None:
        self.nodes: dict[str, DepNode] = {n.id: n for n in nodes}
        self.out: dict[str, list[DepEdge]] = {nid: [] for nid in self.nodes}
        self.incoming: dict[str, list[DepEdge]] = {nid: [] for nid in self.nodes}
        needs_hidden: set[str] = set()
        for e in sorted(edges, key=lambda e: (e.source, e.target or "", e.min_value)):
            if e.source not in self.nodes:
                continue
            if e.target is None:
                if e.source not in needs_hidden:  # nothing about a hidden edge is kept
                    needs_hidden.add(e.source)
                    self.out[e.source].append(DepEdge(e.source, None, 0.0))
                continue
            self.out[e.source].append(e)
            if e.target in self.incoming:
                self.incoming[e.target].append(e)

    def value(self, node_id: str, overrides: Values) -> float | None:
        if node_id in overrides:
            return overrides[node_id]
        node = self.nodes.get(node_id)
        return None if node is None else node.value

    def met(self, edge: DepEdge, overrides: Values) -> bool:
        if edge.target is None:
            return False
        value = self.value(edge.target, overrides)
        return value is not None and value >= edge.min_value

    def _children(self, node_id: str) -> list[str]:
        return [
            e.target for e in self.out.get(node_id, ()) if e.target is not None and e.target in self.nodes
        ]

    def _post_order(self) -> list[str]:
        """Children before parents (back edges of a cycle are simply not followed)."""
        order: list[str] = []
        seen: set[str] = set()
        for root in sorted(self.nodes):
            if root in seen:
                continue
            seen.add(root)
            stack = [(root, iter(self._children(root)))]
            while stack:
                node, children = stack[-1]
                child = next((c for c in children if c not in seen), None)
                if child is None:
                    stack.pop()
                    order.append(node)
                else:
                    seen.add(child)
                    stack.append((child, iter(self._children(child))))
        return order

    def statuses(self, overrides: Values | None = None) -> dict[str, Status]:
        """Status of every node; ``overrides`` replaces factor values (a what-if), nothing else changes."""
        overrides = overrides or {}
        unmet = {
            n: any(e.target is not None and not self.met(e, overrides) for e in self.out[n])
            for n in self.nodes
        }
        hidden = {n: any(e.target is None for e in self.out[n]) for n in self.nodes}
        order = self._post_order()
        changed = True
        while changed:  # one pass settles a DAG; a cycle needs a few more, each monotone
            changed = False
            for node in order:
                for child in self._children(node):
                    if unmet[child] and not unmet[node]:
                        unmet[node] = changed = True
                    if hidden[child] and not hidden[node]:
                        hidden[node] = changed = True
        return {n: "blocked" if unmet[n] else "undetermined" if hidden[n] else "ready" for n in self.nodes}

    def reach(self, start: str) -> dict[str, tuple[str, ...]]:
        """Breadth-first from ``start`` through visible nodes: each reached node with its shortest path."""
        paths: dict[str, tuple[str, ...]] = {start: (start,)}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for child in self._children(node):
                if child not in paths:
                    paths[child] = (*paths[node], child)
                    queue.append(child)
        return paths

    def blockers(
        self, start: str, overrides: Values | None = None
    ) -> tuple[list[Blocker], list[HiddenRequirement]]:
        """Every unmet edge reachable from ``start``, and once each reached node that needs a hidden one."""
        overrides = overrides or {}
        paths = self.reach(start)
        found: list[Blocker] = []
        hidden: list[HiddenRequirement] = []
        for node, path in sorted(paths.items(), key=lambda kv: (len(kv[1]), kv[0])):
            for e in self.out.get(node, ()):
                if e.target is None:
                    hidden.append(HiddenRequirement(node, path))
                elif not self.met(e, overrides):
                    found.append(Blocker(e, path, self.value(e.target, overrides)))
        return found, hidden
