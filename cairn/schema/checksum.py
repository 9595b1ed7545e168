"""A content checksum of the whole graph, to prove a backup round trip or an idempotent re-run.

Internal element ids are left out (they change on restore); nodes are identified by their
labels and properties, relationships by their endpoints' ``id``, type and properties.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from neo4j import Driver

ALL_NODES = "MATCH (n) RETURN labels(n) AS labels, properties(n) AS props"
ALL_RELATIONSHIPS = (
    "MATCH (a)-[r]->(b) RETURN a.id AS start, type(r) AS type, b.id AS end, properties(r) AS props"
)


def _plain(value: Any) -> Any:
    if hasattr(value, "iso_format"):
        return value.iso_format()
    return str(value)


def _canon(value: Any) -> bytes:
    # orjson, not json: the stored vectors are most of a graph's bytes, and json's float
    # formatting made a checksum of the demo org ~15x slower (a test takes one per example).
    return orjson.dumps(value, default=_plain, option=orjson.OPT_SORT_KEYS)


def graph_checksum(driver: Driver) -> str:
    """sha256 over every node (labels, properties) and relationship (start, type, end, properties)."""
    nodes, _, _ = driver.execute_query(ALL_NODES)
    rels, _, _ = driver.execute_query(ALL_RELATIONSHIPS)
    lines = sorted(_canon([sorted(r["labels"]), r["props"]]) for r in nodes)
    lines.append(b"--relationships--")
    lines += sorted(_canon([r["start"], r["type"], r["end"], r["props"]]) for r in rels)
    return hashlib.sha256(b"".join(line + b"\n" for line in lines)).hexdigest()
