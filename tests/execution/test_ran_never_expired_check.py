"""The end-to-end tests' closing check (tests/fixtures/executions.py) can fail: it names a
request that was claimed and then recorded as expired, and only such a request."""

from __future__ import annotations

import pytest

from audit.chain import Actor, record
from tests.fixtures.executions import ran_yet_recorded_expired

pytestmark = pytest.mark.django_db


def test_a_claimed_request_later_recorded_as_expired_is_named(submit):
    ran = submit()
    never_claimed = submit(params={"to": ["eve@example.com"], "subject": "Hi", "body": "Hello"})
    worker = Actor.system("worker")
    record("request.execution_claimed", actor=worker, request=ran, metadata={"attempt": 1})
    assert ran_yet_recorded_expired() == []
    record("request.expired", actor=worker, request=never_claimed, metadata={"code": "approval_expired"})
    assert ran_yet_recorded_expired() == []  # expired without a claim: it never ran
    record("request.expired", actor=worker, request=ran, metadata={"code": "approval_expired"})
    assert ran_yet_recorded_expired() == [str(ran.pk)]
