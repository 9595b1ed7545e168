"""A factor file whose YAML repeats a key is refused whole: nothing written (review of stop 27).

PyYAML kept the last of two equal keys, so a factor file whose defaults named ``roles_allowed``
twice was written under the second list while its first lines showed the other. Now the file is
refused (``cairn.schema.unique_yaml``) with the file, the line and the key, before anything is
written; tests/unit/test_unique_yaml.py covers the policy and labelled-question files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from neo4j import Driver

from cairn.ingest.factors import DEMO_DIR, ingest_factor_dir
from cairn.ingest.fixtures import FixtureError
from cairn.schema.checksum import graph_checksum
from tests.yaml_repeats import repeat_after


def test_a_factor_file_repeating_a_key_is_refused_and_writes_nothing(
    empty_db: Driver, tmp_path: Path
) -> None:
    shutil.copytree(DEMO_DIR, tmp_path / "factors")
    domain = tmp_path / "factors" / "domain.yaml"
    anchor = "roles_allowed: [staff, manager, director, exec, writer]"
    _, line = repeat_after(
        domain, domain.read_text(encoding="utf-8"), anchor, "  roles_allowed: [staff]", domain.parent
    )
    before = graph_checksum(empty_db)
    with pytest.raises(FixtureError) as caught:
        ingest_factor_dir(empty_db, domain.parent)
    assert [(p.file, p.record_id) for p in caught.value.problems] == [("domain.yaml", None)]
    message = caught.value.problems[0].message
    assert f'in "domain.yaml", line {line},' in message and "duplicate key 'roles_allowed'" in message
    assert graph_checksum(empty_db) == before
