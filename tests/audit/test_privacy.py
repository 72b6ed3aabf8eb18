"""Audit metadata holds digests, never bodies, and redacted fields not even digests."""

from __future__ import annotations

import pytest

from audit.chain import digest
from audit.privacy import params_digest, value_digest

EMAIL = {"to": ["a@example.com"], "subject": "Payroll", "body": "salaries attached"}


def test_without_redaction_params_are_one_keyed_digest(settings):
    settings.AUDIT_REDACTED_FIELDS = {}
    assert params_digest("send_email", EMAIL) == digest(EMAIL)
    assert "salaries" not in str(params_digest("send_email", EMAIL))


def test_redacted_fields_are_left_out_of_the_digest_and_named(settings):
    settings.AUDIT_REDACTED_FIELDS = {"send_email": ["body"], "*": ["password"]}
    result = params_digest("send_email", {**EMAIL, "password": "hunter2"})
    assert result == {**digest({"to": ["a@example.com"], "subject": "Payroll"}), "redacted": ["body", "password"]}
    assert params_digest("send_email", {**EMAIL, "body": "something else"})["hmac"] == result["hmac"]
    assert params_digest("update_document", EMAIL) == digest(EMAIL)


def test_a_redacted_edited_value_is_only_marked(settings):
    settings.AUDIT_REDACTED_FIELDS = {"send_email": ["body"]}
    assert value_digest("send_email", "body", "new body") == {"redacted": True}
    assert value_digest("send_email", "subject", "Hi") == digest("Hi")


@pytest.mark.django_db
def test_a_submitted_email_body_never_reaches_the_audit_row(settings):
    from agents.models import Agent
    from approvals import services
    from approvals.states import Kind
    from audit.models import AuditEvent

    settings.AUDIT_REDACTED_FIELDS = {"send_email": ["body"]}
    agent = Agent.objects.create(name="mail-bot")
    request = services.submit(
        services.Submission(kind=Kind.ACTION, action_type="send_email", params=EMAIL, target={}), agent=agent
    )
    submitted = AuditEvent.objects.get(request_id=request.pk, verb="request.submitted")
    assert submitted.metadata["params"]["redacted"] == ["body"]
    assert "salaries" not in submitted.canonical
    assert submitted.metadata["params"]["hmac"] == digest({"to": ["a@example.com"], "subject": "Payroll"})["hmac"]
