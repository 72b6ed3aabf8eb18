"""Agent tokens: shown once, stored hashed, scoped, expiring, revocable, audited."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents.models import Agent, AgentToken
from agents.services import issue_token, revoke_token
from approvals.people import Person
from audit.models import AuditEvent
from tests.api.conftest import EMAIL, bearer

pytestmark = pytest.mark.django_db


def test_create_agent_prints_a_token_once_and_stores_only_its_hash(people):
    out, err = StringIO(), StringIO()
    call_command(
        "create_agent",
        "deploy-bot",
        "--owner",
        "owen",
        "--scopes",
        "submit",
        "read",
        "--expires-days",
        "30",
        stdout=out,
        stderr=err,
    )
    secret = out.getvalue().strip()
    agent = Agent.objects.get(name="deploy-bot")
    token = agent.tokens.get()
    assert agent.owner == people["owen"]
    assert secret.startswith(f"cp_{token.prefix}_")
    assert token.secret_hash == hashlib.sha256(secret.split("_", 2)[2].encode()).hexdigest()
    assert secret not in str(AgentToken.objects.values_list())
    assert token.scopes == ["read", "submit"]
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    assert "not shown again" in err.getvalue()
    verbs = list(AuditEvent.objects.filter(agent_id=agent.pk).values_list("verb", flat=True))
    assert verbs == ["agent.created", "agent.token_created"]


def test_create_agent_again_reuses_the_agent_and_adds_a_token(people):
    call_command("create_agent", "deploy-bot", stdout=StringIO(), stderr=StringIO())
    call_command("create_agent", "deploy-bot", stdout=StringIO(), stderr=StringIO())
    assert Agent.objects.get(name="deploy-bot").tokens.count() == 2
    assert AuditEvent.objects.filter(verb="agent.created").count() == 1


def test_create_agent_refuses_an_unknown_owner(db):
    with pytest.raises(CommandError, match="No user"):
        call_command("create_agent", "x-bot", "--owner", "nobody", stdout=StringIO(), stderr=StringIO())


def test_a_valid_token_authenticates_and_records_last_use(api, agent):
    response = api.get("/api/v1/requests/")
    assert response.status_code == 200
    assert agent.tokens.get().last_used_at is not None


@pytest.mark.parametrize(
    "header, code",
    [
        ("Bearer nonsense", "invalid_token"),
        ("Bearer cp_000000000000_wrongsecret", "invalid_token"),
        ("Bearer ", "invalid_token"),
    ],
)
def test_malformed_or_unknown_tokens_get_a_json_401(anonymous, header, code):
    response = anonymous.get("/api/v1/requests/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["code"] == code
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_wrong_secret_with_a_real_prefix_is_refused(token, anonymous):
    prefix = token.split("_")[1]
    response = anonymous.get("/api/v1/requests/", HTTP_AUTHORIZATION=f"Bearer cp_{prefix}_guess")
    assert response.status_code == 401 and response.json()["code"] == "invalid_token"


def test_a_revoked_token_gets_401_and_revocation_is_audited(agent, people):
    issued = issue_token(agent)
    revoke_token(issued.token, actor=Person(people["alice"]))
    revoke_token(issued.token, actor=Person(people["alice"]))  # idempotent
    response = bearer(issued.secret).get("/api/v1/requests/")
    assert response.status_code == 401
    assert response.json() == {"code": "token_revoked", "message": "The bearer token was revoked."}
    revoked = AuditEvent.objects.filter(verb="agent.token_revoked")
    assert revoked.count() == 1
    assert revoked.get().actor_label == "alice"


def test_an_expired_token_gets_401(agent):
    issued = issue_token(agent, expires_in=timedelta(seconds=1))
    AgentToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(issued.secret).get("/api/v1/requests/")
    assert response.status_code == 401 and response.json()["code"] == "token_expired"


def test_a_deactivated_agent_cannot_authenticate(agent, token):
    Agent.objects.filter(pk=agent.pk).update(is_active=False)
    response = bearer(token).get("/api/v1/requests/")
    assert response.status_code == 401 and response.json()["code"] == "agent_inactive"


def test_scopes_limit_what_a_token_may_do(agent):
    reader = bearer(issue_token(agent, scopes=["read"]).secret)
    response = reader.post("/api/v1/actions/", EMAIL, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert reader.get("/api/v1/requests/").status_code == 200


def test_unknown_scopes_are_refused(agent):
    with pytest.raises(ValueError, match="unknown scopes"):
        issue_token(agent, scopes=["admin"])
