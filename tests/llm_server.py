"""A tiny OpenAI-compatible chat server so tests exercise the real HTTP path without a model.

Answers are deterministic so tests can assert on them: the reply to a chat completion is
``"Answer based on N evidence lines: <first line of the user prompt>"`` where N is the number of
non-blank lines after the first line of the last user message, and token usage is counted by
splitting on whitespace. ``replies`` maps a phrase of a system message to a fixed reply (a route
JSON for the factor router, say) so one server can answer two kinds of request. Failure modes
(HTTP errors, slowness, empty answers) let callers test their fallback to the LLM-free path.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["StubLLMServer", "create_app", "running_llm_server", "stub_answer"]


def stub_answer(user_prompt: str) -> str:
    """The answer the stub gives for a user prompt, exposed so tests need not re-derive it."""
    lines = user_prompt.splitlines()
    first = lines[0].strip() if lines else ""
    evidence = sum(1 for line in lines[1:] if line.strip())
    return f"Answer based on {evidence} evidence lines: {first}"


def _count_tokens(text: str) -> int:
    return len(text.split())


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status)


def create_app(
    *,
    fail_with: int | None = None,
    delay_s: float = 0.0,
    empty: bool = False,
    requests: list[dict[str, Any]] | None = None,
    replies: Mapping[str, str] | None = None,
) -> Starlette:
    """Build the app.

    ``fail_with`` makes every chat completion return that HTTP status; ``delay_s`` sleeps before
    answering (to trigger client timeouts); ``empty`` returns an empty assistant message; each
    request body is appended to ``requests`` if given, so tests can see what was sent; a request
    whose system message contains a key of ``replies`` is answered with its value.
    """
    counter = itertools.count(1)

    async def chat_completions(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' is required")
        if requests is not None:
            requests.append(body)
        if delay_s:
            await asyncio.sleep(delay_s)
        if fail_with is not None:
            return _error(fail_with, f"stub configured to fail with {fail_with}", "server_error")
        if body.get("stream"):
            return _error(400, "the stub server does not stream")

        messages: list[dict[str, Any]] = body["messages"]
        if not all(isinstance(m, dict) for m in messages):
            return _error(400, "each message must be an object")
        contents = [str(m.get("content") or "") for m in messages]
        users = [c for m, c in zip(messages, contents, strict=True) if m.get("role") == "user"]
        system = " ".join(c for m, c in zip(messages, contents, strict=True) if m.get("role") == "system")
        fixed = [reply for phrase, reply in (replies or {}).items() if phrase in system]
        text = "" if empty else fixed[0] if fixed else stub_answer(users[-1] if users else "")
        finish_reason = "stop"
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(max_tokens, int) and _count_tokens(text) > max_tokens:
            text = " ".join(text.split()[:max_tokens])
            finish_reason = "length"

        prompt_tokens = sum(_count_tokens(c) for c in contents)
        completion_tokens = _count_tokens(text)
        return JSONResponse(
            {
                "id": f"chatcmpl-stub-{next(counter)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": str(body.get("model") or "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish_reason,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    async def models(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": "stub", "object": "model", "created": 0, "owned_by": "cairn"}],
            }
        )

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


class StubLLMServer:
    """Runs :func:`create_app` under uvicorn in a daemon thread on 127.0.0.1.

    The listening socket is bound here (port 0 by default) before uvicorn starts, so the port is
    known up front and two test runs can never race for the same one.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        fail_with: int | None = None,
        delay_s: float = 0.0,
        empty: bool = False,
        replies: Mapping[str, str] | None = None,
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        app = create_app(
            fail_with=fail_with, delay_s=delay_s, empty=empty, requests=self.requests, replies=replies
        )
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port or 0))
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            # A slow-mode request still sleeping must not hold up test teardown.
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name=f"stub-llm-{self.port}",
            daemon=True,
        )

    def start(self, timeout_s: float = 10.0) -> str:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self._thread.is_alive():
                raise RuntimeError("stub LLM server exited during startup")
            if self._server.started:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{self.url}/models", timeout=1.0).status_code == 200:
                        return self.url
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"stub LLM server did not answer on {self.url} in {timeout_s}s")

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)
        self._sock.close()

    def __enter__(self) -> StubLLMServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_llm_server(
    port: int | None = None,
    *,
    fail_with: int | None = None,
    delay_s: float = 0.0,
    empty: bool = False,
) -> Iterator[str]:
    """Yield the base URL (``http://127.0.0.1:PORT/v1``) of a running stub; stop it on exit."""
    server = StubLLMServer(port, fail_with=fail_with, delay_s=delay_s, empty=empty)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
