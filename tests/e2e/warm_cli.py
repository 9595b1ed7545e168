"""A warm CLI for the tests that need CLI processes of their own (the crash tests kill them, the
service tests start and stop `cairn serve`): one process imports the CLI and loads the model
once, then forks a fresh child for every command. Each child is a process of its own (its own
connections; killed or signalled like any other) that does not import torch and load the model
again, nor build the query model (ONNX Runtime's session, loaded by the parent from the cached
graph before its first fork). The parent never connects to Neo4j and never runs the model (no
torch code, so no OpenMP threads that a fork would lose), so a child starts clean.

Protocol, one line each way on the server's stdin/stdout, fields separated by NUL:
  run OUT ENV ARG...  -> the child's pid (stdout and stderr to the file OUT; ENV: JSON, set first)
  poll PID            -> its exit status (negative: the signal that ended it), or "running"
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


# --- the server (python -m tests.e2e.warm_cli) ------------------------------------------------------


# A child given VECTORS_ENV (a .npz of texts and their vectors, MemoEmbedder.save in
# tests/conftest.py) takes a text's vector from there and runs the model only for the others.
VECTORS_ENV = "CAIRN_TEST_VECTORS"


def saved_texts(saved: Any) -> list[str]:
    """The texts of a MemoEmbedder.save file (``saved``: its np.load), in order: one UTF-8 blob
    and the offsets that cut it."""
    blob, offsets = saved["text_bytes"].tobytes(), saved["text_offsets"].tolist()
    return [blob[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets)]


def _remember_vectors(path: str) -> None:
    import numpy as np

    from cairn.runtime.embedder import PASS, get_embedder

    model = get_embedder()
    with np.load(path) as saved:
        known = dict(zip(saved_texts(saved), saved["vectors"], strict=True))
    embed = model.embed

    def remembered(texts: Any, batch_size: int = PASS) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            known.update(zip(missing, embed(missing, batch_size), strict=True))
        if not texts:
            return embed(texts)
        return np.array([known[t] for t in texts], dtype=np.float32)

    model.embed = remembered  # type: ignore[method-assign]


def _child(out: str, env: dict[str, str], args: list[str]) -> None:
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.environ.update(env)
    if os.environ.get(VECTORS_ENV):
        _remember_vectors(os.environ[VECTORS_ENV])
    from cairn.cli import main
    from cairn.runtime.settings import get_settings

    get_settings.cache_clear()  # read again, with this command's environment
    sys.argv = ["cairn", *args]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _status(raw: int) -> int:
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def serve() -> None:
    import cairn.cli  # noqa: F401 (everything a command imports)
    from cairn.runtime.embedder import get_embedder

    model = get_embedder()  # loaded, not run: the children run it
    done: dict[int, int] = {}
    shared = False
    print("ready", flush=True)
    for line in sys.stdin:
        verb, *rest = line.rstrip("\n").split("\0")
        if verb == "run":
            if not shared:
                # The query model from the graph the test process exported (tests/e2e/conftest.py
                # `started`), built once here instead of in each child that serves or searches.
                model.prepare_query_model(export=False)
                shared = True
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                _child(rest[0], json.loads(rest[1]), rest[2:])
            reply = str(pid)
        elif verb == "poll":
            pid = int(rest[0])
            if pid not in done:
                got, raw = os.waitpid(pid, os.WNOHANG)
                if got:
                    done[pid] = _status(raw)
            reply = str(done[pid]) if pid in done else "running"
        else:
            reply = f"unknown verb {verb!r}"
        print(reply, flush=True)


# --- the client, in the test process -----------------------------------------------------------


def cli_environment() -> dict[str, str]:
    """The test process's environment as a user's CLI would have it: the collector left to its
    production setting (tests/conftest.py turns it off for the in-process apps only), and no
    tokenizer threads before a fork."""
    from tests.conftest import DEVELOPER_GC_YOUNG

    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    env.pop("CAIRN_GC_YOUNG")
    if DEVELOPER_GC_YOUNG is not None:
        env["CAIRN_GC_YOUNG"] = DEVELOPER_GC_YOUNG
    return env


class WarmCLI:
    """The server process, started once (a session fixture in tests/e2e/conftest.py); with
    ``wait=False`` its readiness is awaited later (wait_ready) while it loads."""

    def __init__(self, wait: bool = True) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.warm_cli"],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=cli_environment(),
        )
        self.ready = False
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        if not self.ready:
            assert self.ask() == "ready"
            self.ready = True

    def ask(self, *parts: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if parts:
            self.proc.stdin.write("\0".join(parts) + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def run(self, args: list[str], out: Path, **env: str) -> Run:
        """``cairn ARGS`` in a new child, with ``env`` on top of the test's environment."""
        self.wait_ready()
        return Run(self, int(self.ask("run", str(out), json.dumps(env), *args)), out)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class Run:
    """A command running in a child of the warm CLI: what the tests use of a Popen."""

    def __init__(self, cli: WarmCLI, pid: int, out: Path) -> None:
        self.cli, self.pid, self.out = cli, pid, out
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            got = self.cli.ask("poll", str(self.pid))
            self.returncode = None if got == "running" else int(got)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, None]:
        self.wait(timeout)
        return self.out.read_bytes(), None


if __name__ == "__main__":
    serve()
