"""Concurrent reviewers and executors on PostgreSQL: exactly one winner, no fork.

Real threads, real connections and row locks; these need committed data, so they
run as transactional tests (sparingly: they are the point here).
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from agents.models import Agent
from approvals import services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest, Decision
from approvals.permissions import REVIEWERS
from approvals.states import Kind, State
from audit.chain import verify_chain
from audit.models import AuditEvent
from tests.fixtures.revisions import current_revision

RACERS = 8


def race(work) -> list[object]:
    """Run `work(i)` in RACERS threads released together; return each outcome."""
    barrier = threading.Barrier(RACERS)
    outcomes: list[object] = [None] * RACERS

    def run(i: int) -> None:
        try:
            barrier.wait()
            outcomes[i] = work(i)
        except DomainError as refused:
            outcomes[i] = refused.code
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@pytest.fixture
def crowd(transactional_db, require_postgres):
    reviewers = Group.objects.get(name=REVIEWERS)
    users = []
    for i in range(RACERS):
        user = get_user_model().objects.create_user(f"racer{i}")
        user.groups.add(reviewers)
        users.append(user)
    agent = Agent.objects.create(name="racing-bot")
    return users, agent


def pending_email(agent) -> ApprovalRequest:
    submission = services.Submission(kind=Kind.ACTION, action_type="send_email", params={"to": ["x@example.com"]})
    return services.submit(submission, agent=agent)


def assert_chain_has_no_fork_or_gap() -> None:
    seqs = list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert verify_chain().ok


def test_racing_approvals_have_exactly_one_winner(crowd):
    users, agent = crowd
    request = pending_email(agent)

    outcomes = race(
        lambda i: (
            services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(users[i])).state
        )
    )

    assert Counter(outcomes) == {State.APPROVED: 1, "already_decided": RACERS - 1}
    request.refresh_from_db()
    assert request.state == State.APPROVED
    assert Decision.objects.filter(request=request).count() == 1
    assert AuditEvent.objects.filter(request_id=request.pk, verb="request.approved").count() == 1
    assert_chain_has_no_fork_or_gap()


def test_racing_claims_have_exactly_one_winner(crowd):
    users, agent = crowd
    request = pending_email(agent)
    services.approve(request.pk, revision=current_revision(request.pk), actor=services.Person(users[0]))

    outcomes = race(lambda i: services.claim_execution(request.pk, actor=services.SYSTEM).idempotency_key)

    winners = [o for o in outcomes if isinstance(o, str) and o.startswith("cp-")]
    assert len(winners) == 1
    assert Counter(o for o in outcomes if o not in winners) == {"already_claimed": RACERS - 1}
    request.refresh_from_db()
    assert (request.state, request.attempts) == (State.EXECUTING, 1)
    assert AuditEvent.objects.filter(request_id=request.pk, verb="request.execution_claimed").count() == 1
    assert_chain_has_no_fork_or_gap()
