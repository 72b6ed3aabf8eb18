"""The one reviewer-decision adapter: every surface's input (the dashboard's forms and
keyboard, a batch group, the JSON API; Slack and MCP later) becomes one call of the
decision services, and the result one value every surface renders.

    fields (QueryDict or JSON dict) --read_decision / read_batch--> Decision / Batch
    Decision --decide(..., actor=reviewer(...))--> Decided  (outcome, request, message)
    Batch --decide_batch(...)--> BatchDecided (digest, one ItemResult per request)
    DomainError --error.as_dict(), error.http_status--> the surface's refusal

The step-up proof is read here once (`step_up_proof`), whatever shape a surface sends
it in: the API's `step_up: {"method", ...}` or the form's flat `password`, `code`,
`passkey_assertion` + `passkey_nonce`, `provider_nonce`. Every guard stays in the
services (DESIGN.md "Guards live in the core, not in the views"): this module reads,
dispatches and describes; it never decides whether a decision may happen. It imports
no view: the views (approvals.web, approvals.api) import it.

Beside it, and re-exported here (surfaces import this module alone): `decide_inputs`
reads the fields (`read_decision`, `read_batch`), `decide_results` is the result shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth import logout

from controlplane.http.codes import VALIDATION_ERROR

from . import errors, services
from .decide_inputs import (
    APPROVE,
    BATCH_LIMIT,
    EDIT,
    REJECT,
    RESPOND,
    VERDICTS,
    Batch,
    Decision,
    _is_form,
    form_answer,
    form_edits,
    form_revision,
    read_batch,
    read_decision,
)
from .decide_results import BatchDecided, Decided, ItemResult, decided_message
from .errors import DomainError
from .states import State

__all__ = [
    "APPROVE",
    "BATCH_LIMIT",
    "Batch",
    "BatchDecided",
    "Decided",
    "Decision",
    "EDIT",
    "ItemResult",
    "REJECT",
    "RESPOND",
    "STEP_UP_SECRETS",
    "VERDICTS",
    "decide",
    "decide_batch",
    "decided_message",
    "end_session_if",
    "form_answer",
    "form_edits",
    "form_revision",
    "read_batch",
    "read_decision",
    "reviewer",
    "rp_id_of",
    "step_up_proof",
]


# Each step-up method's secret field (the API's `step_up` serializer checks the same).
STEP_UP_SECRETS = {"password": "password", "totp": "code", "passkey": "assertion", "provider": "nonce"}


def step_up_proof(fields: Mapping | None, *, rp_id: str, covers: Iterable | None = None) -> services.StepUpProof | None:
    """The step-up a reviewer gave, or None. `fields`: the API's validated `step_up`
    ({"method", "password" | "code" | "assertion" + "nonce" | "nonce"}), or a form's
    flat fields (`provider_nonce`, else `passkey_assertion` (JSON text) + `passkey_nonce`,
    else `code`, else `password`). `covers`: the decisions of a batch the one proof is
    for (a single decision's proof binds to the decision it is used for). Whether the
    decision needs it, and which method it takes, is the service's to say."""
    given = _form_step_up(fields) if fields is not None and _is_form(fields) else fields
    if not given:
        return None
    method = given.get("method") if isinstance(given, Mapping) else None
    if (
        not isinstance(method, str)
        or method not in STEP_UP_SECRETS
        or not given.get(STEP_UP_SECRETS[method])
        or (method in ("passkey", "provider") and not isinstance(given.get("nonce"), str))
    ):
        # The API's serializer refuses these first; a surface that sends JSON unchecked meets this.
        raise DomainError(
            VALIDATION_ERROR,
            "step_up names a method (password, totp, passkey or provider) and "
            "its secret (and a passkey's or provider's nonce).",
            fields=["step_up"],
        )
    return services.StepUpProof(
        method, given[STEP_UP_SECRETS[method]], covers=covers, nonce=given.get("nonce", ""), rp_id=rp_id
    )


def _form_step_up(form: Mapping) -> dict[str, Any] | None:
    if form.get("provider_nonce", ""):
        return {"method": "provider", "nonce": form["provider_nonce"]}
    if form.get("passkey_assertion", ""):
        return {
            "method": "passkey",
            "assertion": _json_or_none(form["passkey_assertion"]),
            "nonce": form.get("passkey_nonce", ""),
        }
    if form.get("code", ""):
        return {"method": "totp", "code": form["code"]}
    if form.get("password", ""):
        return {"method": "password", "password": form["password"]}
    return None


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None  # refused as a wrong proof, like any assertion that does not verify


def rp_id_of(http_request) -> str:
    """The WebAuthn relying party: the host name the browser (or script) called."""
    return http_request.get_host().rsplit(":", 1)[0]


def reviewer(http_request, step_up: Mapping | None = None, *, covers: Iterable | None = None) -> services.Person:
    """The signed-in reviewer, with the step-up they gave (`step_up_proof`)."""
    return services.Person.from_request(
        http_request, step_up=step_up_proof(step_up, rp_id=rp_id_of(http_request), covers=covers)
    )


def end_session_if(http_request, code: str | None) -> None:
    """The service ended the session (repeated failed step-ups): the answer clears the cookie."""
    if code == errors.SESSION_ENDED:
        logout(http_request)


def decide(decision: Decision, *, actor: services.Person, user) -> Decided:
    """Call the decision service `decision` names. Raises the service's DomainError."""
    pk, revision = decision.request_id, decision.revision
    if decision.answers_a_suspension:
        decided = services.respond_to_suspension(
            pk, actor=actor, resume_data=decision.resume_data, revision=revision, feedback=decision.feedback
        )
    elif decision.verdict == RESPOND:
        decided = services.respond_instead(pk, decision.message, actor=actor, revision=revision)
    elif decision.verdict == REJECT:
        decided = services.reject(pk, actor=actor, revision=revision, feedback=decision.feedback)
    elif decision.verdict == EDIT:
        decided = services.approve_with_edits(
            pk, actor=actor, revision=revision, edits=decision.edits, feedback=decision.feedback
        )
    else:
        decided = services.approve(pk, actor=actor, revision=revision, feedback=decision.feedback)
    proposal = (
        (decision.verdict == EDIT or decision.answers_a_suspension)
        and decided.state == State.PENDING_APPROVAL
        and services.is_proposal(decided, by=user)
    )
    return Decided(decision=decision, request=decided, proposal=proposal)


def decide_batch(batch: Batch, *, actor: services.Person, scope) -> BatchDecided:
    """Decide the members of `batch` in the surface's `scope` (the queryset it answers
    404 outside of: the dashboard's queue, the API's viewable requests); the others are
    `missing`. Raises DomainError only for the batch's own input (its feedback's
    size): then nothing was decided."""
    scope = {str(pk) for pk in scope.filter(pk__in=[pk for pk, _ in batch.items]).values_list("pk", flat=True)}
    decided = {
        item.request_id: item
        for item in services.decide_batch(
            [item for item in batch.items if item[0] in scope],
            actor=actor,
            verdict=batch.verdict,
            feedback=batch.feedback,
        )
    }
    single = {
        request_id: Decision(request_id, batch.verdict, revision, batch.feedback)
        for request_id, revision in batch.items
    }
    results = []
    for request_id, _revision in batch.items:
        item = decided.get(request_id)
        if item is None:
            results.append(ItemResult(request_id))
        elif item.error is not None:
            results.append(ItemResult(request_id, error=item.error))
        else:
            results.append(ItemResult(request_id, decided=Decided(single[request_id], item.request, proposal=False)))
    return BatchDecided(batch=batch, results=results)
