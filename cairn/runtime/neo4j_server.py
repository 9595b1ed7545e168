"""Run a real Neo4j Community server as a child process, from jars pinned in neo4j/pom.xml.

Why not a download: the workplace (and many corporate networks) only reach package
registries, and Maven Central carries the exact server and Browser jars. The launch line
mirrors the official ``neo4j console`` launcher for 5.26 (main class, classpath order,
``--add-opens``); without the ``java.nio`` opening vector index population can stall.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from neo4j.exceptions import AuthError

from cairn.errors import EXIT_FAILED, CairnError
from cairn.runtime import database
from cairn.runtime.settings import Settings, neo4j_conf_entries

MAIN_CLASS = "org.neo4j.server.CommunityEntryPoint"
ADMIN_CLASS = "org.neo4j.cli.AdminTool"
JVM_OPENS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-XX:+UseG1GC",
    "-XX:-OmitStackTraceInFastThrow",
    "-Djdk.tls.ephemeralDHKeySize=2048",
    "-Dfile.encoding=UTF-8",
    # New Lucene segments go to their files (read through the OS page cache and mmap) instead of
    # Lucene's RAM cache: the full-float vectors of a RAM-cached segment are read float by float
    # (each read crossing a buffer boundary throws and retries), which made every vector index
    # query after a write several times slower until the next checkpoint (docs/design.md
    # §Dossier queries, "Fresh index segments").
    "-Dorg.neo4j.kernel.api.impl.index.storage.DirectoryFactory.max_cached_mb=0",
]
PID_FILE = "run/cairn-neo4j.pid"
JARS_STAMP = ".pom-sha256"


class Neo4jProcessError(CairnError, RuntimeError):
    """A problem starting or stopping the embedded server, phrased for the person at the shell."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__("NEO4J_PROCESS", message)


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    bolt_uri: str
    http_url: str
    version: str | None
    home: Path


def _require(tool: str, install_hint: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise Neo4jProcessError(f"'{tool}' was not found on PATH. {install_hint}")
    return path


def ensure_jars(settings: Settings) -> Path:
    """Fetch the pinned jars with Maven once; refetch only when neo4j/pom.xml changes."""
    jars = settings.neo4j_jars_dir
    pom_hash = hashlib.sha256(settings.neo4j_pom.read_bytes()).hexdigest()
    stamp = jars / JARS_STAMP
    if stamp.exists() and stamp.read_text().strip() == pom_hash:
        return jars
    mvn = _require("mvn", "Install Apache Maven 3.8+ (Debian: apt-get install maven).")
    _require("java", "Install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless).")
    if jars.exists():
        shutil.rmtree(jars)
    cmd = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(settings.neo4j_pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={jars}",
        "-DincludeScope=runtime",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise Neo4jProcessError(
            "Maven could not fetch the Neo4j jars (is Maven Central reachable?):\n"
            + (result.stdout + result.stderr)[-2000:]
        )
    stamp.write_text(pom_hash)
    return jars


def _classpath(settings: Settings) -> str:
    home = settings.neo4j_home
    return os.pathsep.join([f"{home}/plugins/*", f"{home}/conf/*", f"{settings.neo4j_jars_dir}/*"])


def _conf_text(settings: Settings) -> str:
    home = settings.neo4j_home
    own = [
        "# Written by cairn; edit CAIRN_* settings instead of this file.",
        f"server.directories.data={home}/data",
        f"server.directories.logs={home}/logs",
        f"server.directories.run={home}/run",
        f"server.directories.plugins={home}/plugins",
        f"server.directories.import={home}/import",
        f"server.directories.lib={settings.neo4j_jars_dir}",
        "server.default_listen_address=127.0.0.1",
        "server.default_advertised_address=127.0.0.1",
        f"server.bolt.listen_address=127.0.0.1:{settings.bolt_port}",
        f"server.bolt.advertised_address=127.0.0.1:{settings.bolt_port}",
        "server.bolt.enabled=true",
        f"server.http.listen_address=127.0.0.1:{settings.http_port}",
        f"server.http.advertised_address=127.0.0.1:{settings.http_port}",
        "server.http.enabled=true",
        # Over HTTP Cairn serves Neo4j Browser (which itself talks Bolt) and the discovery
        # document it reads, nothing else: the transactional and Query API endpoints (Cypher
        # over HTTP with the password) and unmanaged extensions are not mounted, and Bolt,
        # which answers only once the HTTP server has started, answers sooner
        # (docs/design.md §Embedded Neo4j start-up).
        "server.http_enabled_modules=BROWSER",
        # Neo4j sends every HTTP answer with Access-Control-Allow-Origin set to this value,
        # "*" by default: any page in this machine's browser could read the discovery
        # document (version, Bolt address). Naming the Browser's own origin lets only it read.
        f"dbms.security.http_access_control_allow_origin=http://127.0.0.1:{settings.http_port}",
        "server.https.enabled=false",
        "dbms.security.auth_enabled=true",
        # Bolt takes a WebSocket from a page of any origin (the Browser talks Bolt that way;
        # Neo4j checks no Origin there): after 3 failed logins (Neo4j's default) such a page
        # would lock user neo4j out for 5 s, Cairn's own logins included. The password is 48
        # random hex characters, so failed logins lock nothing.
        "dbms.security.auth_max_failed_attempts=0",
        f"server.memory.heap.initial_size={settings.neo4j_heap}",
        f"server.memory.heap.max_size={settings.neo4j_heap}",
        f"server.memory.pagecache.size={settings.neo4j_pagecache}",
        "dbms.usage_report.enabled=false",
        "db.tx_log.rotation.retention_policy=1 days",
        # Bolt's own waits at shutdown, 5 s each by default, come after both databases have
        # stopped and checkpointed: nothing is left to drain (docs/design.md §Embedded Neo4j
        # start-up).
        "internal.server.bolt.thread_pool_shutdown_wait_time=0s",
        "internal.server.bolt.connection_shutdown_wait_time=0s",
    ]
    # CAIRN_NEO4J_CONF's settings after Cairn's own. Neo4j refuses to start on a setting given
    # twice (strict validation), so one of Cairn's own is refused here, by name.
    extra = neo4j_conf_entries(settings.neo4j_conf)
    written = {line.split("=", 1)[0] for line in own if not line.startswith("#")}
    for entry in extra:
        if entry.split("=", 1)[0] in written:
            raise Neo4jProcessError(
                f"CAIRN_NEO4J_CONF sets {entry.split('=', 1)[0]}, which Cairn writes itself (neo4j.conf)"
            )
    return "\n".join([*own, *extra, ""])


# C1-only compilation (tiers 1-3: no C2), and the flag that sizes the code cache.
_C1_ONLY = re.compile(r"-XX:TieredStopAtLevel=[1-3]")
_CODE_CACHE = "-XX:ReservedCodeCacheSize="


# C2 (tier 4) compiles a method only after 4x the JVM's default invocations/loops. Neo4j's
# compiler threads took about 60% of its CPU during an ingest and did not settle over repeated
# ingests (mostly C2: ~150 tier-4 compiles and ~200 deoptimised methods per LoCoMo conversation,
# methods a workload change pushed out again); these thresholds cut that compile CPU by about a
# third while the work itself stayed as fast (docs/design.md §Dossier queries, "JIT"). Given
# before CAIRN_NEO4J_JVM_FLAGS, which can set them otherwise (the JVM takes the last).
C2_THRESHOLDS = [
    "-XX:Tier4InvocationThreshold=20000",
    "-XX:Tier4MinInvocationThreshold=2400",
    "-XX:Tier4CompileThreshold=60000",
    "-XX:Tier4BackEdgeThreshold=160000",
]


def server_jvm_flags(settings: Settings) -> list[str]:
    """The server's extra JVM flags (not the admin tool's): ``C2_THRESHOLDS``, CAIRN_NEO4J_JVM_FLAGS, and with
    CAIRN_NEO4J_CLASS_ARCHIVE the class-data archive, mapped when it exists and otherwise
    written when this JVM exits cleanly (Java 17's dynamic AppCDS; a JVM that cannot use an
    archive warns in the console log and starts without it)."""
    flags = [*C2_THRESHOLDS, *settings.neo4j_jvm_flags.split()]
    if any(_C1_ONLY.fullmatch(f) for f in flags) and not any(f.startswith(_CODE_CACHE) for f in flags):
        # Without C2 the JVM reserves a 48 MB code cache instead of the tiered 240 MB: it filled
        # mid-suite, a Cypher compile failed and that query's plan-cache entry never completed.
        flags.append(f"{_CODE_CACHE}240m")
    archive = settings.neo4j_class_archive
    if archive is not None:
        if archive.exists() and not _maps(settings, archive):
            archive.unlink()  # torn (its JVM was killed while writing it): written again
        if archive.exists():
            flags.append(f"-XX:SharedArchiveFile={archive}")
        else:
            archive.parent.mkdir(parents=True, exist_ok=True)
            # Writing it logs a warning per class it leaves out (some thousands): not wanted in
            # the console log.
            flags += [f"-XX:ArchiveClassesAtExit={archive}", "-Xlog:cds*=off"]
    return flags


def admin_cmd(settings: Settings, *args: str) -> list[str]:
    """``neo4j-admin ARGS`` with CAIRN_NEO4J_ADMIN_JVM_FLAGS (docs/design.md §Embedded Neo4j start-up)."""
    return java_cmd(settings, ADMIN_CLASS, *args, jvm_flags=settings.neo4j_admin_jvm_flags.split())


def _maps(settings: Settings, archive: Path) -> bool:
    """Whether a JVM starts with ``archive`` (a fraction of a second): one that cannot use it for
    another Java or other jars starts without it, but a torn archive aborts the JVM."""
    java = _require("java", "Install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless).")
    heap = settings.neo4j_heap
    cmd = [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:ErrorFile=/dev/null", f"-XX:SharedArchiveFile={archive}"]
    result = subprocess.run([*cmd, "-version"], capture_output=True, check=False)
    return result.returncode == 0


def java_cmd(settings: Settings, main_class: str, *args: str, jvm_flags: Sequence[str] = ()) -> list[str]:
    java = _require("java", "Install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless).")
    home = settings.neo4j_home
    return [
        java,
        f"-Xms{settings.neo4j_heap}",
        f"-Xmx{settings.neo4j_heap}",
        *JVM_OPENS,
        *jvm_flags,
        "-cp",
        _classpath(settings),
        f"-Dneo4j.home={home}",
        main_class,
        *args,
    ]


def prepare_home(settings: Settings) -> None:
    home = settings.neo4j_home
    # The store, its logs and transaction files hold every node in plain text, whatever the roles:
    # readable by this user only, like the password file (docs/design.md §HTTP hardening).
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)
    for sub in ("conf", "data", "logs", "run", "plugins", "import"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    (home / "conf" / "neo4j.conf").write_text(_conf_text(settings))
    if not (home / "data" / "dbms" / "auth.ini").exists():
        cmd = admin_cmd(settings, "dbms", "set-initial-password", database.password(settings))
        env = {**os.environ, "NEO4J_HOME": str(home), "NEO4J_CONF": str(home / "conf")}
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            raise Neo4jProcessError(
                "Could not set the initial Neo4j password:\n" + (result.stdout + result.stderr)[-2000:]
            )


def _read_pid(settings: Settings) -> int | None:
    path = settings.neo4j_home / PID_FILE
    if not path.exists():
        return None
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError, PermissionError):
        return None
    return pid


def status(settings: Settings) -> ServerStatus:
    pid = _read_pid(settings)
    version = database.embedded_version(settings) if pid else None
    return ServerStatus(
        running=pid is not None and version is not None,
        pid=pid,
        bolt_uri=database.bolt_uri(settings),
        http_url=f"http://127.0.0.1:{settings.http_port}/browser/",
        version=version,
        home=settings.neo4j_home,
    )


def start(settings: Settings, timeout_s: float = 180.0) -> ServerStatus:
    """Start the server in the background and return once Bolt answers a query."""
    if settings.neo4j_uri:
        raise Neo4jProcessError("NEO4J_URI is set: Cairn uses that server and starts nothing.")
    if _read_pid(settings) is not None:
        return _wait_for_bolt(settings, timeout_s)
    ensure_jars(settings)
    prepare_home(settings)
    home = settings.neo4j_home
    log = (home / "logs" / "console.log").open("ab")
    env = {**os.environ, "NEO4J_HOME": str(home), "NEO4J_CONF": str(home / "conf")}
    proc = subprocess.Popen(
        java_cmd(
            settings,
            MAIN_CLASS,
            f"--home-dir={home}",
            f"--config-dir={home / 'conf'}",
            "--console-mode",
            jvm_flags=server_jvm_flags(settings),
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    (home / PID_FILE).write_text(str(proc.pid))
    return _wait_for_bolt(settings, timeout_s, proc)


def _wait_for_bolt(
    settings: Settings, timeout_s: float, proc: subprocess.Popen[bytes] | None = None
) -> ServerStatus:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = (settings.neo4j_home / "logs" / "console.log").read_text(errors="replace")
            raise Neo4jProcessError(
                f"Neo4j exited with code {proc.returncode} during start-up:\n{tail[-3000:]}"
            )
        try:
            if database.embedded_version(settings) is not None:
                return status(settings)
        except AuthError as exc:
            raise Neo4jProcessError(
                f"Neo4j answered but refused the password in {settings.neo4j_home / database.PASSWORD_FILE}"
            ) from exc
        # A probe before Bolt listens is refused at once; once Bolt listens it waits for the server
        # to finish starting. A short pause: every start ends up to one pause after it is ready.
        time.sleep(0.1)
    raise Neo4jProcessError(
        f"Neo4j did not answer on {database.bolt_uri(settings)} within {timeout_s:.0f}s; "
        f"see {settings.neo4j_home / 'logs'}"
    )


def stop(settings: Settings, timeout_s: float = 120.0) -> bool:
    """Stop cleanly (SIGTERM lets Neo4j checkpoint); returns False when nothing was running."""
    pid = _read_pid(settings)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        _reap(pid)
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
    (settings.neo4j_home / PID_FILE).unlink(missing_ok=True)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status when the server is our own child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
