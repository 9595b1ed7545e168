"""The optional LLM client against a real HTTP stub: success, and each failure -> LLMUnavailable."""

from __future__ import annotations

import json
import socket
import time

import pytest

from cairn.runtime.llm import LLMClient, LLMResult, LLMUnavailable
from cairn.runtime.settings import Settings
from tests.llm_server import StubLLMServer, running_llm_server, stub_answer

SYSTEM = "Answer only from the evidence."
PROMPT = "Who owns the billing service?\n[1] Alice owns billing.\n\n[2] Bob reviews billing."


def llm_settings(url: str | None, *, model: str = "stub-model", timeout_s: float = 20) -> Settings:
    # Every LLM field is given explicitly so the developer's environment cannot leak in.
    return Settings(
        CAIRN_LLM_BASE_URL=url,
        CAIRN_LLM_MODEL=model,
        CAIRN_LLM_API_KEY="sk-test-secret-key",
        CAIRN_LLM_TIMEOUT_S=timeout_s,
    )


def free_port() -> int:
    """A port nothing listens on: bound, then released, so connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_settings_accept_aliases() -> None:
    settings = llm_settings("http://127.0.0.1:1/v1", timeout_s=3)
    assert settings.llm_base_url == "http://127.0.0.1:1/v1"
    assert settings.llm_model == "stub-model"
    assert settings.llm_timeout_s == 3.0


def test_completion_returns_text_model_and_usage() -> None:
    with running_llm_server() as url:
        client = LLMClient(llm_settings(url))
        assert client.configured
        assert client.model == "stub-model"
        result = client.complete(SYSTEM, PROMPT, max_tokens=200)

    assert isinstance(result, LLMResult)
    assert result.text == stub_answer(PROMPT)
    assert result.text == "Answer based on 2 evidence lines: Who owns the billing service?"
    assert result.model == "stub-model"
    assert result.prompt_tokens == len(SYSTEM.split()) + len(PROMPT.split())
    assert result.completion_tokens == len(result.text.split())
    assert result.raw["choices"][0]["message"]["content"] == result.text
    json.dumps(result.raw)  # raw must be storable in a trace as-is


def test_request_carries_model_messages_and_deterministic_settings() -> None:
    with StubLLMServer() as server:
        LLMClient(llm_settings(server.url)).complete(SYSTEM, PROMPT, max_tokens=64)
    (body,) = server.requests
    assert body["model"] == "stub-model"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 64
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PROMPT},
    ]


def test_unconfigured_client_refuses_without_network() -> None:
    client = LLMClient(llm_settings(None))
    assert not client.configured
    with pytest.raises(LLMUnavailable, match=r"^no LLM configured$"):
        client.complete(SYSTEM, PROMPT, max_tokens=50)


def test_blank_base_url_counts_as_unconfigured() -> None:
    assert not LLMClient(llm_settings("  ")).configured


def test_server_error_becomes_unavailable() -> None:
    with running_llm_server(fail_with=500) as url:
        client = LLMClient(llm_settings(url))
        with pytest.raises(LLMUnavailable, match="HTTP 500") as excinfo:
            client.complete(SYSTEM, PROMPT, max_tokens=50)
    assert "sk-test-secret-key" not in str(excinfo.value)


def test_auth_error_does_not_leak_the_key() -> None:
    with running_llm_server(fail_with=401) as url:
        client = LLMClient(llm_settings(url))
        with pytest.raises(LLMUnavailable, match="rejected the API key") as excinfo:
            client.complete(SYSTEM, PROMPT, max_tokens=50)
    assert "sk-test" not in str(excinfo.value)


def test_unreachable_port_fails_fast_with_reason() -> None:
    port = free_port()
    client = LLMClient(llm_settings(f"http://127.0.0.1:{port}/v1"))
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match="unreachable") as excinfo:
        client.complete(SYSTEM, PROMPT, max_tokens=50)
    assert time.monotonic() - started < 5.0
    message = str(excinfo.value)
    assert message.startswith("LLM endpoint unreachable: ")
    assert f"127.0.0.1:{port}" in message


def test_slow_server_times_out() -> None:
    with running_llm_server(delay_s=5.0) as url:
        client = LLMClient(llm_settings(url, timeout_s=0.5))
        started = time.monotonic()
        with pytest.raises(LLMUnavailable, match=r"^LLM timed out after 0\.5s$"):
            client.complete(SYSTEM, PROMPT, max_tokens=50)
        # One retry is allowed, so at most two attempts plus the client's short backoff.
        assert time.monotonic() - started < 4.0


def test_empty_answer_becomes_unavailable() -> None:
    with running_llm_server(empty=True) as url:
        client = LLMClient(llm_settings(url))
        with pytest.raises(LLMUnavailable, match=r"^LLM returned an empty answer$"):
            client.complete(SYSTEM, PROMPT, max_tokens=50)


def test_server_binds_requested_port() -> None:
    port = free_port()
    with running_llm_server(port) as url:
        assert url == f"http://127.0.0.1:{port}/v1"
        result = LLMClient(llm_settings(url)).complete(SYSTEM, "Hello", max_tokens=50)
    assert result.text == "Answer based on 0 evidence lines: Hello"
