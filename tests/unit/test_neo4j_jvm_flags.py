"""The embedded server's extra JVM flags and its class-data archive (docs/design.md §Embedded
Neo4j start-up): written when missing, mapped when whole, written again when torn."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from cairn.runtime.neo4j_server import (
    ADMIN_CLASS,
    C2_THRESHOLDS,
    MAIN_CLASS,
    Neo4jProcessError,
    _conf_text,
    admin_cmd,
    server_jvm_flags,
)
from cairn.runtime.settings import Settings


def test_extra_flags_are_split_and_no_archive_is_the_default(tmp_path: Path) -> None:
    settings = Settings(CAIRN_NEO4J_JVM_FLAGS=" -XX:+UseSerialGC  -Xss2m ", CAIRN_NEO4J_CLASS_ARCHIVE=None)
    assert settings.neo4j_class_archive is None
    assert server_jvm_flags(settings) == [*C2_THRESHOLDS, "-XX:+UseSerialGC", "-Xss2m"]


def test_c2_compiles_later_and_the_extra_flags_can_say_otherwise() -> None:
    """Four times the JVM's tier-4 thresholds (docs/design.md §Dossier queries, "JIT"), given
    first: the JVM takes the last value of a flag, so CAIRN_NEO4J_JVM_FLAGS overrides them."""
    flags = server_jvm_flags(Settings(CAIRN_NEO4J_JVM_FLAGS="", CAIRN_NEO4J_CLASS_ARCHIVE=None))
    assert flags == C2_THRESHOLDS
    assert "-XX:Tier4InvocationThreshold=20000" in flags and "-XX:Tier4BackEdgeThreshold=160000" in flags
    mine = server_jvm_flags(
        Settings(CAIRN_NEO4J_JVM_FLAGS="-XX:Tier4InvocationThreshold=5000", CAIRN_NEO4J_CLASS_ARCHIVE=None)
    )
    assert mine[-1] == "-XX:Tier4InvocationThreshold=5000"


def test_c1_only_keeps_the_tiered_code_cache() -> None:
    """Without C2 the JVM would reserve 48 MB of code cache, which filled mid-suite and hung a
    query whose compile failed (docs/design.md §Embedded Neo4j start-up): 240 MB, as tiered."""
    c1 = Settings(CAIRN_NEO4J_JVM_FLAGS="-XX:TieredStopAtLevel=1", CAIRN_NEO4J_CLASS_ARCHIVE=None)
    assert server_jvm_flags(c1) == [
        *C2_THRESHOLDS,
        "-XX:TieredStopAtLevel=1",
        "-XX:ReservedCodeCacheSize=240m",
    ]
    sized = Settings(
        CAIRN_NEO4J_JVM_FLAGS="-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=128m",
        CAIRN_NEO4J_CLASS_ARCHIVE=None,
    )
    assert server_jvm_flags(sized) == [
        *C2_THRESHOLDS,
        "-XX:TieredStopAtLevel=1",
        "-XX:ReservedCodeCacheSize=128m",
    ]
    tiered = Settings(CAIRN_NEO4J_JVM_FLAGS="-XX:TieredStopAtLevel=4", CAIRN_NEO4J_CLASS_ARCHIVE=None)
    assert server_jvm_flags(tiered) == [*C2_THRESHOLDS, "-XX:TieredStopAtLevel=4"]


def test_admin_flags_go_to_neo4j_admin_only() -> None:
    settings = Settings(
        CAIRN_NEO4J_JVM_FLAGS="-Xss2m",
        CAIRN_NEO4J_ADMIN_JVM_FLAGS=" -XX:TieredStopAtLevel=1 ",
        CAIRN_NEO4J_CLASS_ARCHIVE=None,
    )
    cmd = admin_cmd(settings, "database", "dump", "neo4j")
    assert "-XX:TieredStopAtLevel=1" in cmd and "-Xss2m" not in cmd
    assert cmd.index("-XX:TieredStopAtLevel=1") < cmd.index(ADMIN_CLASS) < cmd.index("dump")
    assert server_jvm_flags(settings) == [*C2_THRESHOLDS, "-Xss2m"]
    assert MAIN_CLASS not in cmd


def test_a_missing_archive_is_written_at_exit(tmp_path: Path) -> None:
    archive = tmp_path / "sub" / "classes.jsa"
    flags = server_jvm_flags(Settings(CAIRN_NEO4J_CLASS_ARCHIVE=archive))
    assert f"-XX:ArchiveClassesAtExit={archive}" in flags
    assert not any(f.startswith("-XX:SharedArchiveFile") for f in flags)
    assert archive.parent.is_dir()


def test_a_torn_archive_is_dropped_and_written_again(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("needs a Java runtime")
    archive = tmp_path / "classes.jsa"
    settings = Settings(CAIRN_NEO4J_CLASS_ARCHIVE=archive, CAIRN_NEO4J_HEAP="64m")
    # A small archive of its own (a JVM that only prints its version), whole and then torn.
    write = ["java", f"-XX:ArchiveClassesAtExit={archive}", "-version"]
    subprocess.run(write, capture_output=True, check=True)
    assert server_jvm_flags(settings)[-1] == f"-XX:SharedArchiveFile={archive}"
    archive.chmod(0o644)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    flags = server_jvm_flags(settings)
    assert not archive.exists()
    assert f"-XX:ArchiveClassesAtExit={archive}" in flags


def test_extra_conf_settings_follow_cairns_own() -> None:
    """CAIRN_NEO4J_CONF: neo4j.conf settings, ";"-separated, written after Cairn's own lines."""
    extra = " dbms.cypher.min_replan_interval=1h ;; server.db.query_cache_size=2000 "
    settings = Settings(CAIRN_NEO4J_CONF=extra)
    lines = _conf_text(settings).splitlines()
    assert lines[-2:] == ["dbms.cypher.min_replan_interval=1h", "server.db.query_cache_size=2000"]
    none = _conf_text(Settings(CAIRN_NEO4J_CONF="")).splitlines()
    assert none == lines[:-2] and none[-1] == "internal.server.bolt.connection_shutdown_wait_time=0s"


@pytest.mark.parametrize(
    "entry", ["min_replan_interval", "dbms.cypher.min_replan_interval", "Dbms.x=1", "a.b= 1"]
)
def test_an_extra_conf_entry_that_is_no_setting_is_refused_by_name(entry: str) -> None:
    with pytest.raises(ValidationError, match=f"CAIRN_NEO4J_CONF: {re.escape(repr(entry))}"):
        Settings(CAIRN_NEO4J_CONF=f"dbms.cypher.min_replan_interval=1h;{entry}")


def test_an_extra_conf_setting_cairn_writes_itself_is_refused_by_name() -> None:
    """Neo4j would refuse to start on a setting given twice: refused here, naming it."""
    settings = Settings(CAIRN_NEO4J_CONF="server.memory.heap.max_size=4g")
    with pytest.raises(Neo4jProcessError, match=r"CAIRN_NEO4J_CONF sets server\.memory\.heap\.max_size"):
        _conf_text(settings)
