"""What every executor is given and what it may raise."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.utils import timezone


@dataclass(frozen=True)
class ExecutionContext:
    """One attempt at one approved request.

    `params` is the approved revision, exactly; `idempotency_key` is the same on
    every attempt of that revision. `deadline` is when the lease runs out: an
    executor must give up (time out) before it, or the sweeper may decide the
    outcome without it.
    """

    request_id: str
    action_type: str
    target: dict[str, Any]
    params: dict[str, Any]
    idempotency_key: str
    attempt: int
    deadline: datetime
    agent_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def seconds_left(self, *, margin: float = 1.0, floor: float = 0.5) -> float:
        """Time left before the lease ends, less `margin`, never below `floor`."""
        return max(floor, (self.deadline - timezone.now()).total_seconds() - margin)


class ExecutionError(Exception):
    """An executor could not perform the side effect. `message` reaches reviewers."""

    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, code: str = "execution_failed") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class PermanentExecutionError(ExecutionError):
    """Trying again would not help (bad params, a 4xx answer): the request fails."""


class RetryableExecutionError(ExecutionError):
    """A transient failure where it is known the side effect did not happen, or
    where the executor is idempotent: the runner retries it with backoff, up to
    ``EXECUTION_MAX_ATTEMPTS``."""

    retryable = True


class Executor:
    """Subclass, set `name` (and `idempotent` when true), implement `run`.

    `run` returns a JSON-serialisable result (no floats: it is digested into the
    audit log and stored on the request) or raises an `ExecutionError`. Any other
    exception fails the request with its message; it is never retried, since it
    may have happened after the side effect.
    """

    name: ClassVar[str] = ""
    idempotent: ClassVar[bool] = False
    description: ClassVar[str] = ""
    # The params `run` reads: the rule editor suggests them as params.* paths.
    params: ClassVar[tuple[str, ...]] = ()

    def run(self, context: ExecutionContext) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<executor {self.name}>"
