"""uvicorn's HTTP/1.1 protocol with read deadlines for a request's head and body
(docs/design.md §HTTP hardening), which answers a request it cannot read as a coded error.

uvicorn bounds only the idle time between requests (``timeout_keep_alive``), and that timer stops
at the first byte of the next request: a client that opens a connection and sends nothing, or
sends its request head or body a byte at a time, held the connection (and its memory) open
without end. Here a request's head must be complete within ``head_timeout_s`` of the connection
opening (or of the previous response), and its body within ``body_timeout_s`` of the head;
otherwise the connection is closed. Nothing is timed while the application works on a request
whose body has arrived.

It also holds the headers every HTTP answer carries (``response_headers``), which the app's
middleware adds and this protocol's own refusals carry.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# Sent with every HTTP answer (docs/design.md §HTTP hardening). GraphiQL's page needs an inline
# script and eval (its bundle compiles with `new Function`); every other page gets neither.
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
GRAPHIQL_CSP = CSP.replace("script-src 'self'", "script-src 'self' 'unsafe-inline' 'unsafe-eval'")


# Every answer but the UI's static files may hold a caller's data or a passport, and a passport
# travels in X-* headers, not Authorization: a shared cache would store a GET answer by its URL
# alone and hand it to the next caller (a bundle zip, /dev/passport). None may be stored.
NO_STORE = (b"cache-control", b"no-store")
STATIC_PREFIX = "/ui/"


def response_headers(path: str) -> list[tuple[bytes, bytes]]:
    """What every HTTP answer to ``path`` carries: SECURITY_HEADERS, its Content-Security-Policy
    and, but for the UI's static files, ``Cache-Control: no-store``."""
    csp = GRAPHIQL_CSP if path == "/graphql" else CSP
    added = [*SECURITY_HEADERS, (b"content-security-policy", csp.encode())]
    if not path.startswith(STATIC_PREFIX):
        added.append(NO_STORE)
    return added


Waiting = Literal["head", "body"] | None

HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0

# What a request that is not HTTP/1.1 (a garbled request line, two Host headers, a head that stays
# incomplete past h11's size limit) is answered, before the application sees it: uvicorn answered
# it in plain text without the security headers; here in the error shape of every refusal
# (docs/design.md §Errors).
NOT_HTTP = json.dumps(
    {"errors": [{"message": "the request is not valid HTTP/1.1", "extensions": {"code": "BAD_REQUEST"}}]}
).encode()
NOT_HTTP_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(NOT_HTTP)).encode()),
    (b"connection", b"close"),
    *response_headers("/"),
]


class DeadlineH11Protocol(H11Protocol):
    """``H11Protocol`` that closes a connection whose request head or body is late (``http=`` of
    ``uvicorn.run``). Subclasses may change the two limits."""

    head_timeout_s: ClassVar[float] = HEAD_TIMEOUT_S
    body_timeout_s: ClassVar[float] = BODY_TIMEOUT_S

    _waiting: Waiting = None
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start the next request of the connection
        self._watch()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot read (``msg``, logged by uvicorn), coded."""
        for event in (
            h11.Response(status_code=400, headers=NOT_HTTP_HEADERS, reason=b"Bad Request"),
            h11.Data(data=NOT_HTTP),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm(None)
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Arm the deadline of what the connection waits for from the client, if it changed."""
        state = self.conn.their_state
        waiting: Waiting = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if waiting != self._waiting:
            self._arm(waiting)

    def _arm(self, waiting: Waiting) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._waiting = waiting
        if waiting is not None and not self.transport.is_closing():
            limit = self.head_timeout_s if waiting == "head" else self.body_timeout_s
            self._deadline = self.loop.call_later(limit, self._late)

    def _late(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()
