"""Hostile input for every parser: fixture records, GraphQL payloads, passport headers, fact
packet and block files, correspondence markdown and factor documents. Whatever hypothesis
generates, nothing crashes, a refusal writes nothing (no transaction commits: tests/e2e/commits.py) and
every problem names where it is."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.ingest.correspondence.parser import CorrespondenceError, parse_bytes
from cairn.ingest.correspondence.sync import sync_bytes
from cairn.ingest.factors import ingest_factor_payload
from cairn.ingest.fixtures import FixtureError
from cairn.ingest.org_memory import ingest_fixture_dir, ingest_payload
from cairn.memory.dossiers import blocks, files, governor
from cairn.memory.dossiers.models import InputError
from cairn.policy.passport import OPTIONAL, REQUIRED, PassportError, headers_for, verify
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import REPO_ROOT
from cairn.schema import unique_yaml
from tests.e2e.commits import last_commit
from tests.e2e.conftest import load_acme

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30)
)
json_value = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)
FIELDS = (
    "id",
    "option",
    "rationale",
    "timestamp",
    "decision_maker",
    "tags",
    "supported_by",
    "based_on",
    "domain",
    "importance",
    "sensitivity",
    "namespaces",
    "roles_allowed",
    "x-extra",
    "summary",
    "from",
    "to",
    "decision_id",
    "event_id",
    "domain_from",
    "domain_to",
    "led_to",
)
VALID_DECISION = {
    "id": "fuzz-d1",
    "option": "A decision",
    "rationale": "why",
    "timestamp": "2024-01-01T00:00:00Z",
    "decision_maker": "CTO",
    "tags": [],
    "supported_by": [],
    "based_on": [],
    "domain": "acme/product",
    "importance": 0.5,
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff"],
    "x-extra": {},
}
records = st.one_of(
    json_value,
    st.dictionaries(st.sampled_from(FIELDS), json_value, max_size=8),
    # A valid record with one field replaced by garbage: the near misses that matter most.
    st.tuples(st.sampled_from(FIELDS), json_value).map(lambda kv: {**VALID_DECISION, kv[0]: kv[1]}),
)
FOLDERS = ("decisions", "events", "transitions", "edges/aliases")


@pytest.fixture(scope="module")
def acme(driver: Driver) -> Driver:
    return load_acme(driver)  # the demo org as a fresh load writes it; shared when unchanged


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(folder=st.sampled_from(FOLDERS), record=records, raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_random_fixture_files_are_refused_cleanly(
    acme: Driver, tmp_path_factory: pytest.TempPathFactory, folder: str, record: Any, raw: bytes | None
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    (root / folder).mkdir(parents=True)
    target = root / folder / "x.json"
    if raw is not None:
        target.write_bytes(raw)
    else:
        target.write_text(json.dumps(record, allow_nan=True))
    before = last_commit(acme)
    try:
        ingest_fixture_dir(acme, root)
    except FixtureError as exc:
        assert exc.problems and all(p.file and p.message for p in exc.problems)
        assert last_commit(acme) == before
        return
    # Accepted input must have been a complete valid record; nothing else may pass silently.
    assert raw is None and isinstance(record, dict) and record.get("id")
    acme.execute_query("MATCH (n:Entity {id: $id}) DETACH DELETE n", id=record["id"])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=json_value)
def test_random_graphql_payloads_are_refused_cleanly(acme: Driver, payload: Any) -> None:
    before = last_commit(acme)
    with pytest.raises(FixtureError) as err:
        ingest_payload(acme, payload)
    assert all(p.message for p in err.value.problems)
    assert last_commit(acme) == before


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    overrides=st.dictionaries(
        st.sampled_from(REQUIRED + OPTIONAL),
        # Unicode digits pass str.isdigit() but not int(): the 500 of issue 12 #8.
        st.one_of(st.text(max_size=40), st.sampled_from(["²", "٣", "３", "1²", "9" * 40])),
        max_size=5,
    ),
    dropped=st.lists(st.sampled_from(REQUIRED), max_size=2, unique=True),
)
def test_random_passports_fail_closed_with_a_named_header(
    registry: PolicyRegistry, data: st.DataObject, overrides: dict[str, str], dropped: list[str]
) -> None:
    role = data.draw(st.sampled_from(sorted(registry.roles)))
    headers = {**headers_for(registry, role), **overrides}
    for name in dropped:
        headers.pop(name, None)
    try:
        caller = verify(headers, registry, None)
    except PassportError as exc:
        assert exc.code and exc.header in (*REQUIRED, *OPTIONAL, "X-Passport-Signature")
        return
    # Whatever got through can only be the role's own profile, narrowed.
    profile = registry.get(caller.role)
    assert profile is not None and caller.scope.max_hops <= profile.max_hops
    assert set(caller.scope.edges) <= set(profile.edges)


# --- fact packets and blocks ----------------------------------------------------------------------

VALID_PACKET = {
    "packet_id": "fuzz-packet",
    "cluster_label": "Fuzz topic",
    "facts": ["User likes fuzz testing"],
    "source_block_id": "fuzz-block",
    "timestamp": "2026-01-01T00:00:00Z",
    "access": {"domain": "acme/product", "sensitivity": "low"},
}
VALID_BLOCK = {
    "block_id": "fuzz-block",
    "timestamp": "2026-01-01T00:00:00Z",
    "turns": [{"turn_id": "fuzz-turn", "user": "I like fuzz testing.", "assistant": "Noted."}],
    "facts": [{"value": "User likes fuzz testing", "turn_id": "fuzz-turn", "fact_type": "preference"}],
}
DOSSIER_WORK = "MATCH (n) WHERE n:Dossier OR n:Fact OR n:JournalEntry OR n:Block OR n:Turn DETACH DELETE n"


def near_misses(valid: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Garbage, random objects over the right keys, and a valid record with one field spoiled."""
    keys = st.sampled_from(sorted(valid))
    return st.one_of(
        json_value,
        st.dictionaries(keys, json_value, max_size=len(valid)),
        st.tuples(keys, json_value).map(lambda kv: {**valid, kv[0]: kv[1]}),
        keys.map(lambda k: {key: v for key, v in valid.items() if key != k}),
    )


def json_lines(valid: dict[str, Any]) -> st.SearchStrategy[str]:
    line = st.one_of(near_misses(valid).map(lambda v: json.dumps(v, allow_nan=True)), st.text(max_size=30))
    return st.lists(line, min_size=1, max_size=4).map("\n".join)


@pytest.mark.parametrize(
    ("valid", "read", "write"),
    [
        (VALID_PACKET, files.read_packets, lambda d, items: governor.ingest_packets(d, items)),
        (VALID_BLOCK, files.read_blocks, blocks.ingest_blocks),
    ],
    ids=["packets", "blocks"],
)
def test_random_packet_and_block_files_are_refused_cleanly(
    acme: Driver,
    tmp_path_factory: pytest.TempPathFactory,
    valid: dict[str, Any],
    read: Callable[[Path], list[Any]],
    write: Callable[[Driver, list[Any]], list[Any]],
) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=json_lines(valid), raw=st.one_of(st.none(), st.binary(max_size=60)))
    def check(text: str, raw: bytes | None) -> None:
        path = tmp_path_factory.mktemp("fuzz") / "input.jsonl"
        if raw is None:
            path.write_text(text, encoding="utf-8")
        else:
            path.write_bytes(raw)
        before = last_commit(acme)
        try:
            items = read(path)
            written = write(acme, items)
        except InputError as exc:
            # Every problem says where: the file, and the line or array position when there is one.
            assert exc.problems and all(p.message and p.where for p in exc.problems), exc.problems
            assert all(p.where.startswith(("input.jsonl", str(path))) for p in exc.problems), exc.problems
            assert last_commit(acme) == before
            return
        assert items and len(written) == len(items)
        acme.execute_query(DOSSIER_WORK)

    check()


def test_a_block_listed_twice_is_refused_at_its_line(tmp_path: Path) -> None:
    """Found by the fuzz above: the repeat was reported by block id only, without its place."""
    path = tmp_path / "input.jsonl"
    path.write_text("\n".join(json.dumps(VALID_BLOCK) for _ in range(3)), encoding="utf-8")
    with pytest.raises(InputError) as refused:
        files.read_blocks(path)
    assert [p.where for p in refused.value.problems] == ["input.jsonl:2", "input.jsonl:3"]
    assert all("listed twice (first at input.jsonl:1)" in p.message for p in refused.value.problems)


# --- correspondence markdown --------------------------------------------------------------------

LETTERS_FIXTURE = REPO_ROOT / "fixtures" / "correspondence" / "acme-letters.md"
LETTER_LINES = LETTERS_FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
edit = st.tuples(
    st.sampled_from(("delete", "duplicate", "insert", "replace", "bytes")),
    st.integers(0, len(LETTER_LINES) - 1),
    st.integers(1, 40),
    st.one_of(st.text(max_size=40), st.sampled_from(("## ", "## XIV —", "*Access: domain=", "---", "\x00"))),
    st.binary(max_size=8),
)


def edited_letters(edits: list[tuple[str, int, int, str, bytes]]) -> bytes:
    lines = [line.encode("utf-8") for line in LETTER_LINES]
    for kind, at, span, text, junk in edits:
        at = min(at, len(lines))
        if kind == "delete":
            del lines[at : at + span]
        elif kind == "duplicate":
            lines[at:at] = lines[at : at + span]
        elif kind == "insert":
            lines.insert(at, text.encode("utf-8") + b"\n")
        elif kind == "replace" and at < len(lines):
            lines[at] = text.encode("utf-8") + b"\n"
        else:
            lines.insert(at, junk)
    return b"".join(lines)


@settings(max_examples=300, deadline=None)
@given(edits=st.lists(edit, min_size=1, max_size=5))
def test_randomly_edited_correspondence_parses_or_is_refused_with_line_numbers(
    edits: list[tuple[str, int, int, str, bytes]],
) -> None:
    data = edited_letters(edits)
    try:
        parsed = parse_bytes(data, "letters.md")
    except CorrespondenceError as exc:
        assert exc.problems and all(p.message for p in exc.problems)
        assert all(0 <= p.line <= data.count(b"\n") + 1 for p in exc.problems), exc.problems
        assert str(exc).startswith("letters.md: cannot sync: line ")
        return
    assert [s.ordinal for s in parsed.sections] == list(range(1, len(parsed.sections) + 1))
    assert all(s.body and s.line >= 1 for s in parsed.sections)
    untitled = {w.line for w in parsed.warnings if w.message.endswith("has no title")}
    assert all(s.title or s.line in untitled for s in parsed.sections)  # tolerated, but said


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=st.lists(edit, min_size=1, max_size=3))
def test_a_refused_correspondence_file_writes_nothing(
    acme: Driver, tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, int, int, str, bytes]]
) -> None:
    log = tmp_path_factory.mktemp("fuzz") / "collisions.jsonl"
    data = edited_letters(edits)
    before = last_commit(acme)
    try:
        report = sync_bytes(acme, data, "fuzz-letters", collision_log=log)
    except CorrespondenceError:
        assert last_commit(acme) == before and not log.exists()
        return
    assert len(report.created) == report.sections_in_file
    acme.execute_query("MATCH (s:Section {source: 'fuzz-letters'}) DETACH DELETE s")


# --- factor documents ---------------------------------------------------------------------------

FACTOR_DOCUMENT = unique_yaml.load_file(REPO_ROOT / "fixtures" / "factors" / "domain.yaml")


@st.composite
def factor_documents(draw: st.DrawFn) -> Any:
    """The demo domain document with one record's field spoiled, or a random document."""
    if draw(st.booleans()):
        return draw(st.dictionaries(st.sampled_from(sorted(FACTOR_DOCUMENT)), json_value, max_size=4))
    doc = copy.deepcopy(FACTOR_DOCUMENT)
    section = draw(st.sampled_from([k for k, v in doc.items() if isinstance(v, list) and v]))
    record = draw(st.sampled_from(doc[section]))
    key = draw(st.sampled_from(sorted(record)))
    record[key] = draw(json_value)
    return doc


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(document=factor_documents())
def test_random_factor_documents_are_refused_cleanly(acme: Driver, document: Any) -> None:
    before = last_commit(acme)
    try:
        ingest_factor_payload(acme, document)
    except FixtureError as exc:
        assert exc.problems and all(p.file and p.message for p in exc.problems), exc.problems
        assert last_commit(acme) == before
        return
    # A spoiled field that still made a valid document (e.g. another description): written whole.
    acme.execute_query("MATCH (n) WHERE n:Factor OR n:Option OR n:JournalEntry OR n:Session DETACH DELETE n")
