"""Per-request GraphQL context: the verified caller (or why there is none) and the services."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from neo4j import AsyncDriver, Driver

from cairn.memory.ask import AskService
from cairn.policy.passport import Caller, PassportError
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings


@dataclass(frozen=True)
class Services:
    """Long-lived collaborators, built once at start-up."""

    settings: Settings
    driver: AsyncDriver
    sync_driver: Driver  # for domain services that run in worker threads
    registry: PolicyRegistry
    asker: AskService
    trace_root: Path


@dataclass(frozen=True)
class RequestContext:
    services: Services
    caller: Caller | None
    refusal: PassportError | None
