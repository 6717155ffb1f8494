"""Typed client for the SAgents lifecycle service.

`sagents_api` is generated from the service's OpenAPI document (`clients/python/generate`):
one module per operation, one class per schema. This package adds what every caller needs:
a client that authenticates with a token and gives each write an `Idempotency-Key`, and
`ok()`, which returns a call's parsed answer or raises `SagentsError` with the problem+json's
`code` and `detail`.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

import httpx

from sagents_api import AuthenticatedClient
from sagents_api.types import Response

__all__ = ["SagentsError", "connect", "ok"]

T = TypeVar("T")


class SagentsError(Exception):
    """A call the service refused: its HTTP status and its problem+json."""

    def __init__(self, status: int, problem: dict[str, Any] | None) -> None:
        self.status = status
        self.problem = problem or {}
        self.code: str | None = self.problem.get("code")
        self.detail: str | None = self.problem.get("detail") or self.problem.get("title")
        super().__init__(f"{status} {self.code or ''}: {self.detail or 'request failed'}")


def _idempotency_key(request: httpx.Request) -> None:
    if request.method != "GET" and "idempotency-key" not in request.headers:
        request.headers["idempotency-key"] = str(uuid.uuid4())


def connect(base_url: str, token: str, *, timeout: float = 30.0) -> AuthenticatedClient:
    """A client that sends `token` with every call; a write without an `Idempotency-Key` gets
    a fresh one, so a retried call is answered once."""
    return AuthenticatedClient(
        base_url=base_url,
        token=token,
        timeout=httpx.Timeout(timeout),
        httpx_args={"event_hooks": {"request": [_idempotency_key]}},
    )


def ok(response: Response[T]) -> T:
    """The parsed answer of a `*.sync_detailed(...)` call, or `SagentsError` for any status
    that is not 2xx (or 304)."""
    status = int(response.status_code)
    if 200 <= status < 300 or status == 304:
        return response.parsed  # type: ignore[return-value]
    try:
        problem = httpx.Response(status, content=response.content).json()
    except ValueError:
        problem = None
    raise SagentsError(status, problem if isinstance(problem, dict) else None)
