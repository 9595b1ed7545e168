"""The demo correspondence (fixtures/correspondence/acme-letters.md), loaded for `cairn serve --demo`."""

from __future__ import annotations

from neo4j import Driver

from cairn.ingest.correspondence.collisions import default_log_path
from cairn.ingest.correspondence.sync import SyncReport, sync_file
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import REPO_ROOT, Settings, get_settings

DEMO_FILE = REPO_ROOT / "fixtures" / "correspondence" / "acme-letters.md"
DEMO_SOURCE = "acme-letters"


def load_demo_correspondence(
    driver: Driver, settings: Settings | None = None, embedder: Embedder | None = None
) -> SyncReport:
    """Sync the demo letters (idempotent: a second call creates nothing)."""
    settings = settings or get_settings()
    return sync_file(
        driver, DEMO_FILE, source=DEMO_SOURCE, collision_log=default_log_path(settings), embedder=embedder
    )
