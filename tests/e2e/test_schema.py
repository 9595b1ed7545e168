"""Schema migration against the real Neo4j: idempotent, complete, and enforced."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from neo4j import Driver
from neo4j.exceptions import ConstraintError

from cairn.commands.service import check_database
from cairn.ingest.correspondence.sync import reembed
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import get_settings
from cairn.schema.migrate import (
    READ_FACT_INDEX,
    READ_SECTION_INDEX,
    RECORD_VERSION,
    SCHEMA_VERSION,
    SECTION_INDEX_CONFIG,
    SECTION_TEXT_VERSION,
    migrate,
    schema_version,
    sections_to_reembed,
)
from cairn.schema.nodes import EMBEDDING_DIMENSIONS, VECTOR_INDEXED_LABELS, vector_index_name
from cairn.schema.section_text import embeddable_text

# Columns that change on every read of an index; everything else must be stable.
VOLATILE_INDEX_COLUMNS = ("lastRead", "readCount")
TEST_IDS = ["test-schema-dup-1", "test-schema-dup-2"]


def show(driver: Driver, what: str) -> list[dict[str, Any]]:
    """Every row of SHOW CONSTRAINTS / SHOW INDEXES, volatile counters removed, sorted by name."""
    records, _, _ = driver.execute_query(f"SHOW {what} YIELD * RETURN * ORDER BY name")
    rows = []
    for record in records:
        row = record.data()
        for column in VOLATILE_INDEX_COLUMNS:
            row.pop(column, None)
        rows.append(row)
    return rows


@pytest.fixture
def no_test_nodes(driver: Driver) -> Any:
    driver.execute_query("MATCH (n:Entity) WHERE n.id IN $ids DETACH DELETE n", ids=TEST_IDS)
    yield driver
    driver.execute_query("MATCH (n:Entity) WHERE n.id IN $ids DETACH DELETE n", ids=TEST_IDS)


def test_migrate_twice_is_a_no_op(driver: Driver) -> None:
    migrate(driver)  # the session fixture already migrated; this brings nothing new either way
    constraints, indexes = show(driver, "CONSTRAINTS"), show(driver, "INDEXES")
    assert constraints and indexes

    assert migrate(driver) == []

    assert show(driver, "CONSTRAINTS") == constraints
    assert show(driver, "INDEXES") == indexes


def test_migrate_recreates_a_dropped_index_and_reports_it(driver: Driver) -> None:
    records, _, _ = driver.execute_query(
        "SHOW INDEXES YIELD name, labelsOrTypes, properties, owningConstraint "
        "WHERE labelsOrTypes = ['Event'] AND properties = ['alias_of_decision'] "
        "AND owningConstraint IS NULL RETURN name"
    )
    assert len(records) == 1, "migrate should index Event.alias_of_decision"
    name = records[0]["name"]
    before = show(driver, "INDEXES")
    driver.execute_query(f"DROP INDEX `{name}`")
    try:
        assert migrate(driver) == [name]
    finally:
        migrate(driver)
    after = {r["name"]: r for r in show(driver, "INDEXES")}
    assert sorted(after) == [r["name"] for r in before]
    assert after[name]["state"] == "ONLINE"


@pytest.mark.parametrize("label", ["Entity", "CairnLock", "CairnSchema"])
def test_ids_have_a_uniqueness_constraint(driver: Driver, label: str) -> None:
    """Entity ids, and the two machinery nodes whose concurrent first MERGE must make one node."""
    records, _, _ = driver.execute_query(
        "SHOW CONSTRAINTS YIELD name, type, entityType, labelsOrTypes, properties "
        "WHERE labelsOrTypes = [$label] AND properties = ['id'] RETURN type, entityType",
        label=label,
    )
    assert [(r["type"], r["entityType"]) for r in records] == [("UNIQUENESS", "NODE")]


def test_seven_vector_indexes_with_384_dimensions_and_cosine(driver: Driver) -> None:
    records, _, _ = driver.execute_query(
        "SHOW INDEXES YIELD name, type, labelsOrTypes, properties, state, options "
        "WHERE type = 'VECTOR' RETURN name, labelsOrTypes, properties, state, options"
    )
    found = {r["name"]: r for r in records}
    expected = {vector_index_name(label): label for label in VECTOR_INDEXED_LABELS}
    assert len(VECTOR_INDEXED_LABELS) == 7
    assert set(found) == set(expected)
    for name, label in expected.items():
        row = found[name]
        assert row["labelsOrTypes"] == [label], name
        assert row["properties"] == ["embedding"], name
        assert row["state"] == "ONLINE", name
        config = row["options"]["indexConfig"]
        assert config["vector.dimensions"] == EMBEDDING_DIMENSIONS == 384, name
        assert config["vector.similarity_function"].upper() == "COSINE", name


def test_two_entities_with_the_same_id_are_refused(no_test_nodes: Driver) -> None:
    driver = no_test_nodes
    driver.execute_query("CREATE (:Entity {id: $id})", id=TEST_IDS[0])
    with pytest.raises(ConstraintError):
        driver.execute_query("CREATE (:Entity {id: $id})", id=TEST_IDS[0])
    records, _, _ = driver.execute_query("MATCH (n:Entity {id: $id}) RETURN count(n) AS c", id=TEST_IDS[0])
    assert records[0]["c"] == 1


def test_same_id_under_different_labels_is_refused(no_test_nodes: Driver) -> None:
    """The shared Entity label makes ids unique across Decision, Event, ... alike."""
    driver = no_test_nodes
    driver.execute_query("CREATE (:Entity:Decision {id: $id})", id=TEST_IDS[1])
    with pytest.raises(ConstraintError):
        driver.execute_query("CREATE (:Entity:Event {id: $id})", id=TEST_IDS[1])


def test_schema_version_is_recorded(driver: Driver) -> None:
    assert schema_version(driver) == SCHEMA_VERSION
    migrate(driver)
    assert schema_version(driver) == SCHEMA_VERSION
    records, _, _ = driver.execute_query("MATCH (m:CairnSchema) RETURN count(m) AS c")
    assert records[0]["c"] == 1


@pytest.mark.parametrize(("label", "read"), [("Section", READ_SECTION_INDEX), ("Fact", READ_FACT_INDEX)])
def test_migrate_rebuilds_a_quantized_vector_index(driver: Driver, label: str, read: str) -> None:
    """A database from before schema 4 (Section) or 5 (Fact) has the index quantized; migrate
    rebuilds it with full floats (correspondence search re-scores the Section index's neighbours
    and needs them found; fact search takes the Fact index's scores as exact cosines)."""
    name = vector_index_name(label)
    driver.execute_query(f"DROP INDEX {name}")
    driver.execute_query(
        f"CREATE VECTOR INDEX {name} FOR (n:{label}) ON n.embedding OPTIONS {{indexConfig: "
        f"{{`vector.dimensions`: {EMBEDDING_DIMENSIONS}, `vector.similarity_function`: 'cosine'}}}}"
    )
    assert migrate(driver) == [name]
    records, _, _ = driver.execute_query(read)
    config = records[0]["config"]
    assert {key: config[key] for key in SECTION_INDEX_CONFIG} == SECTION_INDEX_CONFIG
    assert config["vector.quantization.enabled"] is False
    assert migrate(driver) == []


@pytest.fixture
def old_section(driver: Driver, embedder: Embedder) -> Any:
    """A section as a schema 6 database holds it: embedded from its text with a knowledge path."""
    params = {"id": "test-schema-section", "body": "Terms agreed. Terms in knowledge/falcon/terms.md"}
    driver.execute_query(
        "CREATE (s:Entity:Section {id: $id, title: 'Terms', body: $body,"
        " embedding: [1.0] + [x IN range(2, $d) | 0.0], embedding_model: 'old'})",
        params,
        d=EMBEDDING_DIMENSIONS,
    )
    driver.execute_query(RECORD_VERSION, version=SECTION_TEXT_VERSION - 1)
    yield params
    driver.execute_query("MATCH (s:Section {id: $id}) DETACH DELETE s", id=params["id"])
    driver.execute_query(RECORD_VERSION, version=SCHEMA_VERSION)
    if sections_to_reembed(driver):  # the migration marked every stored section, even on a failure
        reembed(driver, embedder)


def test_migrate_marks_sections_embedded_from_older_text(
    driver: Driver, old_section: dict[str, str], embedder: Embedder
) -> None:
    """Schema 7 embeds sections without the text a role's mask strips (section_text.embeddable_text):
    a section embedded before is marked, and `reembed` (run by `cairn db migrate`) embeds it again."""
    read = "MATCH (s:Section {id: $id}) RETURN s.embedding AS v, s.embedding_model AS model"
    migrate(driver)
    assert schema_version(driver) == SCHEMA_VERSION
    records, _, _ = driver.execute_query(read, id=old_section["id"])
    # the old vector is gone at once (found by no search), and the service will not start on it
    assert records[0] == {"v": None, "model": None} and sections_to_reembed(driver) >= 1
    with pytest.raises(typer.Exit):
        check_database(get_settings(), demo=False)
    assert reembed(driver, embedder) >= 1 and sections_to_reembed(driver) == 0
    check_database(get_settings(), demo=False)
    migrate(driver)  # once upgraded, nothing more is marked
    assert sections_to_reembed(driver) == 0
    records, _, _ = driver.execute_query(read, id=old_section["id"])
    # the sentence that holds the path goes with it (schema 11)
    assert embeddable_text("Terms", old_section["body"]) == "Terms\nTerms agreed."
    expected = embedder.embed([embeddable_text("Terms", old_section["body"])])[0]
    assert records[0]["model"] == embedder.name
    assert records[0]["v"] == pytest.approx([float(x) for x in expected], abs=1e-6)
