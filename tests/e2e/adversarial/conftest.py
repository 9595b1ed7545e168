"""What the adversarial modules share: the app under attack, one client per module.

The client does not load data: each module names what it serves (``pytestmark =
pytest.mark.usefixtures("acme")``, or a data fixture of its own), and a module that wants the
server's exceptions as answers (a 500 is what it looks for) overrides ``client_options``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.runtime.settings import Settings

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
