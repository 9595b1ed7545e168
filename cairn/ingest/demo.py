"""The demo data set behind `cairn serve --demo`: every fixture family, loaded idempotently."""

from __future__ import annotations

from neo4j import Driver

from cairn.ingest.correspondence.demo import load_demo_correspondence
from cairn.ingest.correspondence.sync import reembed
from cairn.ingest.factors import load_demo_factors
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.memory.dossiers.demo import load_demo_dossiers
from cairn.runtime.settings import REPO_ROOT
from cairn.schema.migrate import migrate

FIXTURES = REPO_ROOT / "fixtures"


def load_demo(driver: Driver) -> None:
    """Migrate, then load the org memory, dossiers, factors and correspondence (safe on every start)."""
    migrate(driver)
    ingest_fixture_dir(driver, FIXTURES / "acme")
    load_demo_dossiers(driver)
    load_demo_factors(driver)
    if load_demo_correspondence(driver).stale_embeddings:  # a database from before schema 7
        reembed(driver)
