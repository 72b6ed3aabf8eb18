"""Grants and leases of claimed executions: the signed grant, renewals, late reports.

A claim's grant is a single-use token (stored as its hash) and a lease. The grant
document (hitl_controlplane.grants) is signed with the audit signing key, the key
decisions are signed with, and binds the claimant's nonce. Long tools renew the lease
(`renew_execution`); a report after the lease ran out is recorded and changes nothing
(`refuse_late_report`). The grant hash stays on a request failed for a lost lease, so a
late report still proves which claim it came from (it authorizes nothing: every use
checks the state first).
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from audit.chain import Actor, digest, record
from audit.signing import signer
from hitl_controlplane.canonical import format_timestamp
from hitl_controlplane.grants import grant_document, sign_grant

from .. import errors
from ..errors import DomainError
from ..models import ApprovalRequest
from ..states import State
from .core import SYSTEM, PersistedRefusal, RequestId, changing, refuse_state, transition

__all__ = [
    "grant_hash",
    "holds_grant",
    "lease_lost",
    "refuse_late_report",
    "renew_execution",
    "require_grant",
    "settle_lost_lease",
    "signed_grant",
]


def grant_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def signed_grant(request: ApprovalRequest, params: dict[str, Any], *, nonce: str) -> dict[str, Any]:
    """The `grant_signature` of a fresh grant on a locked request (its lease and attempt already moved on)."""
    assert request.lease_until is not None
    document = grant_document(
        request_id=str(request.pk),
        revision=request.current_revision,
        agent={"id": request.agent_id, "name": request.agent.name},
        action_type=request.action_type,
        params=params,
        idempotency_key=request.execution_key,
        nonce=nonce,
        attempt=request.attempts,
        lease_until=format_timestamp(request.lease_until),
    )
    return sign_grant(signer().current, document)


def require_grant(request: ApprovalRequest, token: str) -> None:
    if request.state != State.EXECUTING:
        raise refuse_state(request, State.EXECUTING)
    if not holds_grant(request, token):
        raise DomainError(errors.INVALID_GRANT, "That execution grant is not valid for this request.")


def holds_grant(request: ApprovalRequest, token: str) -> bool:
    return bool(request.grant_hash) and hmac.compare_digest(request.grant_hash, grant_hash(token))


def lease_lost(request: ApprovalRequest, token: str, now: datetime) -> bool:
    """`token` is the grant of a claim whose lease ran out: the request is (or is about to be)
    failed with `outcome_unknown`, and nothing the claimant reports now changes that.

    An agent's claim is lost the moment its lease ends. A server-side executor's is lost
    once the sweeper settled it (until then its report stands, as it always did: the
    sweeper may still retry an idempotent one under the same key).
    """
    if not holds_grant(request, token):
        return False
    if request.state == State.EXECUTING:
        return not request.executor and bool(request.lease_until and request.lease_until <= now)
    return request.state == State.FAILED and request.resolution_code == errors.OUTCOME_UNKNOWN


def settle_lost_lease(request: ApprovalRequest, *, now: datetime) -> None:
    """Fail a locked, executing request whose lease ran out, as the sweeper would."""
    if request.state == State.EXECUTING:
        # The grant hash stays: a late report still proves which claim it came from.
        transition(
            request,
            State.FAILED,
            actor=SYSTEM,
            metadata={"code": errors.OUTCOME_UNKNOWN},
            resolution_code=errors.OUTCOME_UNKNOWN,
            error="The execution lease ran out with no result.",
            finished_at=now,
        )


def refuse_late_report(
    request: ApprovalRequest, *, actor: Actor, succeeded: bool, result: Any, error: str, now: datetime
) -> None:
    """A report whose lease ran out: fail the request as the sweeper would (if it has not yet),
    record the report with its digests, and raise `lease_expired` once that is committed."""
    settle_lost_lease(request, now=now)
    record(
        "request.completed_late",
        actor=actor,
        request=request,
        metadata={
            "attempt": request.attempts,
            "succeeded": succeeded,
            "result": digest(result),
            **({"error": digest(error)} if error else {}),
        },
    )
    raise PersistedRefusal(
        errors.LEASE_EXPIRED,
        "The execution lease ran out before this report; the outcome stays unknown (recorded, not applied).",
        state=request.state,
    )


def renew_execution(request_id: RequestId, *, token: str, actor: Actor) -> ApprovalRequest:
    """Extend the lease of the claim `token` proves by EXECUTION_LEASE_SECONDS from now.

    For tools that run longer than one lease (the client renews in the background).
    A lease that already ran out is not renewed after the fact (`lease_expired`: the
    outcome is unknown, and the sweeper fails it); a wrong token is `invalid_grant`.
    """
    now = timezone.now()
    with changing(request_id) as request:
        ran_out = bool(request.lease_until and request.lease_until <= now)
        if lease_lost(request, token, now) or (ran_out and holds_grant(request, token)):
            raise DomainError(
                errors.LEASE_EXPIRED, "The execution lease already ran out; it is not renewed.", state=request.state
            )
        require_grant(request, token)
        request.lease_until = now + timedelta(seconds=settings.EXECUTION_LEASE_SECONDS)
        request.save(update_fields=["lease_until"])
        record(
            "request.execution_renewed",
            actor=actor,
            request=request,
            metadata={"attempt": request.attempts, "lease_until": request.lease_until.isoformat()},
        )
    return request
