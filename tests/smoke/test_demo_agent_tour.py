"""The demo agent's opening tour (manage.py demo_agent after seed_demo): a newcomer's
queue holds a critical wire with a reason, a batch, a suspension and a plan at once,
without curl or a new rule."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from approvals.models import ApprovalRequest
from approvals.states import Kind, State

pytestmark = pytest.mark.django_db


def test_the_first_submissions_show_every_kind_of_request(settings):
    settings.REDIS_URL = ""
    call_command("seed_demo", stdout=io.StringIO())
    out = io.StringIO()
    call_command("demo_agent", "--count", "7", "--interval", "0", "--seed", "1", stdout=out)
    sent = list(ApprovalRequest.objects.filter(agent__name="demo-agent").order_by("created_at"))
    wire = next(r for r in sent if r.action_type == "demo_wire_money")
    assert (wire.risk_level, wire.rule_name, wire.state) == ("critical", "demo_wire_critical", State.PENDING_APPROVAL)
    assert wire.reason  # the agent says why
    batches = {r.batch_id for r in sent if r.batch_id}
    assert len(batches) == 1 and sum(r.batch_id in batches for r in sent) == 3
    suspension = next(r for r in sent if r.kind == Kind.SUSPENSION)
    assert suspension.resume_schema["required"] == ["approved"] and suspension.state == State.PENDING_APPROVAL
    assert any(r.kind == Kind.PLAN for r in sent)
    assert "submitted demo_wire_money [critical]" in out.getvalue()
