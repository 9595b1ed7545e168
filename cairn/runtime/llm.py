"""Optional access to an OpenAI-compatible chat model.

Cairn must answer questions without any LLM, so this module never decides *whether* to use one;
it only makes a single call when asked and turns every way that call can go wrong into one
exception type, ``LLMUnavailable``, whose message is safe to show to an end user. Callers catch
that one exception and fall back to the extractive (LLM-free) answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from cairn.runtime.settings import Settings

__all__ = ["LLMClient", "LLMResult", "LLMUnavailable"]

log = logging.getLogger(__name__)

# A dead or firewalled host should fail over to the extractive answer quickly, so connecting gets
# a much shorter budget than generating (which can legitimately take the full timeout).
_CONNECT_TIMEOUT_CAP_S = 5.0
# One retry absorbs a transient blip (a model server restarting) without doubling the wait on a
# server that is genuinely down.
_MAX_RETRIES = 1


@dataclass(frozen=True)
class LLMResult:
    """What one completion produced, kept whole so traces can show exactly what the model said."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    raw: dict[str, Any]


class LLMUnavailable(RuntimeError):
    """The LLM could not produce an answer; the message is short, user-facing and secret-free."""


class LLMClient:
    """A thin, failure-normalising wrapper around the ``openai`` client.

    A fresh ``openai`` client is opened per call rather than cached: it holds no state worth
    keeping between calls that may come from different worker threads, and an LLM call takes
    seconds, so the extra connection setup is noise.
    """

    def __init__(self, settings: Settings) -> None:
        base_url = (settings.llm_base_url or "").strip()
        self._base_url: str | None = base_url or None
        self._model = settings.llm_model
        self._api_key = settings.llm_api_key
        self._timeout_s = float(settings.llm_timeout_s)

    @property
    def configured(self) -> bool:
        return self._base_url is not None

    @property
    def model(self) -> str:
        return self._model

    def complete(self, system: str, prompt: str, max_tokens: int) -> LLMResult:
        """Ask the model once, blocking (the service calls it from a worker thread, docs/design.md
        §One driver model); any failure surfaces as ``LLMUnavailable`` so callers can fall back.

        Raises:
            LLMUnavailable: not configured, unreachable, timed out, HTTP error or empty answer.
        """
        base_url = self._require_base_url()
        try:
            with openai.OpenAI(
                base_url=base_url,
                api_key=self._api_key,
                timeout=self._timeout(),
                max_retries=_MAX_RETRIES,
            ) as client:
                completion = client.chat.completions.create(
                    model=self._model,
                    messages=_messages(system, prompt),
                    max_tokens=max_tokens,
                    temperature=0,
                )
        except openai.OpenAIError as exc:
            raise self._unavailable(exc) from exc
        return self._result(completion)

    # -- internals -------------------------------------------------------------------------------

    def _require_base_url(self) -> str:
        if self._base_url is None:
            raise LLMUnavailable("no LLM configured")
        return self._base_url

    def _timeout(self) -> openai.Timeout:
        return openai.Timeout(self._timeout_s, connect=min(self._timeout_s, _CONNECT_TIMEOUT_CAP_S))

    def _endpoint(self) -> str:
        """Host and port only: a base URL may carry credentials in its userinfo or query."""
        try:
            parts = urlsplit(self._base_url or "")
            host = parts.hostname or "?"
            return f"{host}:{parts.port}" if parts.port else host
        except ValueError:
            return "?"

    def _unavailable(self, exc: openai.OpenAIError) -> LLMUnavailable:
        """Reduce an ``openai`` error to a reason a user can act on.

        Response bodies are deliberately left out: providers echo parts of the API key in
        authentication errors, and bodies can be arbitrarily long.
        """
        log.warning("LLM call to %s failed: %s", self._endpoint(), type(exc).__name__)
        if isinstance(exc, openai.APITimeoutError):
            return LLMUnavailable(f"LLM timed out after {self._timeout_s:g}s")
        if isinstance(exc, openai.APIConnectionError):
            cause = _root_cause(exc)
            detail = f" ({cause})" if cause else ""
            return LLMUnavailable(f"LLM endpoint unreachable: {self._endpoint()}{detail}")
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return LLMUnavailable(f"LLM endpoint rejected the API key (HTTP {exc.status_code})")
        if isinstance(exc, openai.NotFoundError):
            return LLMUnavailable(
                f"LLM endpoint returned HTTP 404 (wrong base URL or unknown model {self._model!r})"
            )
        if isinstance(exc, openai.RateLimitError):
            return LLMUnavailable("LLM endpoint is rate limiting requests (HTTP 429)")
        if isinstance(exc, openai.APIStatusError):
            return LLMUnavailable(f"LLM endpoint returned HTTP {exc.status_code}")
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMUnavailable("LLM endpoint returned a malformed response")
        return LLMUnavailable(f"LLM call failed: {type(exc).__name__}")

    def _result(self, completion: ChatCompletion) -> LLMResult:
        # OpenAI-compatible servers vary: some return a bare string, no choices, or no usage.
        if not isinstance(completion, ChatCompletion):
            raise LLMUnavailable("LLM endpoint returned a malformed response")
        text = ""
        if completion.choices:
            text = (completion.choices[0].message.content or "").strip()
        if not text:
            raise LLMUnavailable("LLM returned an empty answer")
        usage = completion.usage
        return LLMResult(
            text=text,
            model=completion.model or self._model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            raw=completion.model_dump(mode="json"),
        )


def _messages(system: str, prompt: str) -> list[ChatCompletionMessageParam]:
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
    ]


def _root_cause(exc: BaseException) -> str:
    """The innermost error text, e.g. "[Errno 111] Connection refused", trimmed for display."""
    seen: set[int] = set()
    inner: BaseException = exc
    while inner.__cause__ is not None and id(inner.__cause__) not in seen:
        seen.add(id(inner))
        inner = inner.__cause__
    if inner is exc:
        return ""
    text = " ".join(str(inner).split()) or type(inner).__name__
    return text[:160]
