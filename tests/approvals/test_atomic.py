"""The one primitive every change of something other than a request builds on
(`approvals.atomic`): its audit events commit with it, its side effects run after commit
and never fail it, and a persisted refusal keeps what was written before it."""

from __future__ import annotations

import logging

import pytest

from approvals import errors
from approvals.atomic import PersistedRefusal, after_commit, applying, changing_row
from approvals.emergency import set_emergency_stop
from approvals.errors import DomainError
from approvals.models import EmergencyStop
from audit.chain import Actor, record
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system()


def test_side_effects_run_after_commit_and_a_failing_one_stops_neither_the_change_nor_the_rest(
    django_capture_on_commit_callbacks, caplog
):
    ran: list[str] = []

    def broken() -> None:
        raise ConnectionError("the channel layer is down")

    with django_capture_on_commit_callbacks(execute=True):
        with applying():
            record("audit.verified", actor=SYSTEM)
            after_commit(broken, what="a push nobody hears")
            after_commit(lambda: ran.append("second"), what="the second push")
            assert ran == []  # nothing leaves before the commit

    assert ran == ["second"]
    assert AuditEvent.objects.filter(verb="audit.verified").count() == 1
    assert any(
        entry.levelno == logging.WARNING and "a push nobody hears" in entry.getMessage() for entry in caplog.records
    )


def test_a_refused_change_keeps_nothing_and_sends_nothing(django_capture_on_commit_callbacks):
    ran: list[str] = []
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(DomainError):
            with applying():
                record("audit.verified", actor=SYSTEM)
                after_commit(lambda: ran.append("push"), what="a push")
                raise DomainError(errors.NOT_PERMITTED, "No.")
    assert (ran, callbacks, AuditEvent.objects.filter(verb="audit.verified").count()) == ([], [], 0)


def test_a_persisted_refusal_commits_what_was_written_then_reaches_the_caller():
    with pytest.raises(PersistedRefusal):
        with applying():
            record("audit.verified", actor=SYSTEM)
            raise PersistedRefusal(errors.ALREADY_CLAIMED, "Decided already.")
    assert AuditEvent.objects.filter(verb="audit.verified").count() == 1


def test_changing_row_locks_the_row_or_says_it_is_missing():
    set_emergency_stop(on=True)
    with changing_row(EmergencyStop, scope=EmergencyStop.GLOBAL) as switch:
        assert switch.on
    with pytest.raises(EmergencyStop.DoesNotExist):
        with changing_row(EmergencyStop, scope="agent:0"):
            pass
    with pytest.raises(DomainError) as refused:
        with changing_row(EmergencyStop, missing=lambda: DomainError(errors.NOT_FOUND, "None."), scope="agent:0"):
            pass
    assert refused.value.code == errors.NOT_FOUND
