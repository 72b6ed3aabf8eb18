"""The execution handshake: the only way a helper shipped here runs an approved call.

    result = run_approved(cp, resume, call, send_email)      # or await arun_approved(acp, ...)

1. The decision: the resume must verify as the server's signed decision for `call`, the
   call this client submitted (decisions.verify_decision), and be an approval.
2. Claim with a fresh nonce: the server re-validates, takes the lease and answers with
   the grant token, the exact approved params and `grant_signature`.
3. The grant (grants.verify_grant): signed by the server, it binds the decision's
   request, revision, agent, action type and approved params digest, and this nonce,
   and the params the tool will receive are the granted ones.
4. Run the tool with exactly the granted params, renewing the lease in the background
   while it runs (a long tool keeps its claim; a host that died lets it run out).
5. Complete: succeeded with the result (the server audits its keyed digest), or failed
   with the exception's repr (then the exception propagates).

Any failure in 1-3 raises DecisionRefused and nothing runs. A call that was claimed
before (a restored state, a retried step, a second process) is not run again: the tool's
result is the text "Not run: already executed (request <id>, <state>/<resolution>)".
A claim the server refuses for another reason (re-validation) raises ControlPlaneError.
With no public key configured nothing can be verified (the client warned once): the
claim answer's params must still equal the resume's, and the call runs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..decisions import DecisionRefused, SubmittedCall, verify_decision
from ..grants import new_nonce, verify_grant
from ._core import ApprovalRejected, ControlPlaneError, Resume, jsonable

if TYPE_CHECKING:  # the clients import this module for their decorators
    from .asynchronous import AsyncControlPlane
    from .synchronous import ControlPlane

__all__ = [
    "ALREADY_EXECUTED",
    "Claimed",
    "aclaim_approved",
    "arun_approved",
    "claim_approved",
    "run_approved",
]

log = logging.getLogger("hitl_controlplane")

ALREADY_EXECUTED = "Not run: already executed (request {request_id}, {state}/{resolution})"
# A second claim of a call that went through a claim: refused with one of these.
_CLAIMED_BEFORE = ("already_claimed", "illegal_transition")
# Failures that mean "refused before running", not "ran": a second claim after one of
# these is answered with the refusal, not "already executed".
_REFUSED_BEFORE_RUNNING = frozenset(
    {
        "approval_expired",
        "target_changed_reapproval_required",
        "approver_permission_revoked",
        "policy_changed_reapproval_required",
    }
)
# The fewest seconds between two renewals, however short the lease.
MIN_RENEW_SECONDS = 0.2


@dataclass(frozen=True)
class Claimed:
    """A verified claim: run the tool with exactly `params`, then complete with `token`."""

    request_id: str
    token: str
    params: dict[str, Any]
    lease_until: str
    grant: dict[str, Any] | None  # the signed grant document; None when no key is configured


# --- The checks (no I/O) --------------------------------------------------------------------------


def approved_decision(keys: Mapping[str, Any], resume: Resume, call: SubmittedCall | None) -> dict[str, Any] | None:
    """Step 1: the signed decision this client may act on (None: no key configured).

    Raises ApprovalRejected when the resume is not an approval, DecisionRefused when it
    does not verify as the server's decision for `call`.
    """
    if not resume.approved:
        raise ApprovalRejected(resume)
    if not keys:
        return None
    return verify_decision(resume.raw, keys, request_id=resume.request_id, call=call)


def checked_claim(
    keys: Mapping[str, Any], resume: Resume, decision: dict[str, Any] | None, answer: Mapping[str, Any], nonce: str
) -> Claimed:
    """Step 3: the claim answer as a Claimed, once its grant verified against the decision and nonce."""
    if decision is None:
        if answer.get("params") != resume.params:
            raise DecisionRefused(f"request {resume.request_id}: the claim's params are not the resume's")
        grant = None
    else:
        grant = verify_grant(answer, keys, decision=decision, nonce=nonce)
    return Claimed(
        request_id=resume.request_id,
        token=str(answer["token"]),
        params=dict(answer["params"]),
        lease_until=str(answer.get("lease_until", "")),
        grant=grant,
    )


def _claimed_before(refusal: ControlPlaneError, found: Mapping[str, Any] | None) -> str | None:
    """The "already executed" text when `refusal` of a claim means the call went through a claim before."""
    if refusal.code not in _CLAIMED_BEFORE or found is None:
        return None
    state, resolution = found.get("state"), found.get("resolution_code") or ""
    if refusal.code == "illegal_transition" and not (
        state in ("executing", "succeeded") or (state == "failed" and resolution not in _REFUSED_BEFORE_RUNNING)
    ):
        return None
    return ALREADY_EXECUTED.format(request_id=found.get("id"), state=state, resolution=resolution or "-")


def _renew_interval(lease_until: str) -> float:
    """A third of what is left of the lease: two renewals may fail before it runs out."""
    try:
        until = datetime.fromisoformat(lease_until)
    except ValueError:
        return MIN_RENEW_SECONDS
    left = (until - datetime.now(UTC)).total_seconds()
    return max(left / 3, MIN_RENEW_SECONDS)


# --- Blocking ------------------------------------------------------------------------------------


def claim_approved(cp: ControlPlane, resume: Resume, call: SubmittedCall | None) -> Claimed | str:
    """Steps 1-3: the verified claim, or the "already executed" text for a call claimed before."""
    call = cp.agent.bind(call) if call is not None else None
    decision = approved_decision(cp.decision_keys, resume, call)
    nonce = new_nonce()
    try:
        answer = cp.claim(resume.request_id, nonce=nonce)
    except ControlPlaneError as refusal:
        found = cp.get(resume.request_id) if refusal.code in _CLAIMED_BEFORE else None
        text = _claimed_before(refusal, found)
        if text is None:
            raise
        return text
    return checked_claim(cp.decision_keys, resume, decision, answer, nonce)


class _Renewer:
    """Renews a claim's lease from a daemon thread until stopped (or the lease is refused)."""

    def __init__(self, cp: ControlPlane, claimed: Claimed) -> None:
        self.cp, self.claimed = cp, claimed
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"cp-renew-{claimed.request_id}", daemon=True)

    def _loop(self) -> None:
        lease_until = self.claimed.lease_until
        while not self.stopped.wait(_renew_interval(lease_until)):
            try:
                lease_until = self.cp.renew(self.claimed.request_id, self.claimed.token)["lease_until"]
            except ControlPlaneError as refusal:
                log.warning("hitl_controlplane: lease of %s not renewed: %s", self.claimed.request_id, refusal)
                return

    def __enter__(self) -> _Renewer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()


def run_claimed(cp: ControlPlane, claimed: Claimed, fn: Callable[..., Any]) -> Any:
    """Steps 4-5: run `fn(**granted params)` with the lease renewed, then complete."""
    try:
        with _Renewer(cp, claimed):
            result = fn(**claimed.params)
    except Exception as exc:
        _complete(cp, claimed, succeeded=False, error=repr(exc))
        raise
    _complete(cp, claimed, succeeded=True, result=jsonable(result))
    return result


def _complete(cp: ControlPlane, claimed: Claimed, **outcome: Any) -> None:
    try:
        cp.complete(claimed.request_id, claimed.token, **outcome)
    except ControlPlaneError as refusal:
        if refusal.code != "lease_expired":
            raise
        # It ran, but too late to count: the server keeps the report and the unknown outcome.
        log.warning("hitl_controlplane: %s completed after its lease ran out: %s", claimed.request_id, refusal)


def run_approved(cp: ControlPlane, resume: Resume, call: SubmittedCall | None, fn: Callable[..., Any]) -> Any:
    """The whole handshake (module docstring): `fn`'s result, or the "already executed" text."""
    claimed = claim_approved(cp, resume, call)
    if isinstance(claimed, str):
        return claimed
    return run_claimed(cp, claimed, fn)


# --- asyncio -------------------------------------------------------------------------------------


async def aclaim_approved(acp: AsyncControlPlane, resume: Resume, call: SubmittedCall | None) -> Claimed | str:
    """`claim_approved` for AsyncControlPlane."""
    call = acp.agent.bind(call) if call is not None else None
    decision = approved_decision(acp.decision_keys, resume, call)
    nonce = new_nonce()
    try:
        answer = await acp.claim(resume.request_id, nonce=nonce)
    except ControlPlaneError as refusal:
        found = await acp.get(resume.request_id) if refusal.code in _CLAIMED_BEFORE else None
        text = _claimed_before(refusal, found)
        if text is None:
            raise
        return text
    return checked_claim(acp.decision_keys, resume, decision, answer, nonce)


async def _arenew(acp: AsyncControlPlane, claimed: Claimed) -> None:
    lease_until = claimed.lease_until
    while True:
        await asyncio.sleep(_renew_interval(lease_until))
        try:
            lease_until = (await acp.renew(claimed.request_id, claimed.token))["lease_until"]
        except ControlPlaneError as refusal:
            log.warning("hitl_controlplane: lease of %s not renewed: %s", claimed.request_id, refusal)
            return


async def arun_claimed(acp: AsyncControlPlane, claimed: Claimed, fn: Callable[..., Any | Awaitable[Any]]) -> Any:
    """`run_claimed` for asyncio: `fn` may be a coroutine function (a blocking one holds up the renewal)."""
    renewer = asyncio.create_task(_arenew(acp, claimed))
    try:
        try:
            result = fn(**claimed.params)
            if inspect.isawaitable(result):
                result = await result
        finally:
            renewer.cancel()
    except Exception as exc:
        await _acomplete(acp, claimed, succeeded=False, error=repr(exc))
        raise
    await _acomplete(acp, claimed, succeeded=True, result=jsonable(result))
    return result


async def _acomplete(acp: AsyncControlPlane, claimed: Claimed, **outcome: Any) -> None:
    try:
        await acp.complete(claimed.request_id, claimed.token, **outcome)
    except ControlPlaneError as refusal:
        if refusal.code != "lease_expired":
            raise
        log.warning("hitl_controlplane: %s completed after its lease ran out: %s", claimed.request_id, refusal)


async def arun_approved(
    acp: AsyncControlPlane, resume: Resume, call: SubmittedCall | None, fn: Callable[..., Any | Awaitable[Any]]
) -> Any:
    """`run_approved` for AsyncControlPlane."""
    claimed = await aclaim_approved(acp, resume, call)
    if isinstance(claimed, str):
        return claimed
    return await arun_claimed(acp, claimed, fn)
