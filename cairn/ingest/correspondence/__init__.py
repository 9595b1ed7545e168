"""Correspondence: a long markdown file of numbered sections, synced append-only into the graph."""
