"""Process-wide settings, read once from the environment (prefix-free, 12-factor style).

Neo4j connection fields are deliberately the standard ``NEO4J_*`` names so that a user
who already runs Neo4j can point Cairn at it without learning new variables.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[2]


# One neo4j.conf setting: a dotted lower-case key, "=", a value on one line.
CONF_ENTRY = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+=[^\s=][^\r\n]*")


def neo4j_conf_entries(value: str) -> list[str]:
    """The settings of a CAIRN_NEO4J_CONF value: ";"-separated, blanks around each ignored."""
    return [entry.strip() for entry in value.split(";") if entry.strip()]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", populate_by_name=True)

    # External Neo4j: when neo4j_uri is set Cairn starts nothing and uses that server (its
    # default database: set `initial.dbms.default_database` there to use another one).
    neo4j_uri: str | None = Field(default=None, alias="NEO4J_URI")
    neo4j_user: str = Field(default="neo4j", alias="NEO4J_USER")
    neo4j_password: str | None = Field(default=None, alias="NEO4J_PASSWORD")
    # How long a transaction is retried on transient errors (a restart, a leader switch) before
    # the outage is reported (the driver's own default would be 30 s).
    neo4j_retry_s: float = Field(default=15.0, alias="CAIRN_NEO4J_RETRY_S")

    # Embedded Neo4j (the default): where it lives and which loopback ports it takes.
    data_dir: Path = Field(default=REPO_ROOT / "var", alias="CAIRN_DATA_DIR")
    neo4j_jars_dir: Path = Field(default=REPO_ROOT / "neo4j" / "lib", alias="CAIRN_NEO4J_JARS")
    neo4j_pom: Path = Field(default=REPO_ROOT / "neo4j" / "pom.xml", alias="CAIRN_NEO4J_POM")
    bolt_port: int = Field(default=7687, alias="CAIRN_BOLT_PORT")
    http_port: int = Field(default=7474, alias="CAIRN_HTTP_PORT")
    neo4j_heap: str = Field(default="1g", alias="CAIRN_NEO4J_HEAP")
    neo4j_pagecache: str = Field(default="512m", alias="CAIRN_NEO4J_PAGECACHE")
    # Start-up of the server's JVM (docs/design.md §Embedded Neo4j start-up): extra flags, split
    # on spaces, and a class-data archive (made at the first clean stop, mapped by later starts).
    neo4j_jvm_flags: str = Field(default="", alias="CAIRN_NEO4J_JVM_FLAGS")
    neo4j_class_archive: Path | None = Field(default=None, alias="CAIRN_NEO4J_CLASS_ARCHIVE")
    # Extra flags of neo4j-admin's JVM (dump, load, the initial password), split on spaces.
    neo4j_admin_jvm_flags: str = Field(default="", alias="CAIRN_NEO4J_ADMIN_JVM_FLAGS")
    # Extra neo4j.conf settings of the embedded server, "key=value" separated by ";", besides
    # Cairn's own (docs/design.md §Embedded Neo4j start-up; the tests set the replan interval).
    neo4j_conf: str = Field(default="", alias="CAIRN_NEO4J_CONF")

    # Service.
    host: str = Field(default="127.0.0.1", alias="CAIRN_HOST")
    port: int = Field(default=8000, alias="CAIRN_PORT")
    policy_file: Path = Field(
        default=REPO_ROOT / "fixtures" / "policy" / "roles.yaml", alias="CAIRN_POLICY_FILE"
    )
    passport_secret: str | None = Field(default=None, alias="CAIRN_PASSPORT_SECRET")
    # Without a passport secret only requests whose Host (and Origin) is a loopback address are
    # answered (cairn.app.LoopbackOnly); these host names (comma-separated) are accepted too: a
    # test client's, or a local alias of this machine, never a name others can resolve.
    allowed_hosts: str = Field(default="", alias="CAIRN_ALLOWED_HOSTS")
    trace_dir: Path | None = Field(default=None, alias="CAIRN_TRACE_DIR")
    malloc_arenas: int = Field(default=2, alias="CAIRN_MALLOC_ARENAS")  # 0: glibc's default
    # The collector's young threshold once the service is warm (runtime/collector.py); 0: Python's.
    gc_young: int = Field(default=10_000, alias="CAIRN_GC_YOUNG")

    # The optional LLM (the embedding model is fixed: see runtime/embedder.py).
    llm_base_url: str | None = Field(default=None, alias="CAIRN_LLM_BASE_URL")
    llm_model: str = Field(default="local", alias="CAIRN_LLM_MODEL")
    llm_api_key: str = Field(default="not-needed", alias="CAIRN_LLM_API_KEY")
    llm_timeout_s: float = Field(default=20.0, alias="CAIRN_LLM_TIMEOUT_S")

    # Correspondence sync (docs/design.md §Correspondence): sections per write transaction, and
    # sections per model call (a write batch never crosses a window).
    correspondence_write_batch: int = Field(default=256, gt=0, alias="CAIRN_CORRESPONDENCE_WRITE_BATCH")
    correspondence_embed_window: int = Field(default=512, gt=0, alias="CAIRN_CORRESPONDENCE_EMBED_WINDOW")
    # Org-memory fixture ingest (cairn/ingest/org_memory.py): records per write transaction.
    fixture_write_batch: int = Field(default=500, gt=0, alias="CAIRN_FIXTURE_WRITE_BATCH")

    @field_validator("neo4j_conf")
    @classmethod
    def _conf_entries(cls, value: str) -> str:
        for entry in neo4j_conf_entries(value):
            if not CONF_ENTRY.fullmatch(entry):
                raise ValueError(f"CAIRN_NEO4J_CONF: {entry!r} is not a neo4j.conf 'key=value' setting")
        return value

    @property
    def embedded(self) -> bool:
        return self.neo4j_uri is None

    @property
    def neo4j_home(self) -> Path:
        return self.data_dir / "neo4j"

    @property
    def traces(self) -> Path:
        return self.trace_dir or (self.data_dir / "traces")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
