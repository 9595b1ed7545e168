"""Property tests: on generated graphs and generated roles, nothing above the role leaks.

Each example writes a small random org graph (random domains, sensitivities, namespaces,
roles_allowed, causal and alias edges), builds a random role profile, and asks through the
code path the server runs: the strawberry schema executed in-process, with the caller
verified from passport headers exactly as ``cairn/app.py`` does, the Pre-Selector and
search behind the resolvers. Answers are checked against a reference computed here in Python
from the same data: exactly the reachable visible nodes come back, no field outside the
profile has a value, no hidden id or hidden text appears anywhere in what is returned, and a
hidden node answers exactly as a node that does not exist.

``LEAK_EXAMPLES`` examples each (200); ``HYPOTHESIS_PROFILE=fuzz`` (``make fuzz``) runs the
fuzz profile's count instead and writes what ran to ``bench/results/fuzz.md``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.memory.ask import AskService
from cairn.policy.passport import headers_for, verify
from cairn.policy.profiles import SENSITIVITY_RANK, EdgeRule, FieldRule, PolicyRegistry, RoleProfile, matches
from cairn.resolvers.context import RequestContext, Services
from cairn.resolvers.schema import schema
from cairn.runtime.llm import LLMClient
from cairn.runtime.settings import REPO_ROOT, Settings
from tests.conftest import MemoEmbedder
from tests.e2e.conftest import entity_graph_write, wipe

DOMAINS = ("org/corp", "org/prod", "org/reg_a", "org/reg_b")
NAMESPACES = ("public", "internal", "confidential")
ROLES = ("r1", "r2", "r3")
SENS = ("low", "medium", "high")
# Short texts, embedded once by the real embedder: nodes carry one of them as their vector,
# so the GraphQL search (which embeds its query text) ranks them as the server would.
PHRASES = (
    "raise prices for enterprise customers",
    "sunset the on-prem connectors",
    "open a sales office in Tokyo",
    "hire more support engineers",
    "move inference to the EU region",
    "cut the marketing budget",
    "launch the assistant beta",
    "sell annual committed credit bundles",
)
QUERIES = (*PHRASES, "what did we decide about pricing?")  # what the search property asks
LEAK_EXAMPLES = max(200, settings().max_examples)  # the fuzz profile raises it (tests/conftest.py)
FUZZ_RESULTS = REPO_ROOT / "bench" / "results" / "fuzz.md"


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=2, max_value=14))
    nodes = []
    for i in range(n):
        label = draw(st.sampled_from(("Decision", "Event")))
        nodes.append(
            {
                "id": f"n{i}",
                "label": label,
                "domain": draw(st.sampled_from(DOMAINS)),
                "sensitivity": draw(st.sampled_from(SENS)),
                "namespaces": draw(
                    st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=3, unique=True)
                ),
                "roles_allowed": draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=3, unique=True)),
                "phrase": draw(st.integers(0, len(PHRASES) - 1)),
            }
        )
    pairs = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n, unique=True)
    )
    edges = []
    for a, b in pairs:
        if a == b:
            continue
        if nodes[a]["label"] == "Decision" and nodes[b]["label"] == "Event" and draw(st.booleans()):
            edges.append((f"n{a}", f"n{b}", "ALIAS_OF"))
        else:
            edges.append((f"n{a}", f"n{b}", "CAUSAL_PRECEDES"))
    return {"nodes": nodes, "edges": edges}


domain_globs = st.lists(
    st.sampled_from(("org/*", "org/corp", "org/prod", "org/reg_*", "org/reg_a")),
    min_size=1,
    max_size=3,
    unique=True,
).map(tuple)


@st.composite
def profiles(draw: st.DrawFn) -> RoleProfile:
    rules = tuple(
        EdgeRule(
            type=draw(st.sampled_from(("CAUSAL_PRECEDES", "ALIAS_OF"))),
            direction=draw(st.sampled_from(("out", "in", "both"))),
            from_domains=draw(domain_globs),
            to_domains=draw(domain_globs),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    field_choice = st.sampled_from((("*",), ("id", "option", "summary"), ("id", "timestamp", "domain")))
    fields = {
        label: (FieldRule(domains=draw(domain_globs), fields=draw(field_choice)),)
        for label in ("Decision", "Event")
    }
    return RoleProfile(
        name=draw(st.sampled_from(ROLES)),
        domains=draw(domain_globs),
        sensitivity_ceiling=draw(st.sampled_from(SENS)),
        namespaces=tuple(draw(st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=3, unique=True))),
        max_hops=draw(st.integers(1, 3)),
        edges=rules,
        fields=fields,
        x_extra=tuple(draw(st.lists(st.sampled_from(("kpis", "note")), max_size=2, unique=True))),
    )


WRITE_GRAPH = entity_graph_write(("CAUSAL_PRECEDES", "ALIAS_OF"))


def header_phrase(node: dict[str, Any]) -> int:
    return (int(node["phrase"]) + 1) % len(PHRASES)


def ranked_by(node: dict[str, Any], p: RoleProfile) -> int | None:
    """The phrase whose vector may rank ``node`` for ``p``: the full vector only when every
    field it was made from is shown, the header vector when the header field is, else none."""
    shown = allowed_fields(p, node["label"], node["domain"])
    if shown is None:
        return int(node["phrase"])
    if ("option" if node["label"] == "Decision" else "summary") in shown:
        return header_phrase(node)
    return None


def _props(node: dict[str, Any], vectors: np.ndarray) -> dict[str, Any]:
    nid = node["id"]
    text = (
        {"option": f"TITLE-{nid}", "rationale": f"RATIONALE-{nid}"}
        if node["label"] == "Decision"
        else {"summary": f"TITLE-{nid}", "description": f"DESCRIPTION-{nid}"}
    )
    return {
        "id": nid,
        "domain": node["domain"],
        "sensitivity": node["sensitivity"],
        "namespaces": node["namespaces"],
        "roles_allowed": node["roles_allowed"],
        "timestamp": "2024-01-01T00:00:00Z",
        "importance": 0.5,
        "x_extra": json.dumps({"kpis": f"KPI-{nid}", "note": f"NOTE-{nid}", "secret": f"XSECRET-{nid}"}),
        "embedding": [float(x) for x in vectors[node["phrase"]]],
        # the header vector (option or summary only) is another phrase's
        "header_embedding": [float(x) for x in vectors[header_phrase(node)]],
        **text,
    }


def write_graph(driver: Driver, g: dict[str, Any], vectors: np.ndarray) -> None:
    """The example's graph and nothing else in the store (every Entity before it deleted)."""

    def rows(label: str) -> list[dict[str, Any]]:
        return [_props(n, vectors) for n in g["nodes"] if n["label"] == label]

    def pairs(t: str) -> list[dict[str, str]]:
        return [{"a": a, "b": b} for a, b, et in g["edges"] if et == t]

    driver.execute_query(
        WRITE_GRAPH,
        decisions=rows("Decision"),
        events=rows("Event"),
        causal_precedes=pairs("CAUSAL_PRECEDES"),
        alias_of=pairs("ALIAS_OF"),
    )


def visible(node: dict[str, Any], p: RoleProfile) -> bool:
    return (
        matches(node["domain"], p.domains)
        and p.name in node["roles_allowed"]
        and bool(set(node["namespaces"]) & set(p.namespaces))
        and SENSITIVITY_RANK[node["sensitivity"]] <= SENSITIVITY_RANK[p.sensitivity_ceiling]
    )


def edge_allowed(
    p: RoleProfile, etype: str, src: dict[str, Any], dst: dict[str, Any], outgoing: bool
) -> bool:
    return any(
        r.type == etype
        and (r.direction == "both" or r.direction == ("out" if outgoing else "in"))
        and matches(src["domain"], r.from_domains)
        and matches(dst["domain"], r.to_domains)
        for r in p.edges
    )


def reference_reach(g: dict[str, Any], p: RoleProfile, anchor: str) -> set[str]:
    nodes = {n["id"]: n for n in g["nodes"]}
    seen = {anchor}
    queue = deque([(anchor, 0)])
    while queue:
        cur, hop = queue.popleft()
        if hop == p.max_hops:
            continue
        for a, b, t in g["edges"]:
            for here, there, outgoing in ((a, b, True), (b, a, False)):
                if here != cur or there in seen:
                    continue
                if edge_allowed(p, t, nodes[a], nodes[b], outgoing) and visible(nodes[there], p):
                    seen.add(there)
                    queue.append((there, hop + 1))
    return seen


def allowed_fields(p: RoleProfile, label: str, domain: str) -> set[str] | None:
    for rule in p.fields[label]:
        if matches(domain, rule.domains):
            return None if "*" in rule.fields else set(rule.fields) | {"id"}
    return {"id"}


def check_node_fields(p: RoleProfile, label: str, fields: dict[str, Any], dumped: str) -> None:
    allowed = allowed_fields(p, label, fields.get("domain", "")) if "domain" in fields else None
    if allowed is not None:
        assert set(fields) <= allowed, set(fields) - allowed
    extra = fields.get("x_extra", {})
    assert set(extra) <= set(p.x_extra)
    assert "XSECRET-" not in dumped


# --- the server's code path, in-process -------------------------------------------------------

NODE = "query($id: ID!) { node(id: $id) { id label hop fields masked } }"
NEIGHBOURHOOD = """query($id: ID!, $hops: Int!) {
  neighbourhood(id: $id, hops: $hops) {
    anchor { id label hop fields masked }
    nodes { id label hop fields masked }
    edges { source target type relation }
  }
}"""
SEARCH = """query($q: String!, $k: Int!, $t: Float!) {
  search(query: $q, k: $k, threshold: $t) { total hits { score node { id label fields masked } } }
}"""


class Server:
    """The GraphQL schema with a context built as ``CairnGraphQL.get_context`` builds it.

    Each call verifies passport headers for the generated role against a registry holding
    that role, so the resolvers, the Pre-Selector and the search run as they do for a
    request (one event loop for the module, as the server has one).
    """

    def __init__(self, settings: Settings, driver: Driver) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self.services = Services(
            settings=settings,
            driver=driver,
            registry=PolicyRegistry("prop", {}),
            asker=AskService(driver, LLMClient(settings), settings.traces),
            trace_root=settings.traces,
        )

    def execute(self, p: RoleProfile, query: str, **variables: Any) -> dict[str, Any]:
        registry = PolicyRegistry("prop", {p.name: p})
        secret = self.settings.passport_secret
        caller = verify(headers_for(registry, p.name, secret), registry, secret)
        context = RequestContext(
            services=replace(self.services, registry=registry), caller=caller, refusal=None
        )
        result = self.loop.run_until_complete(
            schema.execute(query, variable_values=variables, context_value=context)
        )
        errors = [{"message": e.message, "extensions": e.extensions} for e in result.errors or []]
        return {"data": result.data, "errors": errors}

    def close(self) -> None:
        self.loop.close()


@dataclass
class Tally:
    """Examples each property ran and how many of them failed (written by the fuzz profile)."""

    runs: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def count(self, name: str, body: Callable[[], None]) -> None:
        self.runs[name] = self.runs.get(name, 0) + 1
        try:
            body()
        except BaseException:
            self.failures[name] = self.failures.get(name, 0) + 1
            raise

    def write(self, path: Any) -> None:
        lines = [
            "# Leak property fuzz (`make fuzz`)",
            "",
            f"Profile `{os.environ.get('HYPOTHESIS_PROFILE', 'cairn')}`, "
            f"max_examples {LEAK_EXAMPLES}, {time.monotonic() - self.started:.0f} s in all.",
            "",
            "| property | examples run | failing examples |",
            "|---|---:|---:|",
            *(f"| `{n}` | {self.runs[n]} | {self.failures.get(n, 0)} |" for n in sorted(self.runs)),
            "",
        ]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines), encoding="utf-8")


TALLY = Tally()


@pytest.fixture(scope="module")
def server(settings: Settings, driver: Driver) -> Iterator[Server]:
    """The server's code path. Its model remembers each query text's vector, as for every e2e
    test (MemoEmbedder.submit, tests/conftest.py): a query drawn again is not run through the
    model again, and gets the vector the model gave it (the properties are about who sees what,
    which no forward pass decides; every example still embeds its query through the resolver)."""
    wipe(driver)
    srv = Server(settings, driver)
    yield srv
    srv.close()
    if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz":
        TALLY.write(FUZZ_RESULTS)


@pytest.fixture(scope="module")
def vectors(embedder: MemoEmbedder) -> np.ndarray:
    return embedder.embed(list(PHRASES))


@pytest.fixture(scope="module")
def query_vectors(embedder: MemoEmbedder) -> dict[str, np.ndarray]:
    """The reference's vector of every query text the search property draws, made once."""
    return dict(zip(QUERIES, embedder.embed(list(QUERIES)), strict=True))


def _node_fields(view: dict[str, Any]) -> dict[str, Any]:
    fields = view["fields"]
    assert isinstance(fields, dict)
    return fields


@settings(max_examples=LEAK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(g=graphs(), p=profiles(), data=st.data())
def test_neighbourhood_returns_exactly_the_visible_reach(
    driver: Driver,
    server: Server,
    vectors: np.ndarray,
    g: dict[str, Any],
    p: RoleProfile,
    data: st.DataObject,
) -> None:
    def body() -> None:
        write_graph(driver, g, vectors)
        nodes = {n["id"]: n for n in g["nodes"]}
        anchor = data.draw(st.sampled_from(sorted(nodes)))
        hops = data.draw(st.integers(0, 4))
        answer = server.execute(p, NEIGHBOURHOOD, id=anchor, hops=hops)
        single = server.execute(p, NODE, id=anchor)
        if not visible(nodes[anchor], p):
            # A hidden node answers exactly as one that does not exist, on both fields.
            assert answer == server.execute(p, NEIGHBOURHOOD, id="no-such-node", hops=hops)
            assert [e["extensions"]["code"] for e in answer["errors"]] == ["NOT_FOUND"]
            assert (
                single == server.execute(p, NODE, id="no-such-node") == {"data": {"node": None}, "errors": []}
            )
            return
        assert not answer["errors"] and not single["errors"]
        hood = answer["data"]["neighbourhood"]
        returned = {hood["anchor"]["id"], *(n["id"] for n in hood["nodes"])}
        assert returned == reference_reach(g, replace_hops(p, min(hops, p.max_hops)), anchor)
        assert single["data"]["node"]["id"] == anchor

        hidden = {i for i, n in nodes.items() if not visible(n, p)}
        payload = json.dumps([answer, single])
        for hid in hidden:
            assert f'"{hid}"' not in payload, f"hidden id {hid} leaked"
            assert f'"TITLE-{hid}"' not in payload and f'"RATIONALE-{hid}"' not in payload
        for view in [hood["anchor"], *hood["nodes"], single["data"]["node"]]:
            node = nodes[view["id"]]
            assert visible(node, p)
            fields = _node_fields(view)
            check_node_fields(p, view["label"], fields, payload)
            for name in view["masked"]:
                assert name.split(".")[0] not in fields or name.startswith("x_extra.")
        for e in hood["edges"]:
            assert e["source"] in returned and e["target"] in returned
            src, dst = nodes[e["source"]], nodes[e["target"]]
            assert edge_allowed(p, e["type"], src, dst, True) or edge_allowed(p, e["type"], src, dst, False)

    TALLY.count("neighbourhood_returns_exactly_the_visible_reach", body)


def replace_hops(p: RoleProfile, hops: int) -> RoleProfile:
    """The profile as a walk of ``hops`` sees it (the reference walks ``max_hops``)."""
    return p.model_copy(update={"max_hops": hops})


@settings(max_examples=LEAK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    g=graphs(),
    p=profiles(),
    q=st.sampled_from(QUERIES),
    threshold=st.sampled_from((-1.0, 0.0, 0.3)),
    k=st.integers(1, 5),
)
def test_search_ranks_and_counts_visible_nodes_only(
    driver: Driver,
    server: Server,
    vectors: np.ndarray,
    query_vectors: dict[str, np.ndarray],
    g: dict[str, Any],
    p: RoleProfile,
    q: str,
    threshold: float,
    k: int,
) -> None:
    def body() -> None:
        write_graph(driver, g, vectors)
        answer = server.execute(p, SEARCH, q=q, k=k, t=threshold)
        assert not answer["errors"], answer["errors"]
        result = answer["data"]["search"]
        qv = query_vectors[q]
        expected = sorted(
            (
                (float(np.dot(vectors[phrase], qv)), n["id"])
                for n in g["nodes"]
                if visible(n, p) and (phrase := ranked_by(n, p)) is not None
            ),
            key=lambda t: (-t[0], t[1]),
        )
        expected = [(s, i) for s, i in expected if s >= threshold - 1e-6]
        assert result["total"] == len(expected)
        nodes = {n["id"]: n for n in g["nodes"]}
        got_ids = [h["node"]["id"] for h in result["hits"]]
        assert len(got_ids) == min(k, len(expected))
        assert all(visible(nodes[i], p) for i in got_ids)
        scores = [h["score"] for h in result["hits"]]
        assert scores == sorted(scores, reverse=True)
        for hit, (score, _) in zip(result["hits"], expected, strict=False):
            assert abs(hit["score"] - score) < 1e-4
        payload = json.dumps(answer)
        for hid in (i for i, n in nodes.items() if not visible(n, p)):
            assert f'"{hid}"' not in payload and f'"TITLE-{hid}"' not in payload
        for hit in result["hits"]:
            check_node_fields(p, hit["node"]["label"], _node_fields(hit["node"]), payload)

    TALLY.count("search_ranks_and_counts_visible_nodes_only", body)
