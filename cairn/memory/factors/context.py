"""Context for an LLM answer about factors, built within a token budget (docs/design.md §Factor context).

Items are produced in priority order — every factor's current state, then every
factor's latest change, then histories, then dependencies — and admitted strictly in that order
until the next one does not fit: like the budget gate of the "why" pipeline, the gate only ever
cuts a tail, so a lower-priority item is never kept while a higher-priority one was dropped.
Tokens are counted with the embedding model's tokenizer (cairn.runtime.tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from neo4j import Driver

from cairn.memory.factors.journal import factor_state, history
from cairn.memory.factors.models import FactorError, day, fmt
from cairn.memory.factors.templates import HIDDEN, quote
from cairn.memory.factors.traversal import dependents, downstream
from cairn.policy.scope import Scope
from cairn.runtime.tokens import count_tokens

Kind = Literal["state", "latest_change", "history", "dependencies"]
PRIORITY: tuple[Kind, ...] = ("state", "latest_change", "history", "dependencies")
DEFAULT_MAX_TOKENS = 5000
EXCERPT_CHARS = 200
HISTORY_LIMIT = 5


@dataclass(frozen=True)
class ContextItem:
    kind: Kind
    factor_id: str
    text: str
    tokens: int


@dataclass(frozen=True)
class FactorContext:
    text: str
    tokens: int
    max_tokens: int
    included: tuple[ContextItem, ...]
    excluded: tuple[tuple[Kind, str, str], ...]  # (kind, factor id, reason)

    def evidence(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "max_tokens": self.max_tokens,
            "included": [
                {"kind": i.kind, "factor_id": i.factor_id, "tokens": i.tokens} for i in self.included
            ],
            "excluded": [{"kind": k, "factor_id": f, "reason": r} for k, f, r in self.excluded],
        }


def _requirement(name: str, value: float | None, threshold: float) -> str:
    return f"{name} = {fmt(value)} (needs {fmt(threshold)})"


def _items(
    driver: Driver, scope: Scope, factor_ids: list[str], include_history: bool, include_dependencies: bool
) -> list[tuple[Kind, str, str]]:
    states = {}
    for fid in factor_ids:
        try:
            states[fid] = factor_state(driver, scope, fid)
        except FactorError:
            continue  # unknown or not visible: contributes nothing, says nothing
    chains = {fid: history(driver, scope, fid, limit=HISTORY_LIMIT) for fid in states}
    out: list[tuple[Kind, str, str]] = []
    for fid, s in states.items():
        conf = "n/a" if s.confidence is None else f"{s.confidence:g}"
        out.append(
            (
                "state",
                fid,
                f"[{s.label}] value {fmt(s.value)}"
                + ("" if s.scale is None else f" (scale {s.scale})")
                + f", confidence {conf}, "
                f"status {s.status or 'unassessed'}"
                + ("" if "last_updated" in s.masked else f", last updated {day(s.last_updated)}"),
            )
        )
    for fid, s in states.items():
        if chains[fid]:
            e = chains[fid][0]
            out.append(
                (
                    "latest_change",
                    fid,
                    f"[{s.label}] latest change"
                    + ("" if e.timestamp is None else f" {day(e.timestamp)}")
                    + ("" if e.rationale is None else f": {quote(e.rationale)}")
                    + ("" if e.excerpt is None else f"; excerpt: {e.excerpt[:EXCERPT_CHARS].strip()}"),
                )
            )
    if include_history:
        for fid, s in states.items():
            if len(chains[fid]) > 1:
                steps = "; ".join(
                    ("" if e.timestamp is None else f"{day(e.timestamp)} ")
                    + f"{fmt(e.previous_value)}→{fmt(e.new_value)}"
                    + ("" if e.rationale is None else f" {quote(e.rationale)}")
                    for e in chains[fid]
                )
                out.append(("history", fid, f"[{s.label}] history: {steps}"))
    if include_dependencies:
        for fid, s in states.items():
            graph = downstream(driver, scope, [fid])
            edges = graph.out.get(fid, [])
            needs = [
                _requirement(graph.nodes[e.target].name, graph.nodes[e.target].value, e.min_value)
                for e in edges
                if e.target is not None
            ]
            if any(e.target is None for e in edges):
                needs.append(HIDDEN)  # once, however many: the model must not learn the number
            users = [f"{node.name} (needs {fmt(t)})" for node, t in dependents(driver, scope, fid)]
            if needs or users:
                out.append(
                    (
                        "dependencies",
                        fid,
                        f"[{s.label}] depends on: {', '.join(needs) or 'nothing'}; "
                        f"needed by: {', '.join(users) or 'nothing'}",
                    )
                )
    order = {k: i for i, k in enumerate(PRIORITY)}
    return sorted(out, key=lambda item: order[item[0]])  # stable: factor order kept within a kind


def build_context(
    driver: Driver,
    scope: Scope,
    factor_ids: list[str],
    *,
    include_history: bool = True,
    include_dependencies: bool = True,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> FactorContext:
    """Context lines for ``factor_ids`` (as the scope sees them) within ``max_tokens``."""
    included: list[ContextItem] = []
    excluded: list[tuple[Kind, str, str]] = []
    used = 0
    cut = False
    for kind, fid, text in _items(driver, scope, factor_ids, include_history, include_dependencies):
        tokens = count_tokens(text)
        if cut or used + tokens > max_tokens:
            cut = True
            excluded.append((kind, fid, "token_budget"))
            continue
        included.append(ContextItem(kind, fid, text, tokens))
        used += tokens
    text = "\n".join(i.text for i in included)
    return FactorContext(text, count_tokens(text), max_tokens, tuple(included), tuple(excluded))
