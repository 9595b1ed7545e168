"""A content checksum of the whole graph, to prove a backup round trip or an idempotent re-run.

Internal element ids are left out (they change on restore); nodes are identified by their
labels and properties, relationships by their endpoints' ``id``, type and properties.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from neo4j import Driver

ALL_NODES = "MATCH (n) RETURN labels(n) AS labels, properties(n) AS props"
ALL_RELATIONSHIPS = (
    "MATCH (a)-[r]->(b) RETURN a.id AS start, type(r) AS type, b.id AS end, properties(r) AS props"
)


def _plain(value: Any) -> Any:
    if hasattr(value, "iso_format"):
        return value.iso_format()
    return str(value)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_plain, ensure_ascii=False)


def graph_checksum(driver: Driver) -> str:
    """sha256 over every node (labels, properties) and relationship (start, type, end, properties)."""
    nodes, _, _ = driver.execute_query(ALL_NODES)
    rels, _, _ = driver.execute_query(ALL_RELATIONSHIPS)
    lines = sorted(_canon([sorted(r["labels"]), r["props"]]) for r in nodes)
    lines.append("--relationships--")
    lines += sorted(_canon([r["start"], r["type"], r["end"], r["props"]]) for r in rels)
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()
