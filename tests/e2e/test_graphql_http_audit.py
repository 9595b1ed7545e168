"""The graphql-http server audit (GraphQL over HTTP conformance) against a live Cairn.

The audit (npm `graphql-http`, pinned) runs `scripts/graphql-http-audit.mjs` against the app
under uvicorn on loopback with the demo org, once per passport. A role that may introspect must
pass every audit that is not a MAY (the README's table: 58 ok, 3 notices); a role that may not
gets exactly the refusals the README documents as deliberate: the introspection query an audit
sends is refused (one warning, one error), and nothing else.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import Driver

from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import REPO_ROOT, Settings
from tests.e2e.conftest import load_acme
from tests.e2e.test_web_ui import LiveService

AUDIT_PACKAGES = ("graphql-http@1.23.1", "graphql@16.9.0")
SCRIPT = REPO_ROOT / "scripts" / "graphql-http-audit.mjs"


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("the audit runs on Node.js: npm and node are not on PATH")
    folder = tmp_path_factory.mktemp("graphql-http")
    subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefer-offline", *AUDIT_PACKAGES],
        cwd=folder,
        check=True,
        timeout=300,
        capture_output=True,
    )
    return folder


@pytest.fixture(scope="module")
def service(driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    load_acme(driver)  # the demo org as a fresh load writes it; shared when unchanged
    local = settings.model_copy(
        update={"host": "127.0.0.1", "passport_secret": None, "trace_dir": tmp_path_factory.mktemp("traces")}
    )
    with LiveService(local) as live:
        yield f"{live.url}/graphql"


def _audit(audit_dir: Path, url: str, passport: dict[str, str]) -> tuple[dict[str, int], str]:
    run = subprocess.run(
        ["node", str(SCRIPT), url],
        cwd=audit_dir,
        input=json.dumps(passport),
        text=True,
        capture_output=True,
        timeout=300,
    )
    lines = run.stdout.strip().splitlines()
    return json.loads(lines[-1]), run.stdout


def test_a_role_that_may_introspect_passes_every_must_and_should(
    audit_dir: Path, service: str, settings: Settings
) -> None:
    counts, report = _audit(
        audit_dir, service, headers_for(PolicyRegistry.load(settings.policy_file), "exec")
    )
    assert counts == {"ok": 58, "notice": 3, "warn": 0, "error": 0}, report
    # The notices are the MAY audits for queries over GET, which Cairn refuses on purpose.
    notices = [line for line in report.splitlines() if line.startswith("notice ")]
    assert len(notices) == 3 and all("GET" in line for line in notices), report


def test_a_role_that_may_not_introspect_is_refused_only_introspection(
    audit_dir: Path, service: str, settings: Settings
) -> None:
    counts, report = _audit(
        audit_dir, service, headers_for(PolicyRegistry.load(settings.policy_file), "staff")
    )
    assert counts == {"ok": 56, "notice": 3, "warn": 1, "error": 1}, report
    lines = report.splitlines()
    refused = [i for i, line in enumerate(lines) if line.startswith(("warn ", "error "))]
    assert [lines[i].split()[1] for i in refused] == ["2EA1", "28B9"], report  # the {variables} audits
    # Each is refused because its query asks `__type`, which this role may not introspect.
    assert all("introspection has been disabled" in lines[i + 1] for i in refused), report
