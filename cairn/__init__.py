"""Cairn: an organisation's memory as one Neo4j graph, served through policy-scoped GraphQL."""

__version__ = "0.1.0"
