"""The domain signal: one `request_changed` per committed change, none for a rolled-back
one, and each subscriber acting only on the changes it is about."""

from __future__ import annotations

import pytest

from approvals import broadcast, errors, services
from approvals.errors import DomainError
from approvals.people import Person
from approvals.services import RequestChange, request_changed
from approvals.states import TRANSITIONS, State
from tests.fixtures.revisions import current_revision


@pytest.fixture
def heard():
    changes: list[RequestChange] = []

    def subscriber(sender, *, change, **kwargs):
        changes.append(change)

    request_changed.connect(subscriber)
    yield changes
    request_changed.disconnect(subscriber)


def committed(capture, action):
    with capture(execute=True):
        return action()


def test_each_transition_is_announced_once_with_its_verb_after_commit(
    submit, people, heard, django_capture_on_commit_callbacks
):
    request = committed(django_capture_on_commit_callbacks, lambda: submit("send_email", params={"to": "a@b.c"}))
    committed(
        django_capture_on_commit_callbacks,
        lambda: services.reject(
            request.pk, revision=current_revision(request.pk), actor=Person(people["alice"]), feedback="not now"
        ),
    )

    assert [(c.from_state, c.to_state, c.verb) for c in heard] == [
        (State.DRAFT, State.PENDING_APPROVAL, TRANSITIONS[(State.DRAFT, State.PENDING_APPROVAL)]),
        (State.PENDING_APPROVAL, State.REJECTED, TRANSITIONS[(State.PENDING_APPROVAL, State.REJECTED)]),
    ]
    assert {c.request_id for c in heard} == {str(request.pk)}
    assert all(c.agent_id == request.agent_id and c.is_transition for c in heard)


def test_a_refused_change_announces_nothing(submit, people, heard, django_capture_on_commit_callbacks):
    request = committed(django_capture_on_commit_callbacks, lambda: submit("send_email", params={"to": "a@b.c"}))
    committed(
        django_capture_on_commit_callbacks,
        lambda: services.reject(
            request.pk, revision=current_revision(request.pk), actor=Person(people["alice"]), feedback="no"
        ),
    )
    heard.clear()
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(DomainError) as refused:
            services.approve(request.pk, revision=current_revision(request.pk), actor=Person(people["bob"]))
    assert refused.value.code == errors.ALREADY_DECIDED
    assert heard == []


@pytest.mark.parametrize(
    ("from_state", "to_state", "verb", "event"),
    [
        (State.DRAFT, State.PENDING_APPROVAL, "request.queued", broadcast.CARD_CREATED),
        (State.PENDING_APPROVAL, State.APPROVED, "request.approved", broadcast.CARD_REMOVED),
        (State.PENDING_APPROVAL, State.PENDING_APPROVAL, "request.escalated", broadcast.CARD_CREATED),
        (State.PENDING_APPROVAL, State.PENDING_APPROVAL, "decision.recorded", broadcast.CARD_UPDATED),
        (State.APPROVED, State.EXECUTING, "request.execution_claimed", broadcast.CARD_UPDATED),
        (State.DRAFT, State.APPROVED, "request.auto_approved", broadcast.CARD_UPDATED),
    ],
)
def test_the_browser_push_turns_each_change_into_its_card_event(from_state, to_state, verb, event):
    change = RequestChange(
        request_id="r1",
        from_state=from_state,
        to_state=to_state,
        verb=verb,
        revision=1,
        agent_id=7,
        approver_group_id=3,
        rule_name="any",
        escalated=False,
        details={"approvals": 1},
    )
    push = broadcast.push_for(change)
    assert (push.event, push.state, push.data) == (event, to_state, {"verb": verb, "approvals": 1})
    # Nobody can be waiting on the id of a request still being created.
    assert (broadcast.request_group("r1") in push.channel_groups()) == (from_state != State.DRAFT)


def test_the_claim_is_a_transition_from_approved_to_executing(
    submit, people, heard, django_capture_on_commit_callbacks
):
    """The claim goes through `transition()`: announced as the move it is, recorded once."""
    from audit.models import AuditEvent

    request = committed(django_capture_on_commit_callbacks, lambda: submit("send_email", params={"to": "a@b.c"}))
    committed(
        django_capture_on_commit_callbacks,
        lambda: services.approve(request.pk, revision=current_revision(request.pk), actor=Person(people["alice"])),
    )
    heard.clear()
    grant = committed(
        django_capture_on_commit_callbacks, lambda: services.claim_execution(request.pk, actor=services.SYSTEM)
    )

    assert [(c.from_state, c.to_state, c.verb) for c in heard] == [
        (State.APPROVED, State.EXECUTING, "request.execution_claimed")
    ]
    (event,) = AuditEvent.objects.filter(request_id=request.pk, verb="request.execution_claimed")
    assert event.metadata == {
        "from": State.APPROVED,
        "to": State.EXECUTING,
        "attempt": 1,
        "idempotency_key": grant.idempotency_key,
    }
