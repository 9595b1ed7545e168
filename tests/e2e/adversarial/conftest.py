"""What the adversarial modules share: the app under attack, one client per module.

The client does not load data: each module names what it serves (``pytestmark =
pytest.mark.usefixtures("acme")``, or a data fixture of its own), and a module that wants the
server's exceptions as answers (a 500 is what it looks for) overrides ``client_options``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.correspondence.sync import sync_bytes
from cairn.ingest.factors import load_demo_factors
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema import unique_yaml
from tests.e2e.conftest import ROLES, gql, wipe

# The narrowing headers of a writer kept below the demo's hidden content (confidential blocks,
# medium and high letters): low sensitivity, the internal namespace only.
NARROW = {"X-Sensitivity-Ceiling": "low", "X-User-Namespaces": "internal"}


@pytest.fixture(scope="module")
def client_options() -> dict[str, Any]:
    """Keyword arguments of the module's TestClient."""
    return {}


@pytest.fixture(scope="module")
def client(settings: Settings, client_options: dict[str, Any]) -> Iterator[TestClient]:
    with TestClient(create_app(settings), **client_options) as c:
        yield c


@pytest.fixture(scope="module")
def demo_factors(driver: Driver) -> Iterator[Driver]:
    """The demo's factors and journals, alone in the database for the module."""
    wipe(driver)
    load_demo_factors(driver)
    yield driver
    wipe(driver)


@contextmanager
def synced_letters(
    driver: Driver, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory, text: str, name: str
) -> Iterator[Driver]:
    """A store holding only the letters file ``text`` (synced as ``name``), wiped afterwards."""
    wipe(driver)
    log = tmp_path_factory.mktemp("collisions") / "collisions.jsonl"
    sync_bytes(driver, text.encode(), name, collision_log=log, embedder=embedder)
    yield driver
    wipe(driver)


def data_as(client: TestClient, registry: PolicyRegistry, role: str, query: str, **variables: Any) -> Any:
    """The ``data`` of ``query`` asked as ``role``, which must answer without errors."""
    body = gql(client, query, headers_for(registry, role), **variables)
    assert not body.get("errors"), body
    return body["data"]


def demo_roles_with(
    tmp_path_factory: pytest.TempPathFactory, role: str, fields: dict[str, list[dict[str, Any]]]
) -> Path:
    """The demo policy file with ``role``'s field rules for some labels replaced (``fields``:
    label -> rules), written to a fresh folder: the policy a masking probe serves."""
    roles = unique_yaml.load_file(ROLES)
    roles["roles"][role]["fields"].update(fields)
    path = tmp_path_factory.mktemp("policy") / "roles.yaml"
    path.write_text(yaml.safe_dump(roles, sort_keys=False), encoding="utf-8")
    return path


@contextmanager
def served_with(
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    role: str,
    fields: dict[str, list[dict[str, Any]]],
) -> Iterator[tuple[TestClient, PolicyRegistry]]:
    """An app serving the demo policy with ``role``'s field rules for some labels replaced
    (``demo_roles_with``), and that policy."""
    path = demo_roles_with(tmp_path_factory, role, fields)
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        yield client, PolicyRegistry.load(path)


ORG_MEMORY = "mutation($p: JSON!) { ingestOrgMemory(payload: $p) { decisions } }"


def product_decision(id_: str, **fields: Any) -> dict[str, Any]:
    """A low-sensitivity product decision record a writer may store; ``fields`` override or add
    (the hostile-write tests vary one field of it)."""
    return {
        "id": id_,
        "option": "Keep the option",
        "timestamp": "2024-01-01T00:00:00Z",
        "decision_maker": "Writer",
        "tags": [],
        "importance": 0.5,
        "domain": "acme/product",
        "sensitivity": "low",
        "namespaces": ["internal"],
        "roles_allowed": ["writer"],
        **fields,
    }
