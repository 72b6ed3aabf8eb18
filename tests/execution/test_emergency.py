"""The emergency stop: a run-time switch, global or per agent, audited and announced."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.management import call_command

from approvals import errors, services
from approvals.emergency import EMERGENCY_GROUP, current_stop_state, is_stopped, set_emergency_stop
from approvals.errors import DomainError
from approvals.execution import runner
from approvals.models import ApprovalRequest
from approvals.people import Person
from approvals.states import State
from audit.models import AuditEvent


@pytest.fixture(autouse=True)
def noop_executors(settings):
    settings.EXECUTORS = {"demo_*": "noop"}


@pytest.fixture
def enqueued_ids(monkeypatch):
    ids: list[str] = []
    monkeypatch.setattr(runner, "enqueue", lambda request_id: ids.append(str(request_id)) or True)
    return ids


@pytest.fixture
def admin(db, django_user_model):
    return django_user_model.objects.create_user("ada", password="ada-pw-123!", is_staff=True)


class TestWhileItIsOn:
    def test_a_low_risk_submission_waits_for_review(self, ops_submit, admin):
        set_emergency_stop(on=True, actor=Person(admin), reason="bad deploy")
        request = ops_submit("read_file", {"path": "README"})
        assert (request.state, request.risk_level) == (State.PENDING_APPROVAL, "low")

    def test_an_approved_request_is_not_executed_and_waits_for_the_sweep(self, approved, admin, enqueued_ids):
        request = approved("demo_restart", {"service": "search"})
        set_emergency_stop(on=True, actor=Person(admin))
        assert runner.execute(str(request.pk)) == f"refused:{errors.EMERGENCY_STOP}"
        assert ApprovalRequest.objects.get(pk=request.pk).state == State.APPROVED
        assert runner.enqueue_pending() == 0

        set_emergency_stop(on=False, actor=Person(admin))
        assert runner.enqueue_pending() == 1
        assert enqueued_ids == [str(request.pk)]
        assert runner.execute(str(request.pk)) == "succeeded"

    def test_a_claim_is_refused_with_emergency_stop(self, ops_submit, ops_bot, admin):
        request = ops_submit("read_file", {"path": "README"})
        set_emergency_stop(on=True, actor=Person(admin))
        with pytest.raises(DomainError) as refused:
            services.claim_execution(request.pk, actor=runner.WORKER, agent=ops_bot)
        assert refused.value.code == errors.EMERGENCY_STOP
        assert ApprovalRequest.objects.get(pk=request.pk).state == State.APPROVED

    def test_a_deferred_retry_is_not_retried(self, approved, admin, enqueued_ids):
        request = approved("demo_restart", {"service": "search"})
        grant = services.claim_execution(request.pk, actor=runner.WORKER)
        services.defer_execution(
            request.pk,
            token=grant.token,
            actor=runner.WORKER,
            error="busy",
            code="busy",
            retry_at=grant.lease_until.replace(year=2000),
        )
        set_emergency_stop(on=True, actor=Person(admin))
        assert runner.resolve_executions() == {"retried": 0, "lost": 0}
        with pytest.raises(DomainError) as refused:
            services.reclaim_execution(request.pk, actor=runner.WORKER, idempotent=True)
        assert refused.value.code == errors.EMERGENCY_STOP
        assert ApprovalRequest.objects.get(pk=request.pk).state == State.EXECUTING


class TestScopes:
    def test_an_agents_own_stop_leaves_other_agents_running(self, ops_bot, admin, django_user_model):
        from agents.models import Agent

        other = Agent.objects.create(name="other-bot")
        set_emergency_stop(on=True, agent=ops_bot, actor=Person(admin))
        assert is_stopped(ops_bot) and not is_stopped(other)
        state = current_stop_state()
        assert state["global"] is None
        assert [(s.agent_name, s.on) for s in state["agents"]] == [("ops-bot", True)]

    def test_the_settings_flag_is_a_floor_no_switch_can_lift(self, ops_bot, admin, settings):
        settings.EMERGENCY_STOP = True
        set_emergency_stop(on=False, actor=Person(admin))
        assert is_stopped(ops_bot)
        assert current_stop_state()["global"].from_settings

    def test_the_check_is_one_query(self, ops_bot, django_assert_num_queries):
        with django_assert_num_queries(1):
            is_stopped(ops_bot)


class TestFlipping:
    def test_each_flip_is_audited_once(self, admin):
        assert set_emergency_stop(on=True, actor=Person(admin), reason="bad deploy")
        assert not set_emergency_stop(on=True, actor=Person(admin))  # already on: nothing to record
        assert set_emergency_stop(on=False, actor=Person(admin))
        events = list(AuditEvent.objects.filter(verb="emergency_stop.changed").order_by("seq"))
        assert [(e.metadata["on"], e.metadata["scope"], e.actor_label) for e in events] == [
            (True, "global", "ada"),
            (False, "global", "ada"),
        ]

    def test_reviewers_screens_are_told_after_commit(self, transactional_db, admin, settings):
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "controlplane.channel_relay.RelayChannelLayer"}}
        layer = get_channel_layer()
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(EMERGENCY_GROUP, channel)
        set_emergency_stop(on=True, actor=Person(admin), reason="bad deploy")
        message = async_to_sync(layer.receive)(channel)
        assert message["type"] == "emergency.changed"
        assert (message["scope"], message["on"], message["reason"], message["changed_by"]) == (
            "global",
            True,
            "bad deploy",
            "ada",
        )

    def test_the_command_switches_and_reports(self, ops_bot, capsys):
        call_command("emergency_stop", "--agent", "ops-bot", "--reason", "loops")
        assert is_stopped(ops_bot)
        call_command("emergency_stop", "--agent", "ops-bot", "--off")
        assert not is_stopped(ops_bot)
        out = capsys.readouterr().out
        assert "Emergency stop (agent ops-bot): ON." in out and "lifted" in out

    def test_the_admin_flips_through_the_service(self, admin, client):
        admin.is_superuser = True
        admin.save()
        client.force_login(admin)
        response = client.post("/admin/approvals/emergencystop/add/", {"on": "on", "reason": "incident 42"})
        assert response.status_code == 302
        assert is_stopped(None)
        assert AuditEvent.objects.filter(verb="emergency_stop.changed", actor_label="ada").count() == 1
