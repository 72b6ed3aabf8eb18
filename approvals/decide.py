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
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from django.contrib.auth import logout
from django.http import QueryDict

from controlplane.http.codes import VALIDATION_ERROR
from controlplane.http.errors import CodedError
from controlplane.http.inputs import parse_json_text

from . import errors, services
from .bounds import BOUNDS
from .errors import DomainError
from .resume_schema import INVALID_RESUME_DATA
from .states import Kind, State

__all__ = [
    "APPROVE",
    "BATCH_LIMIT",
    "EDIT",
    "REJECT",
    "RESPOND",
    "Batch",
    "BatchDecided",
    "Decided",
    "Decision",
    "ItemResult",
    "decide",
    "decide_batch",
    "end_session_if",
    "read_batch",
    "read_decision",
    "reviewer",
    "step_up_proof",
]

APPROVE, REJECT, EDIT, RESPOND = "approve", "reject", "edit", "respond"
VERDICTS = (APPROVE, REJECT, EDIT, RESPOND)
BATCH_VERDICTS = {APPROVE: "approval", REJECT: "rejection"}
BATCH_LIMIT = 100  # the dashboard's group limit and the API's batch limit
# Each step-up method's secret field (the API's `step_up` serializer checks the same).
STEP_UP_SECRETS = {"password": "password", "totp": "code", "passkey": "assertion", "provider": "nonce"}
_ABSENT: Any = object()


def _is_form(fields: Mapping) -> bool:
    """A form's fields are all text (a QueryDict); a JSON body's are typed."""
    return hasattr(fields, "getlist")


# --- The step-up proof, from any surface ---------------------------------------------


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


# --- Which decision, which revision, which edits / answer / feedback ---------------------


@dataclass(frozen=True)
class Decision:
    """One reviewer's decision on one request, as every surface states it."""

    request_id: str
    verdict: str  # approve, reject, edit (approve with edits) or respond (answer or reply)
    revision: int | None
    feedback: str = ""
    edits: dict[str, Any] = field(default_factory=dict)
    message: str = ""  # respond on an action: the reply the agent's model reads
    resume_data: Any = _ABSENT  # respond on a suspension: the answer
    step_up: Mapping | None = None

    @property
    def answers_a_suspension(self) -> bool:
        return self.verdict == RESPOND and self.resume_data is not _ABSENT

    def confirmed(self) -> tuple:
        """What a step-up proof for this decision confirms (`services.decision_digest`)."""
        if self.verdict == EDIT:
            return services.edit_decision(self.request_id, self.revision, self.edits)
        if self.verdict == RESPOND:
            return services.answer_decision(self.request_id, self.revision, self.resume_data)
        return (self.request_id, self.revision, self.verdict)


def read_decision(fields: Mapping, target, *, verdict: str | None = None) -> Decision:
    """The decision `fields` state on `target` (the request, loaded by the surface in
    the scope it answers 404 outside of). `verdict`: the surface's own (a form's URL
    names it); else `fields["decision"]` (the API's approve, reject or respond;
    approve with `edits` is an edit).

    A form's fields are text: `revision` digits, `edit:<param>` edits read against
    the current params, `resume_data` JSON text (read for a suspension only). A JSON
    body's (already validated by the API's serializer) are typed. Raises DomainError
    (422) for a field that is not what it must be; nothing else is checked here."""
    form = _is_form(fields)
    verdict = verdict or fields.get("decision", "")
    if not isinstance(verdict, str):
        verdict = ""  # refused below, naming `decision`
    edits: dict[str, Any] = {}
    resume_data = _ABSENT
    if form:
        if verdict == EDIT:
            edits = form_edits(fields, target.current_params(), list(target.classification.get("editable_params", ())))
        elif verdict == RESPOND and target.kind == Kind.SUSPENSION:
            resume_data = form_answer(fields)
        revision = form_revision(fields)
    else:
        edits = _typed(fields, "edits", dict, {}) or {}
        if verdict == APPROVE and edits:
            verdict = EDIT
        if verdict == RESPOND and ("resume_data" in fields or target.kind == Kind.SUSPENSION):
            resume_data = fields.get("resume_data")
        revision = _typed(fields, "revision", int, None)
        if isinstance(revision, bool) or (revision is not None and BOUNDS["revision"].problem(revision)):
            raise DomainError(
                VALIDATION_ERROR, "revision is the whole number of the revision you looked at.", fields=["revision"]
            )
    if verdict not in VERDICTS:
        raise DomainError(VALIDATION_ERROR, "decision is approve, reject, edit or respond.", fields=["decision"])
    return Decision(
        request_id=str(target.pk),
        verdict=verdict,
        revision=revision,
        feedback=_typed(fields, "feedback", str, ""),
        edits=edits,
        message=_typed(fields, "message", str, ""),
        resume_data=resume_data,
        step_up=fields if form else _typed(fields, "step_up", dict, None),
    )


def _typed(fields: Mapping, name: str, kind: type, default: Any) -> Any:
    """`fields[name]` if it is a `kind` (or absent or null: `default`); else 422 naming it.
    The API's serializers check first; this keeps a surface that forwards JSON unchecked
    from reaching a service with a value of the wrong type."""
    value = fields.get(name, default)
    if value is None or value is default or isinstance(value, kind):
        return default if value is None else value
    raise DomainError(VALIDATION_ERROR, f"{name} is not a {kind.__name__}.", fields=[name])


def form_revision(form: Mapping) -> int | None:
    """The revision the card showed, so a decision never lands on params the reviewer did not see.

    None when the form sent none; one that is not a revision (ASCII digits within the
    column: "²".isdigit() is true and int() refuses it) is refused, never read as none.
    """
    raw = form.get("revision", "")
    if raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 10 or BOUNDS["revision"].problem(int(raw)):
        raise DomainError(
            VALIDATION_ERROR, "The revision must be the whole number the card showed.", fields=["revision"]
        )
    return int(raw)


def form_edits(form: Mapping, current: dict[str, Any], editable: list[str]) -> dict[str, Any]:
    """Edits from `edit:<param>` fields. A param that was text stays text; others are
    JSON. An empty field means "unchanged" for masked params (their value is never
    sent to the browser) and for params the agent did not set."""
    edits: dict[str, Any] = {}
    for key in editable:
        name = f"edit:{key}"
        if name not in form:
            continue
        raw = form[name]
        if raw == "" and (f"masked:{key}" in form or key not in current):
            continue
        if isinstance(current.get(key), str) or key not in current:
            value: Any = raw
        else:
            try:
                value = parse_json_text(raw, field=key)
            except ValueError:
                raise DomainError(
                    errors.INVALID_EDIT, f"{key} must be valid JSON, like the original value.", fields=[key]
                ) from None
            except CodedError as refused:
                raise DomainError(errors.INVALID_EDIT, refused.message, fields=[key]) from None
        if key not in current or value != current[key]:
            edits[key] = value
    return edits


def form_answer(form: Mapping) -> Any:
    """A suspension form's `resume_data` (JSON text, static/js/schema_form.js)."""
    try:
        return parse_json_text(form.get("resume_data", ""), field="resume_data")
    except ValueError:
        raise DomainError(INVALID_RESUME_DATA, "The answer is not valid JSON.", path="", field="resume_data") from None
    except CodedError as refused:
        raise DomainError(INVALID_RESUME_DATA, refused.message, path="", field="resume_data") from None


@dataclass(frozen=True)
class Batch:
    """Approve or reject several requests, each at the revision its row showed."""

    verdict: str
    items: tuple[tuple[str, int | None], ...]
    feedback: str = ""
    step_up: Mapping | None = None

    def confirmed(self) -> list[tuple]:
        """What the one step-up proof of the batch confirms: every (request, revision, verdict)."""
        return [(request_id, revision, self.verdict) for request_id, revision in self.items]


def read_batch(fields: Mapping) -> Batch:
    """The batch `fields` state: a form's `decision` and `request` fields
    ("<uuid>:<revision>", each once), or the API's validated `decision` and
    `requests: [{"id", "revision"}]`. A member without a revision refuses the batch
    (422 `revision_required`, nothing decided); a malformed one, 422 `validation_error`."""
    items: list[tuple[str, int | None]] | None
    if _is_form(fields):
        values = cast(QueryDict, fields).getlist("request")
        if any(not value.partition(":")[2] for value in values):
            raise DomainError(
                errors.REVISION_REQUIRED,
                "Each request of a batch decision names the revision its row showed (id:revision).",
                fields=["request"],
            )
        from_form = _form_batch_items(values)
        items = None if from_form is None else [(pk, revision) for pk, revision in from_form]
        verdict = fields.get("decision", "")
        if verdict not in BATCH_VERDICTS or items is None:
            raise DomainError(
                VALIDATION_ERROR,
                "A batch decision needs approve or reject and each request once as id:revision.",
                fields=["decision", "request"],
            )
        step_up: Mapping | None = fields
    else:
        verdict, items = fields.get("decision"), _json_batch_items(fields.get("requests"))
        if not isinstance(verdict, str) or verdict not in BATCH_VERDICTS or items is None:
            raise DomainError(
                VALIDATION_ERROR,
                "A batch decision needs approve or reject and each request once as {id, revision}.",
                fields=["decision", "requests"],
            )
        for _pk, revision in items:
            services.require_revision_given(revision)  # 422 revision_required: nothing decided
        step_up = _typed(fields, "step_up", dict, None)
    return Batch(verdict=verdict, items=tuple(items), feedback=_typed(fields, "feedback", str, ""), step_up=step_up)


def _json_batch_items(requests: Any) -> list[tuple[str, int | None]] | None:
    """The API's `requests` (validated by its serializer first), or None when malformed."""
    if not isinstance(requests, list) or not 0 < len(requests) <= BATCH_LIMIT:
        return None
    items: list[tuple[str, int | None]] = []
    for item in requests:
        revision = item.get("revision") if isinstance(item, Mapping) else None
        try:
            items.append((str(uuid.UUID(str(item["id"]))), revision))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if revision is not None and (
            not isinstance(revision, int) or isinstance(revision, bool) or BOUNDS["revision"].problem(revision)
        ):
            return None
    return items if len({pk for pk, _ in items}) == len(items) else None


def _form_batch_items(values: list[str]) -> list[tuple[str, int]] | None:
    items: list[tuple[str, int]] = []
    for value in values:
        pk, _, revision = value.partition(":")
        try:
            items.append((str(uuid.UUID(pk)), int(revision)))
        except ValueError:
            return None
        if not (revision.isascii() and revision.isdigit()) or BOUNDS["revision"].problem(items[-1][1]):
            return None
    ids = [pk for pk, _ in items]
    return items if items and len(set(ids)) == len(ids) and len(items) <= BATCH_LIMIT else None


# --- The call, and the one result shape --------------------------------------------------


@dataclass(frozen=True)
class Decided:
    """A decision the services recorded: the request as it is now, and what that means."""

    decision: Decision
    request: Any  # ApprovalRequest
    proposal: bool  # an edit or answer that stands as a proposal others decide

    @property
    def outcome(self) -> str:
        """approved, rejected, ..., or while pending: vote_recorded, edit_proposed or answer_proposed."""
        if self.request.state != State.PENDING_APPROVAL:
            return self.request.state
        if self.proposal:
            return "answer_proposed" if self.request.kind == Kind.SUSPENSION else "edit_proposed"
        return "vote_recorded"

    @property
    def message(self) -> str:
        """The sentence a reviewer reads."""
        decided, verdict = self.request, self.decision.verdict
        if verdict == RESPOND and not self.decision.answers_a_suspension:
            return f"{decided.action_type}: your reply went to the agent instead of running the tool."
        if verdict == RESPOND:
            if self.proposal:
                return (
                    "Your answer is saved as a proposal: your approval does not count for it, "
                    "the other approvers must agree."
                )
            return decided_message(decided, "answer")
        if verdict == EDIT:
            changed = ", ".join(sorted(self.decision.edits))
            if self.proposal:
                group = decided.approver_group.name if decided.approver_group_id else "its approvers"
                return (
                    f"Your edit to {changed} is saved as a proposal: {group} must approve it "
                    f"({decided.required_approvals} needed), and your approval does not count for it."
                )
            return f"Approved with edits to {changed}. " + decided_message(decided, "approval")
        return decided_message(decided, "rejection" if verdict == REJECT else "approval")


def decided_message(request_obj, verb: str) -> str:
    if request_obj.state == State.PENDING_APPROVAL:
        return (
            f"Your {verb} is recorded: {request_obj.required_approvals} approvals are needed, waiting for the others."
        )
    return f"{request_obj.action_type} {request_obj.get_state_display().lower()}."


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


@dataclass(frozen=True)
class ItemResult:
    """One request of a batch: decided (`decided`), refused (`error`), or not in the
    surface's scope (`missing`: answered like a request that does not exist)."""

    request_id: str
    decided: Decided | None = None
    error: DomainError | None = None

    @property
    def missing(self) -> bool:
        return self.decided is None and self.error is None

    @property
    def ok(self) -> bool:
        return self.decided is not None


@dataclass(frozen=True)
class BatchDecided:
    batch: Batch
    results: list[ItemResult]  # in the batch's order

    @property
    def digest(self) -> str:
        return services.decision_digest(self.batch.confirmed())

    @property
    def message(self) -> str:
        done = sum(result.ok for result in self.results)
        refused = len(self.results) - done
        return f"{done} of {len(self.results)} {'approved' if self.batch.verdict == APPROVE else 'rejected'}" + (
            f"; {refused} refused (see each)." if refused else "."
        )

    @property
    def ended_the_session(self) -> bool:
        return any(result.error is not None and result.error.code == errors.SESSION_ENDED for result in self.results)


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
