"""Request bodies as an attacker sends them: too large, or too slowly (docs/design.md §HTTP
hardening).

An over-large body was answered by Starlette's limit in plain text ("Content Too Large"), the
one refusal without the API's error contract; it is now a GraphQL error with
``extensions.code`` ``PAYLOAD_TOO_LARGE``, still answered before the body is read whole: on its
Content-Length before a byte of it is read, and for a chunked body as soon as the bytes read
pass the limit (the test never sends the end of the body). Runs against the app under uvicorn on
loopback, over raw sockets, so the bytes on the wire are the attacker's.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import MAX_BODY_BYTES, create_app
from cairn.runtime.http import DeadlineH11Protocol
from cairn.runtime.settings import Settings

MIB = 1024 * 1024
HEAD = (
    "POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    "Accept: application/json\r\n{extra}\r\n"
)


class LiveService:
    """The Cairn app under uvicorn in a daemon thread, on a socket bound here to a free port."""

    def __init__(self, settings: Settings, **config: Any) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        options = {"log_level": "warning", "access_log": False, "timeout_graceful_shutdown": 2, **config}
        self._server = uvicorn.Server(uvicorn.Config(create_app(settings), **options))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="cairn-body-test", daemon=True
        )

    def __enter__(self) -> LiveService:
        self._thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not self._thread.is_alive():
                raise RuntimeError("the service exited during startup")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{self.port}/ready", timeout=2).status_code == 200:
                    return self
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError("the service did not become ready")

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def connect(self) -> socket.socket:
        conn = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        return conn


@pytest.fixture(scope="module")
def live(settings: Settings, driver: Driver) -> Iterator[LiveService]:
    """Takes ``driver`` for its schema migration: ``/ready`` waits for the current schema."""
    with LiveService(settings) as service:
        yield service


def _answer(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one HTTP/1.1 answer read off ``conn`` (Content-Length framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before an answer: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def _coded_413(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 413, (status, body[:200])
    assert headers["content-type"].startswith("application/json"), headers
    assert headers["x-content-type-options"] == "nosniff"
    errors = json.loads(body)["errors"]
    assert [e["extensions"]["code"] for e in errors] == ["PAYLOAD_TOO_LARGE"], errors


def test_a_declared_over_large_body_is_a_coded_413_before_it_is_sent(live: LiveService) -> None:
    with live.connect() as conn:
        conn.sendall(HEAD.format(extra=f"Content-Length: {64 * MIB}\r\n").encode())
        _coded_413(*_answer(conn))  # not one byte of the body was sent


def test_a_chunked_over_large_body_is_a_coded_413_before_it_ends(live: LiveService) -> None:
    with live.connect() as conn:
        conn.sendall(HEAD.format(extra="Transfer-Encoding: chunked\r\n").encode())
        # One byte past the limit, and the closing chunk never comes.
        for piece in [b"x" * MIB] * (MAX_BODY_BYTES // MIB) + [b"x"]:
            conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        _coded_413(*_answer(conn))


def test_a_body_at_the_limit_is_read(live: LiveService) -> None:
    query = json.dumps({"query": "{ __typename }"})
    padded = query[:-1] + " " * (MAX_BODY_BYTES - len(query)) + "}"
    with live.connect() as conn:
        conn.sendall(HEAD.format(extra=f"Content-Length: {len(padded)}\r\n").encode() + padded.encode())
        status, _, body = _answer(conn)
    assert status == 200, body[:200]
    assert json.loads(body)["data"] == {"__typename": "Query"}


def test_the_test_client_gets_the_coded_413_too(settings: Settings, neo4j_running: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        resp = client.post("/graphql", content=b"{" + b" " * MAX_BODY_BYTES + b"}")
    assert resp.status_code == 413
    assert resp.json()["errors"][0]["extensions"]["code"] == "PAYLOAD_TOO_LARGE"


# -- slow clients -------------------------------------------------------------------------------


class QuickDeadlines(DeadlineH11Protocol):
    """The served protocol with deadlines short enough for a test."""

    head_timeout_s = 1.0
    body_timeout_s = 2.0


@pytest.fixture(scope="module")
def timed(settings: Settings, driver: Driver) -> Iterator[LiveService]:
    with LiveService(settings, http=QuickDeadlines) as service:
        yield service


def _closed_after(conn: socket.socket, dribble: bytes, every_s: float = 0.2, bound_s: float = 6.0) -> float:
    """Send ``dribble`` a byte at a time until the server closes the connection; the seconds it took."""
    start = time.monotonic()
    conn.settimeout(every_s)
    for byte in [dribble[i : i + 1] for i in range(len(dribble))] or [b""] * int(bound_s / every_s):
        if time.monotonic() - start > bound_s:
            break
        try:
            if byte:
                conn.sendall(byte)
            if conn.recv(1024) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
    raise AssertionError(f"the connection was still open after {time.monotonic() - start:.1f} s")


def test_a_silent_connection_is_closed(timed: LiveService) -> None:
    with timed.connect() as conn:
        assert _closed_after(conn, b"") < QuickDeadlines.head_timeout_s + 1.5


def test_a_request_head_sent_slowly_is_cut_off(timed: LiveService) -> None:
    head = HEAD.format(extra="Content-Length: 2\r\n").encode() * 4  # longer than the dribble lasts
    with timed.connect() as conn:
        assert _closed_after(conn, head) < QuickDeadlines.head_timeout_s + 1.5


def test_a_request_body_sent_slowly_is_cut_off(timed: LiveService) -> None:
    with timed.connect() as conn:
        conn.sendall(HEAD.format(extra="Content-Length: 1000\r\n").encode())  # the head, at once
        assert _closed_after(conn, b"{" + b" " * 999) < QuickDeadlines.body_timeout_s + 1.5


def test_prompt_requests_on_one_connection_are_served(timed: LiveService) -> None:
    query = json.dumps({"query": "{ __typename }"}).encode()
    with timed.connect() as conn:
        for _ in range(2):  # keep-alive: the second request's head is timed afresh
            conn.sendall(HEAD.format(extra=f"Content-Length: {len(query)}\r\n").encode() + query)
            status, _, body = _answer(conn)
            assert status == 200 and json.loads(body)["data"] == {"__typename": "Query"}, body
            time.sleep(QuickDeadlines.head_timeout_s / 2)


# -- requests that are not HTTP (red-team pass 12) ----------------------------------------------


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
    ],
    ids=["garbled", "two-hosts"],
)
def test_a_request_that_is_not_http_gets_the_coded_400(request_bytes: bytes, timed: LiveService) -> None:
    """uvicorn answered these itself, in plain text without the security headers."""
    with timed.connect() as conn:
        conn.sendall(request_bytes)
        status, headers, body = _answer(conn)
    assert status == 400, (status, body[:200])
    assert headers["content-type"] == "application/json" and headers["x-content-type-options"] == "nosniff"
    assert [e["extensions"]["code"] for e in json.loads(body)["errors"]] == ["BAD_REQUEST"]
