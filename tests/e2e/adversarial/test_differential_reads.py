"""Differential reads (red-team pass on the read side, 2026-11-25).

The strongest check of "a hidden node is, for the caller, not there": load the whole demo
(`cairn serve --demo`: org memory, dossiers, factors, correspondence), ask every read field a
role can ask about every stored id (and ids that never existed), then delete every node the
role may not see and ask again. Apart from what docs/design.md discloses by design (the ask
meta's own withheld placeholders and the note on them, and factor answers that say which
visible node needs prerequisites the caller cannot see), the two runs must answer byte for
byte alike: data, errors, prose, numbering, totals, scores (to float noise), ordering, every
ask's trace bundle (its zip's entries and what each holds) and, for a role allowed the LLM,
every prompt sent to it.

Run by hand against `cairn serve --demo` (every stored id, 3,355 requests per view) it found no
difference beyond those disclosures for staff, manager and a director narrowed to low
sensitivity (whose 241 LLM prompts were identical too); the suite keeps a smaller battery for
staff and the narrowed director (the ids next to hidden nodes, and a few others). Deleting
stands in for never writing because what a reader sees of a dossier is never computed at write
time from facts of another access (packets join, and curation merges and links, only dossiers
with equal access fields).
"""

from __future__ import annotations

import io
import json
import math
import re
import uuid
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.acl import acl_visible
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.settings import Settings
from tests.e2e.conftest import passport, whole_demo
from tests.llm_server import StubLLMServer

NEVER = ["acme-never-existed-2020", "dos-never-stored", "never_factor", "section:0000"]
NODE = "{ id label hop domain title timestamp fields masked }"
ENVELOPE = "envelope { text permissionsNote citedIds causes moreCauses }"
BY_ID: dict[str, list[str]] = {
    "Decision": ["node", "neighbourhood", "ask", "askQuery"],
    "Event": ["node", "neighbourhood", "ask", "askQuery"],
    "Fact": ["node", "ask"],
    "Dossier": ["node", "dossier", "related"],
    "Block": ["node"],
    "JournalEntry": ["node"],
    "Factor": [
        "node",
        "factor",
        "factorAsOf",
        "journal",
        "journalSince",
        "whyBlocked",
        "whyValue",
        "whatIf",
        "whatIfLower",
    ],
    "Option": ["node", "whyBlocked", "whatIf"],
    "Session": ["node"],
    "Section": ["node"],
}
WHAT_IF = "{ current value unblocked { id } blocked { id } answer evidence }"
# One field per request: a non-null field that fails nulls the whole answer, so two aliased
# fields that both fail would report whichever failed first.
QUERIES = {
    "node": "query($i: ID!) { node(id: $i) " + NODE + " }",
    "neighbourhood": "query($i: ID!) { neighbourhood(id: $i, hops: 2) { anchor "
    + NODE
    + " nodes "
    + NODE
    + " edges { source target type relation } } }",
    "ask": "query($i: ID!) { ask(anchorId: $i) { " + ENVELOPE + " response meta evidence " + NODE + " } }",
    "askQuery": "query($i: ID!) { ask(anchorId: $i, mode: QUERY, tokenBudget: 80) { "
    + ENVELOPE
    + " response } }",
    "dossier": "query($i: ID!) { dossier(id: $i) { id title summary status lastUpdated mergedInto factCount"
    " masked facts { id text factType confidence addedAt sourceBlockId turnIndex } history { id op timestamp"
    " previousValue newValue excerpt rationale details } } }",
    "related": "query($i: ID!) { relatedDossiers(id: $i, topK: 10) }",
    "factor": "query($i: ID!) { factor(id: $i) { id name value confidence lastUpdated currentEntry"
    " { id newValue influencedBy hasHiddenInfluences } } }",
    "factorAsOf": 'query($i: ID!) { factor(id: $i, asOf: "2024-10-10T00:00:00Z") { value asOf } }',
    "journal": "query($i: ID!) { journal(factorId: $i, limit: 50) { id op previousValue newValue"
    " rationale excerpt influencedBy hasHiddenInfluences } }",
    "journalSince": 'query($i: ID!) { journal(factorId: $i, limit: 3, since: "2024-10-01T00:00:00Z") { id'
    " factorId op timestamp previousValue newValue rationale excerpt confidence sessionId inferenceStatus"
    " influencedBy hasHiddenInfluences masked } }",
    "whyBlocked": "query($i: ID!) { whyBlocked(id: $i) { subject { id name } status blockers"
    " { factor { id } value threshold requiredBy { id } lastSet } hasHiddenPrerequisites answer evidence } }",
    "whyValue": "query($i: ID!) { whyValue(id: $i) { factor { id value } history { id newValue influencedBy"
    " hasHiddenInfluences } answer evidence } }",
    "whatIf": "query($i: ID!) { whatIf(factorId: $i, value: 95) " + WHAT_IF + " }",
    "whatIfLower": "query($i: ID!) { whatIf(factorId: $i, lower: true) " + WHAT_IF + " }",
}
TEXTS = [
    "cloud platform migration to AWS",
    "GPU platform and AI credit pricing",
    "Initech acquisition Project Falcon",
    "half marathon training",
    "board margin of EU-only inference",
    "confidential approach for the connector business",
    "AI budget headroom and workforce planning",
]
SEARCHES = {
    "search": "query($t: String!) { search(query: $t, k: 50, threshold: 0.0) { total hits { score node "
    + NODE
    + " } } }",
    "correspondenceSearch": "query($t: String!) { correspondenceSearch(query: $t, k: 50) { total hits { id"
    " sectionNumber filedId collision author title body execTags execDecisions respondsTo respondedBy"
    " score masked } } }",
    "beingDivergence": 'query($t: String!) { beingDivergence(question: $t, beings: ["Dana Okafor",'
    ' "Jonas Weber", "Nobody"], k: 5) { author sections { id sectionNumber score } } }',
    "dossierSearch": "query($t: String!) { dossierSearch(query: $t, topK: 20, threshold: 0.0,"
    " includeArchived: true) { count context dossiers { id title summary score factCount lastUpdated } } }",
    "memorySearch": "query($t: String!) { memorySearch(query: $t, k: 50) { count context hits { factId text"
    " dossierId dossierTitle dossierSummary score matched } } }",
    "question": "query($t: String!, $l: Boolean!) { question(text: $t, useLlm: $l,"
    ' now: "2024-10-30T12:00:00Z") { intent entities { id } router answer llmUsed contextTokens evidence } }',
}
FIXED = {
    "tail": "{ correspondenceTail(n: 100) { id sectionNumber filedId collision title respondsTo"
    " respondedBy } }",
    "tailFrom": "{ correspondenceTail(n: 5, fromSection: 15) { id sectionNumber title } }",
    "assessment": "{ assessment { categories { category completeness avgConfidence factorCount totalFactors }"
    " totalFactorsAssessed totalFactors completeness avgConfidence decisionTier canEvaluate { id } answer"
    " continuity evidence } }",
    "whatChanged": '{ whatChanged(since: "2000-01-01T00:00:00Z") { factors { id } entries answer'
    " evidence } }",
    "blocks": '{ a: block(blockId: "block_005") { blockId globalTags turns facts }'
    ' b: block(blockId: "block_001") { blockId globalTags turns facts } }',
}
QUESTIONS = [
    "Why can't we plan staffing with a model?",
    "What if our AI budget goes to 80?",
    "What is stopping us from starting ML-driven automation?",
    "What changed since September?",
]

# What docs/design.md discloses by design: the caller's own ask meta (withheld placeholders,
# reasons, counts) and the note on them (in the answer and its bundle's envelope.json); which
# visible factor or option needs prerequisites the caller cannot see (§Factor questions: "once
# per visible node that needs them").
DISCLOSED = re.compile(
    r"policy_trace|payload_excluded_ids|ts_utc|permissionsNote|permissions_note|hidden_required_by"
    r"|has_hidden_prerequisites"
    r"|hasHiddenPrerequisites|has_hidden_dependencies"
)
DISCLOSED_LINES = re.compile(
    r"^(Note: .*|Some prerequisites are not visible to you.*)$\n?"
    r"|\(needs prerequisites you cannot see\)|(; |, )prerequisites you cannot see",
    re.M,
)


# (role, narrowing headers): staff, and a director narrowed below what it may read (its
# headers hide high and confidential items; it may use the LLM, so its prompts are compared).
VIEWS = {
    "staff": ("staff", {}),
    "director-narrowed": (
        "director",
        {"X-Sensitivity-Ceiling": "low", "X-User-Namespaces": "internal,public"},
    ),
}


@pytest.fixture(scope="module")
def llm() -> Iterator[StubLLMServer]:
    server = StubLLMServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(driver: Driver, settings: Settings, llm: StubLLMServer) -> Iterator[TestClient]:
    with TestClient(create_app(settings.model_copy(update={"llm_base_url": llm.url}))) as c:
        yield c


def scope_of(registry: PolicyRegistry, role: str, headers: dict[str, str]) -> Scope:
    profile = registry.get(role)
    assert profile is not None
    return Scope.from_profile(
        profile,
        ceiling=headers.get("X-Sensitivity-Ceiling"),
        namespaces=tuple(headers["X-User-Namespaces"].split(",")) if "X-User-Namespaces" in headers else None,
    )


# Per label, the ids asked about: every visible node next to a hidden one (where a leak would
# show) up to NEAR, and a few hidden and a few other visible ones (hidden ones become
# never-written ids in the second run). The whole demo, every id, was run by hand (see above).
NEAR, FEW = 12, 4
IN_FLIGHT = 4  # requests of a battery in flight at once
SAMPLE = f"""
MATCH (n:Entity)
OPTIONAL MATCH (n)--(m:Entity) WHERE NOT {acl_visible("m")}
RETURN [l IN labels(n) WHERE l <> 'Entity'][0] AS label, n.id AS id,
       {acl_visible("n")} AS visible, count(m) > 0 AS near_hidden
ORDER BY id
"""


def sampled_ids(driver: Driver, scope: Scope) -> dict[str, list[str]]:
    records, _, _ = driver.execute_query(SAMPLE, scope.cypher_params())
    ids: dict[str, list[str]] = {}
    for label in {r["label"] for r in records}:
        rows = [r for r in records if r["label"] == label]
        near = [r["id"] for r in rows if r["visible"] and r["near_hidden"]][:NEAR]
        hidden = [r["id"] for r in rows if not r["visible"]][:FEW]
        others = [r["id"] for r in rows if r["visible"] and not r["near_hidden"]][:FEW]
        ids[label] = near + hidden + others
    return ids


def battery(ids: dict[str, list[str]]) -> list[tuple[str, str, dict[str, Any]]]:
    jobs: list[tuple[str, str, dict[str, Any]]] = []
    for label, names in BY_ID.items():
        for i in [*ids.get(label, []), *NEVER]:
            jobs += [(f"{name} {i}", QUERIES[name], {"i": i}) for name in names]
    for t in TEXTS:
        jobs += [(f"{name} {t}", query, {"t": t, "l": False}) for name, query in SEARCHES.items()]
    jobs += [(f"question {t}", SEARCHES["question"], {"t": t, "l": True}) for t in QUESTIONS]
    jobs += [(name, query, {}) for name, query in FIXED.items()]
    return jobs


def answers(
    client: TestClient, registry: PolicyRegistry, view: str, jobs: list[tuple[str, str, dict[str, Any]]]
) -> dict[str, Any]:
    """Every job's answer, by name. The requests are independent reads, so a few are in flight
    at once (the app's event loop and its worker threads serve them as a server does): the
    Python of one overlaps the Neo4j work of another."""
    role, headers = VIEWS[view]
    sent = passport(registry, role, **headers)

    def one(job: tuple[str, str, dict[str, Any]]) -> tuple[str, Any]:
        name, query, variables = job
        used = {k: v for k, v in variables.items() if f"${k}" in query}
        # One request id per request, as a gateway sends: an ask's trace is filed under it.
        mine = {**sent, "X-Request-Id": f"req-{uuid.uuid4().hex[:16]}"}
        resp = client.post("/graphql", json={"query": query, "variables": used}, headers=mine)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        # Aliased fields resolve concurrently: their errors come in either order.
        body["errors"] = sorted(body.get("errors") or [], key=lambda e: json.dumps(e.get("path")))
        ask = (body.get("data") or {}).get("ask") or {}
        if "meta" in ask:  # the ask's trace too: the bundle a caller downloads, file by file
            body["bundle"] = bundle(client, mine, ask["meta"]["request"]["request_id"])
        return name, normalised(body)

    with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
        return dict(pool.map(one, jobs))


def bundle(client: TestClient, sent: dict[str, str], request_id: str) -> dict[str, Any]:
    """The ask's ``bundle_view`` zip as its entries' names and parsed contents (a zip's sizes are
    its contents', deflated: the same contents, the same sizes)."""
    resp = client.get(f"/bundles/{request_id}/bundle_view", headers=sent)
    assert resp.status_code == 200, resp.text
    with zipfile.ZipFile(io.BytesIO(resp.content)) as zf:
        return {"names": zf.namelist(), "files": {n: json.loads(zf.read(n)) for n in zf.namelist()}}


# Per request, not per store: request and trace ids (and bundle links made of them), latencies.
PER_REQUEST_KEY = re.compile(r"request_id|trace_id|latenc|_ms$|stage_latencies")
PER_REQUEST_TEXT = re.compile(r"\b(req|trace)-[0-9a-f]{16}\b")


def normalised(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: normalised(v) for k, v in x.items() if not PER_REQUEST_KEY.search(k)}
    if isinstance(x, list):
        return [normalised(v) for v in x]
    if isinstance(x, str):
        return PER_REQUEST_TEXT.sub("<request>", x)
    return x


def differences(a: Any, b: Any, path: str = "") -> Iterator[str]:
    if DISCLOSED.search(path):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(a.keys() | b.keys()):
            yield from differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from differences(x, y, f"{path}[{n}]")
    elif isinstance(a, float) and isinstance(b, float):
        # Scores are rounded to six places from float32 vectors: the last place may wobble.
        if not math.isclose(a, b, abs_tol=2.5e-6):
            yield f"{path}: {a} != {b}"
    elif isinstance(a, str) and isinstance(b, str):
        if DISCLOSED_LINES.sub("", a).rstrip() != DISCLOSED_LINES.sub("", b).rstrip():
            yield f"{path}: {a[:300]!r} != {b[:300]!r}"
    elif a != b:
        yield f"{path}: {json.dumps(a)[:300]} != {json.dumps(b)[:300]}"


def prompts(llm: StubLLMServer, since: int) -> list[str]:
    """What was sent to the LLM since ``since``, in a canonical order, without the disclosures."""
    return sorted(
        json.dumps([DISCLOSED_LINES.sub("", str(m["content"])) for m in r["messages"]])
        for r in llm.requests[since:]
    )


@dataclass
class Run:
    """One view's two batteries: on the whole demo, and with the nodes it may not see deleted."""

    hidden: int
    with_hidden: dict[str, Any]
    with_hidden_prompts: list[str]
    without: dict[str, Any]
    without_prompts: list[str]


def entity_ids(driver: Driver, where: str = "true", params: dict[str, Any] | None = None) -> set[str]:
    """The element ids of the stored nodes that match ``where`` (stable while the nodes exist)."""
    records, _, _ = driver.execute_query(
        f"MATCH (n:Entity) WHERE {where} RETURN elementId(n) AS id", params or {}
    )
    return {r["id"] for r in records}


@pytest.fixture(scope="module")
def runs(driver: Driver, client: TestClient, llm: StubLLMServer, registry: PolicyRegistry) -> dict[str, Run]:
    """Both views asked on one load of the demo; then, view by view from the one that hides the
    least, the view's hidden nodes deleted and the view asked again. A view whose hidden nodes
    include every node already deleted (the narrowed director's 48 are among staff's 49) needs
    no reload: what is left is the demo without exactly its hidden nodes, checked by id below;
    any other view gets a fresh load first."""
    whole_demo(driver)
    everything = entity_ids(driver)
    scopes = {view: scope_of(registry, *VIEWS[view]) for view in VIEWS}
    hidden = {
        view: entity_ids(driver, f"NOT {acl_visible('n')}", s.cypher_params()) for view, s in scopes.items()
    }
    jobs, first, first_prompts = {}, {}, {}
    for view, scope in scopes.items():
        jobs[view] = battery(sampled_ids(driver, scope))
        mark = len(llm.requests)
        first[view] = answers(client, registry, view, jobs[view])
        first_prompts[view] = prompts(llm, mark)
    deleted: set[str] = set()
    out = {}
    for view in sorted(VIEWS, key=lambda v: len(hidden[v])):
        if not deleted <= hidden[view]:
            whole_demo(driver)
            assert entity_ids(driver) == everything
        driver.execute_query(
            f"MATCH (n:Entity) WHERE NOT {acl_visible('n')} DETACH DELETE n", scopes[view].cypher_params()
        )
        deleted = everything - entity_ids(driver)
        assert deleted == hidden[view]  # the demo without exactly the nodes this view may not see
        mark = len(llm.requests)
        without = answers(client, registry, view, jobs[view])
        out[view] = Run(len(hidden[view]), first[view], first_prompts[view], without, prompts(llm, mark))
    return out


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_every_read_answers_as_if_the_hidden_nodes_were_never_written(
    view: str, runs: dict[str, Run]
) -> None:
    run = runs[view]
    assert run.hidden > 20  # the demo hides a good part of itself from this view
    found = [
        f"{name}{d}"
        for name in run.with_hidden
        for d in differences(run.with_hidden[name], run.without[name])
    ]
    assert found == [], "\n".join(found[:40])
    if VIEWS[view][0] == "director":
        assert run.with_hidden_prompts, "the narrowed director's asks and questions must reach the LLM"
    assert run.with_hidden_prompts == run.without_prompts
