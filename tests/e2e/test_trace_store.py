"""The trace store (docs/design.md §Trace bundles): one compact file per ask, written off the
request path, read back as the same bundle files an ask always produced.

Real Neo4j, demo org. Each piece is stored once; the files that repeat another piece are cut out
when read, so these tests rebuild every such file from its source (a fresh Pre-Selector walk, the
caller's meta) and compare; a read that arrives before its write waits for it; a flush writes
every queued trace; withheld ids stay out of bundle_view.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from structlog.testing import capture_logs

from cairn.memory import trace
from cairn.memory.ask import AskResult, AskService
from cairn.memory.budget import Budget
from cairn.policy.passport import Caller, headers_for, verify
from cairn.policy.preselector import preselect
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.database import sync_driver
from cairn.runtime.llm import LLMClient
from cairn.runtime.settings import Settings

HIDDEN_DECISION = "acme-corp-unify-cloud-platform-2022"  # director and exec only
STAFF_ANCHOR = "acme-prod-sunset-onprem-connectors-2024"
MAX_TRACE_BYTES = 10 * 1024


def caller_for(registry: PolicyRegistry, role: str, **extra: str) -> Caller:
    return verify({**headers_for(registry, role, user_id=f"u-{role}"), **extra}, registry, None)


def node(n: Any) -> dict[str, Any]:
    return {"id": n.id, "label": n.label, "hop": n.hop, "fields": n.fields, "masked": list(n.masked)}


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def ask(settings: Settings, root: Path, caller: Caller, anchor: str) -> tuple[AskResult, dict[str, Any]]:
    """The ask, then (right after it returns, in the same process) the caller's bundle_full files
    read back, and the Pre-Selector's walk for the same caller, to rebuild them from."""

    with sync_driver(settings) as driver:
        result = AskService(driver, LLMClient(settings), root).ask(caller, anchor)
        files = {
            name: trace.read_trace_file(root, caller, caller.request_id, name, driver)
            for name in trace.FULL_FILES
            if name != "llm_raw.json"
        }
        cs, ptrace = preselect(driver, caller.scope, anchor)
    assert files["evidence_canonical.json"] == plain([node(n) for n in [cs.anchor, *cs.nodes]])
    assert files["evidence_pre.json"] == plain(
        {
            "anchor": node(cs.anchor),
            "nodes": [node(n) for n in cs.nodes],
            "edges": [e.__dict__ for e in cs.edges],
            "policy_trace": ptrace.__dict__,
        }
    )
    check = files["evidence_check.json"]
    assert check["verified"] and check["bundle_fp"] == result.meta["fingerprints"]["bundle_fp"]
    assert check["unavailable_ids"] == []
    return result, files


@pytest.mark.parametrize(
    ("role", "anchor", "extra"),
    [
        ("staff", STAFF_ANCHOR, {}),
        ("director", HIDDEN_DECISION, {}),
        ("exec", HIDDEN_DECISION, {"X-Max-Hops": "3"}),
    ],
)
def test_a_trace_reads_back_as_the_bundle_files_of_its_ask(
    acme: Driver,
    settings: Settings,
    registry: PolicyRegistry,
    tmp_path: Path,
    role: str,
    anchor: str,
    extra: dict[str, str],
) -> None:
    caller = caller_for(registry, role, **extra)
    result, files = ask(settings, tmp_path, caller, anchor)
    meta, audit = files["_meta.json"], files["_meta_audit.json"]
    assert meta == result.meta
    assert trace.redact_meta(audit) == meta
    assert files["envelope.json"] == json.loads(json.dumps(result.envelope))
    assert files["response.json"] == meta["response"] and files["plan.json"] == meta["selection_metrics"]
    assert files["validator_report.json"] == meta["validator"]
    assert files["evidence_post.json"] == {
        "prompt_included_ids": audit["evidence_sets"]["prompt_included_ids"],
        "prompt_excluded_ids": audit["evidence_sets"]["prompt_excluded_ids"],
        "gate": audit["truncation_metrics"]["passes"],
    }
    stored = list(tmp_path.glob(f"*/{caller.request_id}/*"))
    assert [p.name for p in stored] == [trace.TRACE_FILE]
    assert stored[0].stat().st_size <= MAX_TRACE_BYTES


def test_bundle_view_of_a_trace_never_holds_a_withheld_id(
    acme: Driver, settings: Settings, registry: PolicyRegistry, tmp_path: Path
) -> None:
    caller = caller_for(registry, "staff")
    _, files = ask(settings, tmp_path, caller, STAFF_ANCHOR)
    withheld = files["_meta_audit.json"]["policy_trace"]["withheld_ids"]
    assert withheld, "the staff anchor must have withheld neighbours for this test to mean anything"
    view = trace.bundle_zip(tmp_path, caller, caller.request_id, "bundle_view")
    with zipfile.ZipFile(io.BytesIO(view)) as zf:
        assert set(zf.namelist()) == set(trace.VIEW_FILES)
        text = "".join(zf.read(n).decode("utf-8") for n in zf.namelist())
    for wid in withheld:
        assert wid not in text
    assert "withheld-1" in text


def test_a_read_waits_for_a_queued_write(
    registry: PolicyRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = caller_for(registry, "director")
    release = threading.Event()
    store = trace._store

    def slow(folder: Path, data: bytes) -> None:
        release.wait(10)
        store(folder, data)

    monkeypatch.setattr(trace, "_store", slow)
    trace.submit_trace(tmp_path, caller, {"_meta.json": {"written": True}})
    threading.Timer(0.3, release.set).start()
    started = time.perf_counter()
    assert trace.read_trace_file(tmp_path, caller, caller.request_id, "_meta.json") == {"written": True}
    assert time.perf_counter() - started >= 0.25


def test_an_asks_trace_is_built_on_the_writer_thread_not_the_request_path(
    acme: Driver,
    settings: Settings,
    registry: PolicyRegistry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ask fingerprints its evidence and returns; the stored trace (its packed edges, the
    evidence stored by reference) is built by the trace writer, and still reads back whole."""
    built_on: list[str] = []
    pack_edges = trace.pack_edges

    def recording(*args: Any) -> Any:
        built_on.append(threading.current_thread().name)
        return pack_edges(*args)

    monkeypatch.setattr(trace, "pack_edges", recording)
    caller = caller_for(registry, "exec", **{"X-Max-Hops": "3"})
    ask(settings, tmp_path, caller, HIDDEN_DECISION)
    assert built_on == ["cairn-trace-writer"]


def test_a_trace_whose_build_fails_is_logged_and_reads_as_missing_at_once(
    registry: PolicyRegistry, tmp_path: Path
) -> None:
    """The ask has answered when its trace is built: a build that raises must not stop the
    writer, must say so in the log, and the owner's read must not wait out the write timeout."""
    caller = caller_for(registry, "director")

    def broken() -> dict[str, Any]:
        raise ValueError("cannot pack")

    with capture_logs() as logs:
        trace.submit_trace(tmp_path, caller, broken)
        started = time.perf_counter()
        with pytest.raises(FileNotFoundError):
            trace.read_trace_file(tmp_path, caller, caller.request_id, "_meta.json")
    assert time.perf_counter() - started < 5
    assert [e["request_id"] for e in logs if e["event"] == "trace_write_failed"] == [caller.request_id]
    after = caller_for(registry, "director")
    trace.submit_trace(tmp_path, after, {"_meta.json": {"written": True}})
    assert trace.read_trace_file(tmp_path, after, after.request_id, "_meta.json") == {"written": True}


def test_flush_writes_every_queued_trace(registry: PolicyRegistry, tmp_path: Path) -> None:
    callers = [caller_for(registry, "staff") for _ in range(20)]
    for i, caller in enumerate(callers):
        trace.submit_trace(tmp_path, caller, {"_meta.json": {"n": i}})
    trace.flush()
    files = [next(tmp_path.glob(f"*/{c.request_id}/{trace.TRACE_FILE}")) for c in callers]
    assert len(files) == 20


def test_a_trace_in_an_earlier_form_is_not_read(registry: PolicyRegistry, tmp_path: Path) -> None:
    """An earlier version's trace holds what its mask showed (red-team pass 12): read as missing,
    and deleted by ``drop_stale_traces`` (``cairn db migrate``), this version's trace kept."""
    caller = caller_for(registry, "staff")
    folder = trace.write_trace(tmp_path, caller, {"_meta.json": {"old": True}})
    (folder / trace.TRACE_FILE).rename(folder / "trace.json.gz")
    (folder / "trace.json").write_text(json.dumps({"_meta.json": {"old": True}}), encoding="utf-8")
    with pytest.raises(FileNotFoundError):
        trace.read_trace_file(tmp_path, caller, caller.request_id, "_meta.json")
    (folder / "trace.v1.json.gz").write_bytes(b"")  # an earlier numbered form
    later = f"trace.v{trace.TRACE_VERSION + 1}.json.gz"  # a later version's, left by a downgrade
    (folder / later).write_bytes(b"")
    current = caller_for(registry, "staff")
    trace.write_trace(tmp_path, current, {"_meta.json": {"new": True}})
    assert trace.drop_stale_traces(tmp_path) == 3
    assert [p.name for p in folder.iterdir()] == [later]
    assert trace.read_trace_file(tmp_path, current, current.request_id, "_meta.json") == {"new": True}


def test_canonical_json_is_independent_of_key_order_and_takes_any_value() -> None:
    assert trace.canonical_json({"b": [1, (2, 3)], "a": {"y": 1, "x": None}}) == trace.canonical_json(
        {"a": {"x": None, "y": 1}, "b": [1, [2, 3]]}
    )
    assert json.loads(trace.canonical_json({"n": 2**70, "s": "é"})) == {"n": 2**70, "s": "é"}


def test_a_trace_holding_values_beyond_64_bits_is_written_and_read(
    registry: PolicyRegistry, tmp_path: Path
) -> None:
    caller = caller_for(registry, "staff")
    trace.write_trace(tmp_path, caller, {"_meta.json": {"big": 2**70}})
    assert trace.read_trace_file(tmp_path, caller, caller.request_id, "_meta.json") == {"big": 2**70}


def test_the_stored_trace_holds_what_the_audit_shows_and_rebuilds_the_rest(
    acme: Driver, settings: Settings, registry: PolicyRegistry, tmp_path: Path
) -> None:
    """docs/design.md §Trace bundles: the evidence once, as columns, fingerprinted; the audit meta
    without what the Selector rebuilds from it (scores, the id lists, the prompt's exclusions)."""
    caller = caller_for(registry, "exec", **{"X-Max-Hops": "3"})
    result, files = ask(settings, tmp_path, caller, HIDDEN_DECISION)
    (path,) = tmp_path.glob(f"*/{caller.request_id}/{trace.TRACE_FILE}")
    stored = json.loads(gzip.decompress(path.read_bytes()))
    audit = stored["_meta_audit.json"]
    assert "scores" not in audit["selection_metrics"]
    assert set(audit["evidence_sets"]) == {"prompt_included_ids", "prompt_excluded_count"}
    sets = result.meta["evidence_sets"]
    assert audit["evidence_sets"]["prompt_included_ids"] == sets["prompt_included_ids"]
    assert audit["evidence_sets"]["prompt_excluded_count"] == len(sets["prompt_excluded_ids"])
    assert audit["policy_trace"] == files["_meta_audit.json"]["policy_trace"]  # withheld ids, reasons
    assert stored["envelope.json"]["cited_ids"] == result.envelope["cited_ids"]
    evidence = stored["evidence_canonical.json"]
    assert evidence["ids"] == [n.id for n in result.evidence]
    fingerprint = "sha256:" + hashlib.sha256(trace.pack_evidence(result.evidence)).hexdigest()
    assert result.meta["fingerprints"]["bundle_fp"] == fingerprint
    if "in_full" not in evidence:  # every node stored in full: the stored bytes are the fingerprinted ones
        assert fingerprint == "sha256:" + hashlib.sha256(trace.canonical_json(evidence)).hexdigest()
    assert files["plan.json"]["scores"] and files["plan.json"] == result.meta["selection_metrics"]


def test_the_pool_beyond_the_answer_is_stored_by_id_and_read_back_from_the_graph(
    acme_db: Driver, settings: Settings, registry: PolicyRegistry, tmp_path: Path
) -> None:
    """docs/design.md §Trace bundles: a trace keeps the text of the nodes its answer was built from
    (the anchor, the prompt's lines, the cited ids) and only the ids of the rest of the pool; a read
    gets those back from the graph under the reader's scope and checks the whole against bundle_fp.
    A node changed since, or no longer visible, is reported, and never shown with text the scope
    may not read now."""
    caller = caller_for(registry, "exec", **{"X-Max-Hops": "3"})
    with sync_driver(settings) as driver:
        # A prompt budget that fits the anchor and little else: most of the pool is left out.
        result = AskService(driver, LLMClient(settings), tmp_path).ask(
            caller, HIDDEN_DECISION, budget=Budget(context_window=560)
        )
        trace.flush()
        (path,) = tmp_path.glob(f"*/{caller.request_id}/{trace.TRACE_FILE}")
        stored = json.loads(gzip.decompress(path.read_bytes()))["evidence_canonical.json"]
        kept = {*result.meta["evidence_sets"]["prompt_included_ids"], *result.envelope["cited_ids"]}
        in_full = [result.evidence[i].id for i in stored["in_full"]]
        assert in_full[0] == HIDDEN_DECISION and set(in_full) == {n.id for n in result.evidence} & kept
        by_ref = [n for n in result.evidence if n.id not in kept]
        assert len(by_ref) >= 2, "the budget must leave part of the pool out for this test to mean anything"
        # Their fields are not stored: every column holds the values of the nodes stored in full.
        assert all(len(values) == len(in_full) for values in stored["fields"].values())

        def read(name: str, reader: Driver | None = driver) -> Any:
            return trace.read_trace_file(tmp_path, caller, caller.request_id, name, reader)

        assert read("evidence_canonical.json") == plain([node(n) for n in result.evidence])
        assert read("_meta.json") == result.meta
        check = read("evidence_check.json")
        assert check == {
            "bundle_fp": result.meta["fingerprints"]["bundle_fp"],
            "verified": True,
            "by_reference": len(by_ref),
            "unavailable_ids": [],
        }
        # Without the graph the nodes by reference are listed, not made up.
        blind = read("evidence_check.json", None)
        assert not blind["verified"] and blind["unavailable_ids"] == [n.id for n in by_ref]
        changed, gone = by_ref[0].id, by_ref[-1].id
        driver.execute_query("MATCH (n:Entity {id: $id}) SET n.importance = 0.123", id=changed)
        driver.execute_query("MATCH (n:Entity {id: $id}) SET n.roles_allowed = ['staff']", id=gone)
        check = read("evidence_check.json")
        assert not check["verified"] and check["unavailable_ids"] == [gone]
        assert read("_meta.json")["evidence_check"] == check  # the GraphQL trace field shows it too
        evidence = {e["id"]: e for e in read("evidence_canonical.json")}
        assert evidence[gone]["fields"] == {} and evidence[changed]["fields"]["importance"] == 0.123
