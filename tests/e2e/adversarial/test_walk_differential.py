"""A differential property of the walk and the ask (red-team pass 17).

Random small graphs and random roles (edge rules of three types with random directions and
domain globs, field rules for a random subset of labels, random `can_see_withheld_counts`), on
the code path the server runs (the strawberry schema in-process, a verified passport: the
Pre-Selector, the ask pipeline, the trace writer and search behind the resolvers). Each example
writes a graph A, asks, then writes B, which differs from A only in what the role may not see,
and asks again: every answer must be the same, byte for byte up to float noise — nodes, fields,
`masked`, edges, the ask's envelope and prose, its whole meta (every count and reason of
`policy_trace` and `evidence_counts`, the scores, the prompt's fingerprint), its `bundle_view`,
`node` on every id, and search.

What B may change (README "Threat model: reads"; everything else the caller is told, the
withheld count of each walked node's hidden neighbours by reason, is disclosed by design):

- a node the role may not see: its text, importance, time, vectors, `x_extra`, its label, and
  the access fields checked after the first test it fails (which test fails is the reason);
- a node the role sees: every field its rule hides (access fields kept within its view);
- new hidden nodes, tied to hidden nodes by any edge, to anything by an edge of a type the role
  walks nowhere, and to nodes the walk never expands by any edge;
- another copy of an edge to a hidden node (`hidden_edges` counts nodes, not edges), and edges
  between hidden nodes;
- an edge of a walked type that the rules let no one take, between two nodes the walk shows.

``DIFF_EXAMPLES`` examples (60; the fuzz profile raises it).
"""

from __future__ import annotations

import io
import json
import math
import uuid
import zipfile
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.memory import trace as bundles
from cairn.policy.passport import Caller, headers_for, sign, verify
from cairn.policy.profiles import SENSITIVITY_RANK, EdgeRule, FieldRule, PolicyRegistry, RoleProfile, matches
from cairn.resolvers.context import RequestContext
from cairn.resolvers.schema import schema
from cairn.runtime.settings import Settings
from cairn.schema.nodes import SEARCH_TEXT_FIELDS
from tests.conftest import MemoEmbedder
from tests.e2e.conftest import entity_graph_write, wipe
from tests.e2e.test_policy_properties import DOMAINS, NAMESPACES, PHRASES, ROLES, SENS, Server, domain_globs

DIFF_EXAMPLES = max(60, settings().max_examples // 10)
TYPES = ("CAUSAL_PRECEDES", "ALIAS_OF", "RESPONDS_TO")
LABELS = ("Decision", "Event")
TITLE = {"Decision": "option", "Event": "summary"}
BODY = {"Decision": "rationale", "Event": "description"}
ACCESS = ("domain", "roles_allowed", "namespaces", "sensitivity")  # in the order the ACL tests them
TIMES = ("2023-03-01T00:00:00Z", "2024-01-01T00:00:00Z", "2024-06-15T12:00:00Z")
IMPORTANCES = (0.1, 0.5, 0.9)
FIELD_CHOICES = (
    ("*",),
    ("id", "option", "summary"),
    ("id", "timestamp", "domain", "importance"),
    ("id", "option", "summary", "rationale", "x_extra"),
    ("id", "option", "summary", "domain", "namespaces", "sensitivity", "roles_allowed"),
)


def _content(draw: st.DrawFn) -> dict[str, Any]:
    """What a node holds besides its id, label and access fields (``salt`` names its texts)."""
    return {
        "phrase": draw(st.integers(0, len(PHRASES) - 1)),
        "hphrase": draw(st.integers(0, len(PHRASES) - 1)),
        "importance": draw(st.sampled_from(IMPORTANCES)),
        "timestamp": draw(st.sampled_from(TIMES)),
        "salt": draw(st.sampled_from(("a", "b", "c"))),
    }


def _access(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "domain": draw(st.sampled_from(DOMAINS)),
        "sensitivity": draw(st.sampled_from(SENS)),
        "namespaces": draw(st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=3, unique=True)),
        "roles_allowed": draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=3, unique=True)),
    }


contents = st.composite(_content)
rule_globs = st.one_of(st.just(("org/*",)), domain_globs)  # a rule over every domain, often
accesses = st.composite(_access)


def in_view(draw: st.DrawFn, p: RoleProfile) -> dict[str, Any]:
    """Access fields ``p`` passes (where a domain of its view exists), so most walks go somewhere."""
    domains = [d for d in DOMAINS if matches(d, p.domains)] or list(DOMAINS)
    ceiling = SENSITIVITY_RANK[p.sensitivity_ceiling]
    return {
        "domain": draw(st.sampled_from(domains)),
        "sensitivity": draw(st.sampled_from([s for s in SENS if SENSITIVITY_RANK[s] <= ceiling])),
        "namespaces": sorted(
            {draw(st.sampled_from(p.namespaces)), *draw(st.lists(st.sampled_from(NAMESPACES)))}
        ),
        "roles_allowed": sorted({p.name, *draw(st.lists(st.sampled_from(ROLES)))}),
    }


@st.composite
def graphs(draw: st.DrawFn, p: RoleProfile) -> dict[str, Any]:
    """2 to 10 nodes, about two in three of them in ``p``'s view, and up to 3 edges a node."""
    n = draw(st.integers(min_value=2, max_value=10))
    nodes = []
    for i in range(n):
        access = in_view(draw, p) if draw(st.integers(0, 2)) else draw(accesses())
        nodes.append({"id": f"n{i}", "label": draw(st.sampled_from(LABELS)), **access, **draw(contents())})
    pairs = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=n, max_size=3 * n, unique=True
        )
    )
    # Mostly of the types the role walks.
    walked = sorted({r.type for r in p.edges}) or list(TYPES)
    types = st.one_of(st.sampled_from(walked), st.sampled_from(walked), st.sampled_from(TYPES))
    edges = [(f"n{a}", f"n{b}", draw(types)) for a, b in pairs if a != b]
    return {"nodes": nodes, "edges": edges}


@st.composite
def roles(draw: st.DrawFn) -> RoleProfile:
    rules = tuple(
        EdgeRule(
            type=draw(st.sampled_from(TYPES)),
            direction=draw(st.sampled_from(("out", "in", "both"))),
            from_domains=draw(rule_globs),
            to_domains=draw(rule_globs),
        )
        for _ in range(draw(st.integers(0, 4)) or draw(st.integers(0, 4)))
    )
    described = draw(st.lists(st.sampled_from(LABELS), unique=True))  # the others show their id only
    fields = {
        label: tuple(
            FieldRule(domains=draw(domain_globs), fields=draw(st.sampled_from(FIELD_CHOICES)))
            for _ in range(draw(st.integers(1, 2)))
        )
        for label in described
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
        can_see_withheld_counts=draw(st.booleans()),
    )


# --- the reference: who sees what -------------------------------------------------------------


def first_failure(node: dict[str, Any], p: RoleProfile) -> str | None:
    """The first access field whose test ``node`` fails for ``p`` (the ACL's order), else None."""
    tests = {
        "domain": matches(node["domain"], p.domains),
        "roles_allowed": p.name in node["roles_allowed"],
        "namespaces": bool(set(node["namespaces"]) & set(p.namespaces)),
        "sensitivity": SENSITIVITY_RANK[node["sensitivity"]] <= SENSITIVITY_RANK[p.sensitivity_ceiling],
    }
    return next((name for name in ACCESS if not tests[name]), None)


def allowed(p: RoleProfile, label: str, domain: str) -> set[str] | None:
    """The fields the first matching rule shows (None: all); a label without rules shows its id."""
    for rule in p.fields.get(label, ()):
        if matches(domain, rule.domains):
            return None if "*" in rule.fields else set(rule.fields) | {"id"}
    return {"id"}


def edge_ok(p: RoleProfile, etype: str, src: dict[str, Any], dst: dict[str, Any], outgoing: bool) -> bool:
    return any(
        r.type == etype
        and (r.direction == "both" or r.direction == ("out" if outgoing else "in"))
        and matches(src["domain"], r.from_domains)
        and matches(dst["domain"], r.to_domains)
        for r in p.edges
    )


def walk_hops(g: dict[str, Any], p: RoleProfile, anchor: str) -> dict[str, int]:
    """The nodes the walk shows from ``anchor`` (up to the role's hop limit) with their hop."""
    nodes = {n["id"]: n for n in g["nodes"]}
    if first_failure(nodes[anchor], p) is not None:
        return {}
    hops = {anchor: 0}
    queue = deque([anchor])
    while queue:
        cur = queue.popleft()
        if hops[cur] == p.max_hops:
            continue
        for a, b, t in g["edges"]:
            for here, there, outgoing in ((a, b, True), (b, a, False)):
                if here != cur or there in hops or first_failure(nodes[there], p) is not None:
                    continue
                if edge_ok(p, t, nodes[a], nodes[b], outgoing):
                    hops[there] = hops[cur] + 1
                    queue.append(there)
    return hops


# --- B: A changed only where the role may not look ----------------------------------------------


def _redraw_hidden(data: st.DataObject, node: dict[str, Any], p: RoleProfile) -> None:
    """A node ``p`` may not see: new content and label, and the access fields the ACL tests after
    the one it fails redrawn (the failing test, and so the reason, stays)."""
    failing = first_failure(node, p)
    assert failing is not None
    node.update(data.draw(contents()))
    node["label"] = data.draw(st.sampled_from(LABELS))
    node["hidden_text"] = {*TITLE.values(), *BODY.values(), "x_extra"}
    redrawn = data.draw(accesses())
    for name in ACCESS[ACCESS.index(failing) + 1 :]:
        node[name] = redrawn[name]


def _redraw_masked(data: st.DataObject, node: dict[str, Any], p: RoleProfile) -> None:
    """A node ``p`` sees: every field its rule hides redrawn (access fields within the view)."""
    shown = allowed(p, node["label"], node["domain"])
    if shown is None:
        return
    full, header = SEARCH_TEXT_FIELDS[node["label"]]
    if not set(full) <= shown:
        node["phrase"] = data.draw(st.integers(0, len(PHRASES) - 1))
        if header is None or not set(header) <= shown:
            node["hphrase"] = data.draw(st.integers(0, len(PHRASES) - 1))
    else:
        node["hphrase"] = data.draw(st.integers(0, len(PHRASES) - 1))
    for name in ("importance", "timestamp"):
        if name not in shown:
            node[name] = data.draw(st.sampled_from(IMPORTANCES if name == "importance" else TIMES))
    node.setdefault("hidden_text", set())
    for name in (TITLE[node["label"]], BODY[node["label"]], "x_extra"):
        if name not in shown and data.draw(st.booleans()):
            node["hidden_text"] = {*node["hidden_text"], name}
    if "sensitivity" not in shown:
        node["sensitivity"] = data.draw(
            st.sampled_from(
                [s for s in SENS if SENSITIVITY_RANK[s] <= SENSITIVITY_RANK[p.sensitivity_ceiling]]
            )
        )
    if "namespaces" not in shown:
        kept = data.draw(st.sampled_from(sorted(set(node["namespaces"]) & set(p.namespaces))))
        node["namespaces"] = sorted({kept, *data.draw(st.lists(st.sampled_from(NAMESPACES), unique=True))})
    if "roles_allowed" not in shown:
        node["roles_allowed"] = sorted({p.name, *data.draw(st.lists(st.sampled_from(ROLES), unique=True))})


def variant(data: st.DataObject, g: dict[str, Any], p: RoleProfile, anchor: str) -> dict[str, Any]:
    """Graph B: ``g`` changed only in what ``p`` may not see from ``anchor``."""
    nodes = {n["id"]: dict(n) for n in g["nodes"]}
    hidden = {i for i, n in nodes.items() if first_failure(n, p) is not None}
    shown = walk_hops(g, p, anchor)
    expanded = {i for i, hop in shown.items() if hop < p.max_hops}
    walked_types = {r.type for r in p.edges}
    for i, node in nodes.items():
        if data.draw(st.booleans()):
            (_redraw_hidden if i in hidden else _redraw_masked)(data, node, p)
    edges = list(g["edges"])
    # New hidden nodes, and where they may hang.
    for j in range(data.draw(st.integers(0, 3))):
        new = {"id": f"x{j}", "label": data.draw(st.sampled_from(LABELS))}
        new.update(data.draw(accesses()))
        new.update(data.draw(contents()))
        if first_failure(new, p) is None:
            new["roles_allowed"] = [r for r in ROLES if r != p.name]
        nodes[new["id"]] = new
        hidden.add(new["id"])
    ids = sorted(nodes)
    for _ in range(data.draw(st.integers(0, 8))):
        a, b = data.draw(st.sampled_from(ids)), data.draw(st.sampled_from(ids))
        t = data.draw(st.sampled_from(TYPES))
        if a == b:
            continue
        ends_hidden = a in hidden and b in hidden
        unmet = a not in expanded and b not in expanded
        # An edge to a hidden node from a walked one is met (and counted) unless its type is walked nowhere.
        if ends_hidden or unmet or t not in walked_types:
            edges.append((a, b, t))
    # Another copy of an edge to a hidden node.
    for a, b, t in g["edges"]:
        if (a in hidden or b in hidden) and data.draw(st.booleans()):
            edges.append((a, b, t))
    # An edge of a walked type no rule lets anyone take, between two nodes the walk shows.
    in_view = sorted(shown)
    if len(in_view) >= 2:
        for _ in range(data.draw(st.integers(0, 3))):
            a, b = data.draw(st.sampled_from(in_view)), data.draw(st.sampled_from(in_view))
            t = data.draw(st.sampled_from(TYPES))
            if (
                a != b
                and not edge_ok(p, t, nodes[a], nodes[b], True)
                and not edge_ok(p, t, nodes[a], nodes[b], False)
            ):
                edges.append((a, b, t))
    return {"nodes": list(nodes.values()), "edges": edges}


# --- writing a graph ------------------------------------------------------------------------------

WRITE = entity_graph_write(TYPES)


def props(node: dict[str, Any], vectors: np.ndarray) -> dict[str, Any]:
    nid, label, salt = node["id"], node["label"], node["salt"]
    changed = node.get("hidden_text", set())

    def text(name: str, kind: str) -> str:
        return f"{kind}-{nid}" + (f"-{salt}" if name in changed else "")

    extra = {"kpis": f"KPI-{nid}", "note": f"NOTE-{nid}", "secret": f"XSECRET-{nid}-{salt}"}
    if "x_extra" in changed:
        extra = {k: f"{v}-{salt}" for k, v in extra.items()}
    return {
        "id": nid,
        **{name: node[name] for name in ACCESS},
        "timestamp": node["timestamp"],
        "importance": node["importance"],
        "x_extra": json.dumps(extra),
        "embedding": [float(x) for x in vectors[node["phrase"]]],
        "header_embedding": [float(x) for x in vectors[node["hphrase"]]],
        TITLE[label]: text(TITLE[label], "TITLE"),
        BODY[label]: text(BODY[label], "BODY"),
    }


def write(driver: Driver, g: dict[str, Any], vectors: np.ndarray) -> None:
    edges: dict[str, list[dict[str, Any]]] = {t.lower(): [] for t in TYPES}
    for a, b, t in g["edges"]:
        edges[t.lower()].append({"a": a, "b": b, "relation": "based_on" if t == "CAUSAL_PRECEDES" else None})
    driver.execute_query(
        WRITE,
        decisions=[props(n, vectors) for n in g["nodes"] if n["label"] == "Decision"],
        events=[props(n, vectors) for n in g["nodes"] if n["label"] == "Event"],
        **edges,
    )


# --- asking --------------------------------------------------------------------------------------

NODE = "{ id label hop domain title timestamp fields masked }"
ASK = (
    "query($i: ID!) { ask(anchorId: $i) { envelope { text permissionsNote citedIds causes moreCauses }"
    " response meta evidence " + NODE + " } }"
)
EDGES = "edges { source target type relation }"
NEIGHBOURHOOD = f"neighbourhood(id: $i, hops: $h) {{ anchor {NODE} nodes {NODE} {EDGES} }}"
SEARCH = f"search(query: $q, k: 10, threshold: -1.0) {{ total hits {{ score node {NODE} }} }}"
# What differs between two asks by design: the time, the latencies, the asking user.
VOLATILE = {("request", "ts_utc"), ("runtime", "latency_ms_total"), ("runtime", "stage_latencies_ms")}


class Caller2(Server):
    """``Server`` with a fixed request id and a named user, and the caller kept (the bundle)."""

    def as_user(
        self, p: RoleProfile, user: str, request_id: str, query: str, **variables: Any
    ) -> tuple[Any, Caller]:
        registry = PolicyRegistry("prop", {p.name: p})
        secret = self.settings.passport_secret
        headers = headers_for(registry, p.name, None, user_id=user)
        headers |= {"X-Request-Id": request_id, "X-Trace-Id": f"trace-{request_id}"}
        if secret is not None:
            signed = headers_for(registry, p.name, secret, user_id=user)
            headers |= {k: v for k, v in signed.items() if k.startswith("X-Passport")}
            headers["X-Passport-Signature"] = sign(headers, secret)
        caller = verify(headers, registry, secret)
        context = RequestContext(
            services=replace(self.services, registry=registry), caller=caller, refusal=None
        )
        result = self.loop.run_until_complete(
            schema.execute(query, variable_values=variables, context_value=context)
        )
        errors = [{"message": e.message, "extensions": e.extensions} for e in result.errors or []]
        return {"data": result.data, "errors": errors}, caller


def normal(value: Any) -> Any:
    """``value`` with floats rounded (search scores differ in float noise) and the volatile parts
    of an ask meta left out."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(v, dict):
                v = {kk: vv for kk, vv in v.items() if (k, kk) not in VOLATILE}
                if k == "actor":
                    v = {kk: vv for kk, vv in v.items() if kk != "user_id"}
            out[k] = normal(v)
        return out
    return value


def reads(ids: list[str]) -> str:
    """One document: the walk, search and ``node`` on every id (aliased ``n0``, ``n1``, ...)."""
    nodes = " ".join(f"n{k}: node(id: {json.dumps(i)}) {NODE}" for k, i in enumerate(ids))
    return f"query($i: ID!, $h: Int!, $q: String!) {{ {NEIGHBOURHOOD} {SEARCH} {nodes} }}"


def answers(
    srv: Caller2, p: RoleProfile, user: str, request_id: str, anchor: str, ids: list[str], q: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    asked, caller = srv.as_user(p, user, request_id, ASK, i=anchor)
    out["ask"] = asked
    if not asked["errors"]:
        bundles.flush()
        raw = bundles.bundle_zip(
            srv.services.trace_root, caller, request_id, "bundle_view", srv.services.driver
        )
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            out["bundle_view"] = {name: json.loads(zf.read(name)) for name in zf.namelist()}
    out["reads"] = srv.as_user(p, user, f"{request_id}-r", reads(ids), i=anchor, h=p.max_hops, q=q)[0]
    return normal(out)


@pytest.fixture(scope="module")
def srv(settings: Settings, driver: Driver) -> Iterator[Caller2]:
    wipe(driver)
    server = Caller2(settings, driver)
    yield server
    server.close()


@pytest.fixture(scope="module")
def vectors(embedder: MemoEmbedder) -> np.ndarray:
    return embedder.embed(list(PHRASES))


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two answers differ (paths), for a readable failure."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {json.dumps(a)[:300]} != {json.dumps(b)[:300]}"]


def check(
    srv: Caller2,
    driver: Driver,
    vectors: np.ndarray,
    g: dict[str, Any],
    b: dict[str, Any],
    p: RoleProfile,
    anchor: str,
    q: str,
) -> None:
    ids = sorted({n["id"] for n in g["nodes"]} | {n["id"] for n in b["nodes"]} | {"never-stored"})
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    write(driver, g, vectors)
    first = answers(srv, p, "u-a", request_id, anchor, ids, q)
    write(driver, b, vectors)
    second = answers(srv, p, "u-b", request_id, anchor, ids, q)
    meta = (first["ask"]["data"] or {}).get("ask", {}).get("meta", {})
    counts = meta.get("policy_trace", {}).get("counts", {})
    event(f"withheld neighbours: {min(counts.get('hidden_vertices', -1), 3)}")
    event(f"nodes shown: {min(len(meta.get('evidence_sets', {}).get('pool_ids', [])), 4)}")
    diff = differences(first, second)
    assert not diff, "\n".join(diff[:20])


@settings(max_examples=DIFF_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(p=roles(), data=st.data())
def test_answers_do_not_depend_on_what_the_role_may_not_see(
    driver: Driver, srv: Caller2, vectors: np.ndarray, p: RoleProfile, data: st.DataObject
) -> None:
    g = data.draw(graphs(p), label="graph")
    seen = sorted(n["id"] for n in g["nodes"] if first_failure(n, p) is None)
    every = sorted(n["id"] for n in g["nodes"])
    anchor = data.draw(
        st.sampled_from(seen) if seen and data.draw(st.integers(0, 9)) else st.sampled_from(every),
        label="anchor",
    )
    q = data.draw(st.sampled_from(PHRASES), label="query")
    b = variant(data, g, p, anchor)
    check(srv, driver, vectors, g, b, p, anchor, q)
