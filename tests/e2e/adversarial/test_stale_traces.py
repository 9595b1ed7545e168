"""A trace written by an earlier version is not shown (red-team pass 12, 2026-11-27).

A stored trace holds the text its reader was shown when it was written. One written before
schema 7 holds a section's title and body before the governance strip (its exec tags, decision
lines and access line, which a role that may not see those fields no longer reads anywhere), one
written before pass 11 a factor's mirrored fields: the same user and role, under the same policy,
read them back through ``trace`` and the bundle route, since only the request id, the user, role,
policy and scope name the trace's folder. Now a trace is read only in the form this version writes
(``TRACE_FILE``, named with ``TRACE_VERSION``): an earlier one answers exactly as a trace that does
not exist, and ``cairn db migrate`` deletes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app as cli
from cairn.memory import trace
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings, get_settings
from tests.e2e.adversarial.traces_common import (
    MISSING_ID,
    assert_like_missing,
    bundle_answer,
    serve,
    trace_answer,
    victim_asks,
)

# The names an earlier version stored a trace under. Version 3 showed external a letter's body with
# the blank line or stray "." its stripped lines left (test_stripped_section_traces.py).
EARLIER = ["trace.json.gz", "trace.json", "trace.v3.json.gz"]


@pytest.mark.parametrize("earlier", EARLIER)
def test_an_earlier_versions_trace_reads_as_missing(
    earlier: str,
    acme: Driver,
    settings: Settings,
    registry: PolicyRegistry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers = headers_for(registry, "director")
    with serve(settings, tmp_path) as client:
        rid = victim_asks(client, headers)
        trace.flush()
        (stored,) = tmp_path.glob(f"*/{rid}/{trace.TRACE_FILE}")
        data = stored.read_bytes()
        stored.unlink()
        # As the earlier version stored it (gzip'd, or plain JSON before that).
        old = stored.with_name(earlier)
        old.write_bytes(data if earlier.endswith(".gz") else trace.gzip.decompress(data))
        assert_like_missing(client, headers, bundle_answer(client, headers, rid))
        missing = trace_answer(client, headers, MISSING_ID)
        assert trace_answer(client, headers, rid) == missing
    monkeypatch.setenv("CAIRN_TRACE_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        migrated = CliRunner().invoke(cli, ["db", "migrate"])
    finally:
        get_settings.cache_clear()
    assert migrated.exit_code == 0, migrated.output
    assert not old.exists() and "deleted 1 trace(s)" in migrated.output
