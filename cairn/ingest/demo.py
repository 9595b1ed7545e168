"""The demo data set behind `cairn serve --demo`: every fixture family, loaded idempotently."""

from __future__ import annotations

from neo4j import Driver

from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.runtime.settings import REPO_ROOT
from cairn.schema.migrate import migrate

FIXTURES = REPO_ROOT / "fixtures"


def load_demo(driver: Driver) -> None:
    """Migrate, then load the acme org memory (safe to run on every start)."""
    migrate(driver)
    ingest_fixture_dir(driver, FIXTURES / "acme")
