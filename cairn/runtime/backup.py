"""Offline backup and restore of the embedded Neo4j (Community: `database dump` / `load`).

Community Edition has no online backup, so the server is stopped for the dump or load and
started again afterwards (it is left stopped if it was not running). For an external
server use its own tooling: `neo4j-admin database dump` on the host, or Aura snapshots.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from cairn.runtime import neo4j_server
from cairn.runtime.neo4j_server import Neo4jProcessError, admin_cmd, prepare_home
from cairn.runtime.settings import Settings

DATABASE = "neo4j"


def _admin(settings: Settings, *args: str) -> None:
    home = settings.neo4j_home
    env = {**os.environ, "NEO4J_HOME": str(home), "NEO4J_CONF": str(home / "conf")}
    result = subprocess.run(admin_cmd(settings, *args), capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise Neo4jProcessError(
            f"neo4j-admin {' '.join(args[:2])} failed:\n{(result.stdout + result.stderr)[-2000:]}"
        )


def _offline(settings: Settings) -> bool:
    if settings.neo4j_uri:
        raise Neo4jProcessError(
            "backup/restore here is for the embedded server; for an external Neo4j use "
            "`neo4j-admin database dump` on its host (see README)"
        )
    was_running = neo4j_server.status(settings).running
    if was_running:
        neo4j_server.stop(settings)
    neo4j_server.ensure_jars(settings)
    prepare_home(settings)
    return was_running


def backup(settings: Settings, target: Path) -> Path:
    """Dump the database to ``target/neo4j.dump``; returns the dump file."""
    target.mkdir(parents=True, exist_ok=True)
    dump = target / f"{DATABASE}.dump"
    dump.unlink(missing_ok=True)
    was_running = _offline(settings)
    try:
        _admin(settings, "database", "dump", DATABASE, f"--to-path={target}")
    finally:
        if was_running:
            neo4j_server.start(settings)
    return dump


def restore(settings: Settings, source: Path) -> None:
    """Replace the database with the dump in ``source`` (a folder holding neo4j.dump, or the file)."""
    folder = source if source.is_dir() else source.parent
    if source.is_file() and source.name != f"{DATABASE}.dump":
        staging = folder / ".cairn-restore"
        staging.mkdir(exist_ok=True)
        shutil.copy2(source, staging / f"{DATABASE}.dump")
        folder = staging
    if not (folder / f"{DATABASE}.dump").exists():
        raise Neo4jProcessError(f"no {DATABASE}.dump in {folder}")
    was_running = _offline(settings)
    try:
        _admin(
            settings, "database", "load", DATABASE, f"--from-path={folder}", "--overwrite-destination=true"
        )
    finally:
        if was_running:
            neo4j_server.start(settings)
