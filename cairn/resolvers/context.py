"""Per-request GraphQL context: the verified caller (or why there is none) and the services,
and ``run_domain``, the one way a resolver runs domain code (docs/design.md §One driver model)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
from neo4j import Driver

from cairn.memory.ask import AskService
from cairn.policy.passport import Caller, PassportError
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class Services:
    """Long-lived collaborators, built once at start-up."""

    settings: Settings
    driver: Driver  # the one driver: sync, used by domain code in worker threads
    registry: PolicyRegistry
    asker: AskService
    trace_root: Path


@dataclass(frozen=True)
class RequestContext:
    services: Services
    caller: Caller | None
    refusal: PassportError | None


async def run_domain(work: Callable[[], T]) -> T:
    """Run blocking domain code (sync driver, sync LLM client) in a worker thread, off the event
    loop. Its errors go up untranslated: ``CodedErrors`` maps them once (docs/design.md §Errors)."""
    return await anyio.to_thread.run_sync(work)
