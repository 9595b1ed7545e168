"""Dossiers (SPEC §7, notes 000 and 001): facts routed into dossiers by multi-vector voting,
read back through the caller's Scope, and the gardener that turns conversation blocks into
sticky tags and fact packets.

Modules, one job each: ``models`` (input validation), ``voting`` (the one-round-trip vote and
the decision rule), ``adjudicator`` (optional LLM override), ``lock`` (serialising dossier
changes), ``journal`` (provenance), ``summary`` (extractive summaries), ``governor`` (routing a
packet), ``curation`` (merge/archive/link/export), ``retriever`` (scoped reads), ``tagging``
(the three heuristics), ``blocks`` (blocks and their tags), ``gardener``, ``context``
(group-by-block hydration), ``files`` and ``demo`` (fixtures).
"""

from cairn.memory.dossiers.adjudicator import Adjudicator, LLMAdjudicator
from cairn.memory.dossiers.blocks import get_block_metadata, ingest_block, ingest_blocks, save_block_metadata
from cairn.memory.dossiers.context import Chunk, hydrate_chunks_with_metadata, hydrate_dossiers
from cairn.memory.dossiers.curation import (
    CurationError,
    archive_dossier,
    export_dossier,
    link_dossiers,
    merge_dossiers,
    related_dossiers,
)
from cairn.memory.dossiers.demo import load_demo_dossiers
from cairn.memory.dossiers.gardener import BlockNotFound, garden_all, garden_block, validation_counts
from cairn.memory.dossiers.governor import (
    RoutingResult,
    find_candidate_dossiers,
    ingest_packets,
    preview_route,
    process_fact_packet,
)
from cairn.memory.dossiers.models import AccessRefused, InputError, parse_block, parse_packet
from cairn.memory.dossiers.retriever import (
    format_for_context,
    get_dossier,
    get_dossier_history,
    retrieve_relevant_dossiers,
)
from cairn.memory.dossiers.tagging import classify_facts
from cairn.memory.dossiers.voting import DECISION_RULE

__all__ = [
    "DECISION_RULE",
    "AccessRefused",
    "Adjudicator",
    "BlockNotFound",
    "Chunk",
    "CurationError",
    "InputError",
    "LLMAdjudicator",
    "RoutingResult",
    "archive_dossier",
    "classify_facts",
    "export_dossier",
    "find_candidate_dossiers",
    "format_for_context",
    "garden_all",
    "garden_block",
    "get_block_metadata",
    "get_dossier",
    "get_dossier_history",
    "hydrate_chunks_with_metadata",
    "hydrate_dossiers",
    "ingest_block",
    "ingest_blocks",
    "ingest_packets",
    "link_dossiers",
    "load_demo_dossiers",
    "merge_dossiers",
    "parse_block",
    "parse_packet",
    "preview_route",
    "process_fact_packet",
    "related_dossiers",
    "retrieve_relevant_dossiers",
    "save_block_metadata",
    "validation_counts",
]
