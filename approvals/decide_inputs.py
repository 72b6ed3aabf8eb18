"""What a surface's fields say a reviewer decided, for `approvals.decide` (the one adapter, which
re-exports these names): one decision (`read_decision` -> `Decision`) or a batch
(`read_batch` -> `Batch`), from a form's text fields or the API's validated JSON. A field that
is not what it must be is 422 here; whether the decision may happen is the services' to say.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from django.http import QueryDict

from controlplane.http.codes import VALIDATION_ERROR
from controlplane.http.errors import CodedError
from controlplane.http.inputs import parse_json_text

from . import errors, services
from .bounds import BOUNDS
from .errors import DomainError
from .resume_schema import INVALID_RESUME_DATA
from .states import Kind

APPROVE, REJECT, EDIT, RESPOND = "approve", "reject", "edit", "respond"
VERDICTS = (APPROVE, REJECT, EDIT, RESPOND)
BATCH_VERDICTS = {APPROVE: "approval", REJECT: "rejection"}
BATCH_LIMIT = 100  # the dashboard's group limit and the API's batch limit
_ABSENT: Any = object()


def _is_form(fields: Mapping) -> bool:
    """A form's fields are all text (a QueryDict); a JSON body's are typed."""
    return hasattr(fields, "getlist")


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
