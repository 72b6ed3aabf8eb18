"""One reviewer-decision adapter (issue 23, item 1): every surface reads a decision and
its step-up proof through `approvals.decide`, and answers from its one result.

Before, the dashboard's forms and the JSON API each parsed the proof and the decision
and each built its own answer: copies that drifted (a revision bug lived in both, and
the dashboard's batch form sent a provider proof that covered no batch). Now the same
decision gives the same outcome and the same refusal on the form's fetch and on the
API, single or batch, and nothing outside the services and the adapter builds a proof.
"""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest
from django.http import QueryDict
from django.test import Client
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from approvals import decide, policy, services
from approvals.errors import DomainError
from approvals.models import ApprovalRequest
from approvals.people import Person

# Autouse, by name: step-up failure counters and spent codes never carry over between tests.
from tests.fixtures.cache import fresh_counters  # noqa: F401 (autouse in this module)
from tests.identity.conftest import nobody_required  # noqa: F401 (a fixture)

# As in tests/guards/test_revision_*.py: no group requires a second factor at sign-in.
pytestmark = pytest.mark.usefixtures("nobody_required")

ROOT = Path(__file__).resolve().parents[2]
JSON_ACCEPT = {"HTTP_ACCEPT": "application/json"}
PING = {"name": "ping", "priority": 1, "action_type": "ping", "risk_level": "medium", "required_approvals": 1}
LAUNCH = {"name": "launch", "priority": 1, "action_type": "launch", "risk_level": "critical", "required_approvals": 1}
SURFACES = ("keyboard", "api")


@pytest.fixture
def adapter_rules(admin_user):
    policy.save_rules([PING, LAUNCH], actor=Person(admin_user), note="pings are medium, launches critical")


@pytest.fixture
def ask(submit, adapter_rules):
    """`ask("ping")`: mail-bot asks for a ping (medium) or a launch (critical)."""
    return lambda action_type="ping": submit(action_type, params={"n": 1})


def client_for(surface: str, user):
    client = APIClient() if surface == "api" else Client()
    client.force_login(user)
    return client


def decide_one(surface: str, user, request_obj, verdict: str, *, revision: int, password: str | None = None):
    """(status, code or None, state): `verdict` sent through the page script's fetch of
    the card's form, or through the JSON API."""
    client = client_for(surface, user)
    if surface == "api":
        body = {"decision": verdict, "revision": revision}
        if password is not None:
            body["step_up"] = {"method": "password", "password": password}
        response = client.post(f"/api/v1/requests/{request_obj.pk}/decisions/", body, format="json")
    else:
        form = {"revision": str(revision), **({"password": password} if password is not None else {})}
        response = client.post(reverse(f"approvals:{verdict}", args=[request_obj.pk]), form, **JSON_ACCEPT)
    answer = response.json()
    return response.status_code, answer.get("code"), ApprovalRequest.objects.get(pk=request_obj.pk).state


def decide_many(surface: str, user, verdict: str, items: list[tuple[str, int]]) -> dict[str, str]:
    """Each request's answer to one batch decision: "ok" or its refusal's code."""
    client = client_for(surface, user)
    if surface == "api":
        response = client.post(
            "/api/v1/decisions/",
            {"decision": verdict, "requests": [{"id": pk, "revision": revision} for pk, revision in items]},
            format="json",
        )
        assert response.status_code == 200, response.json()
        return {result["id"]: "ok" if "outcome" in result else result["code"] for result in response.json()["results"]}
    response = client.post(
        reverse("approvals:decide-batch"),
        {"decision": verdict, "request": [f"{pk}:{revision}" for pk, revision in items]},
        **JSON_ACCEPT,
    )
    assert response.status_code == 200, response.json()
    return {result["id"]: "ok" if result["ok"] else result["code"] for result in response.json()["results"]}


# --- One parser of the step-up proof -----------------------------------------------------

FORM_AND_JSON = [
    ("password=alice-pw-123%21", {"method": "password", "password": "alice-pw-123!"}),
    ("code=123456", {"method": "totp", "code": "123456"}),
    (
        "passkey_assertion=%7B%22id%22%3A%22x%22%7D&passkey_nonce=n1",
        {"method": "passkey", "assertion": {"id": "x"}, "nonce": "n1"},
    ),
    ("provider_nonce=n2", {"method": "provider", "nonce": "n2"}),
]


@pytest.mark.parametrize(("form", "body"), FORM_AND_JSON, ids=["password", "totp", "passkey", "provider"])
def test_the_form_and_the_json_give_the_same_proof(form, body):
    covers = [(str(uuid.uuid4()), 1, "approve"), (str(uuid.uuid4()), 3, "approve")]
    from_form = decide.step_up_proof(QueryDict(form), rp_id="testserver", covers=covers)
    from_json = decide.step_up_proof(body, rp_id="testserver", covers=covers)
    assert (from_form.method, from_form.digest) == (from_json.method, from_json.digest)
    assert from_form.digest == services.decision_digest(covers)


def test_a_provider_proof_from_the_batch_form_covers_the_whole_batch():
    """The drift the issue names: the dashboard's batch form built its provider proof
    without the batch it was for, so it bound to the first request only."""
    batch = decide.read_batch(
        QueryDict(f"decision=approve&request={uuid.uuid4()}:1&request={uuid.uuid4()}:2&provider_nonce=n")
    )
    proof = decide.step_up_proof(batch.step_up, rp_id="testserver", covers=batch.confirmed())
    assert proof.method == "provider"
    assert proof.digest == services.decision_digest(batch.confirmed())


def test_no_field_is_no_proof():
    assert decide.step_up_proof(QueryDict("feedback=fine"), rp_id="testserver") is None
    assert decide.step_up_proof(None, rp_id="testserver") is None


@pytest.mark.parametrize(
    "step_up",
    [
        {"method": ["password"]},
        {"method": "password"},
        {"method": "sms", "code": "1"},
        ["password", "x"],
        {"method": "passkey", "assertion": {"id": "x"}},
        {"method": "provider", "nonce": 7},
    ],
    ids=[
        "unhashable-method",
        "no-secret",
        "unknown-method",
        "not-an-object",
        "passkey-without-nonce",
        "nonce-not-text",
    ],
)
def test_a_malformed_proof_forwarded_unchecked_is_a_422_not_a_500(step_up):
    with pytest.raises(DomainError) as refused:
        decide.step_up_proof(step_up, rp_id="testserver")
    assert (refused.value.code, refused.value.details) == ("validation_error", {"fields": ["step_up"]})


# --- The same decision, the same answer, on every surface ----------------------------------


@pytest.mark.parametrize("surface", SURFACES)
def test_a_critical_approval_without_a_step_up_is_refused_alike(surface, ask, people):
    launch = ask("launch")
    assert decide_one(surface, people["alice"], launch, "approve", revision=1) == (
        403,
        "step_up_required",
        "pending_approval",
    )


@pytest.mark.parametrize("surface", SURFACES)
def test_a_wrong_password_is_refused_alike(surface, ask, people):
    launch = ask("launch")
    status, code, state = decide_one(surface, people["alice"], launch, "approve", revision=1, password="guess")
    assert (status, code, state) == (403, "step_up_failed", "pending_approval")


@pytest.mark.parametrize("surface", SURFACES)
def test_with_her_password_the_critical_approval_lands_alike(surface, ask, people):
    launch = ask("launch")
    status, code, state = decide_one(surface, people["alice"], launch, "approve", revision=1, password="alice-pw-123!")
    assert (status, code, state) == (200, None, "approved")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_stale_revision_is_refused_alike(surface, ask, people):
    ping = ask()
    assert decide_one(surface, people["alice"], ping, "reject", revision=2) == (
        409,
        "revision_changed",
        "pending_approval",
    )


@pytest.mark.parametrize("surface", SURFACES)
def test_a_batch_answers_each_request_alike(surface, ask, people):
    """One fresh, one at a revision it is not at, one that does not exist, one critical
    without a step-up: the same answer per request from the dashboard and the API."""
    fresh, stale, launch = ask(), ask(), ask("launch")
    missing = str(uuid.uuid4())
    items = [(str(fresh.pk), 1), (str(stale.pk), 2), (missing, 1), (str(launch.pk), 1)]
    assert decide_many(surface, people["alice"], "approve", items) == {
        str(fresh.pk): "ok",
        str(stale.pk): "revision_changed",
        missing: "not_found",
        str(launch.pk): "step_up_required",
    }
    assert ApprovalRequest.objects.get(pk=fresh.pk).state == "approved"
    assert ApprovalRequest.objects.get(pk=stale.pk).state == "pending_approval"
    assert ApprovalRequest.objects.get(pk=launch.pk).state == "pending_approval"


# --- No input is a 500: the adapter refuses, with a code, whatever a surface forwards ------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
DECISION_KEYS = st.sampled_from(
    [
        "decision",
        "revision",
        "feedback",
        "message",
        "edits",
        "resume_data",
        "step_up",
        "requests",
        "request",
        "password",
        "code",
        "passkey_assertion",
        "passkey_nonce",
        "provider_nonce",
        "edit:n",
        "masked:n",
    ]
)


class Target:
    """A request as a surface loads it: what the adapter reads to parse a form."""

    pk = uuid.UUID("00000000-0000-4000-8000-000000000001")
    classification = {"editable_params": ["n"]}

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def current_params(self) -> dict:
        return {"n": 1}


def _read_everything(fields, kind: str) -> None:
    for verdict in (None, *decide.VERDICTS):
        try:
            decision = decide.read_decision(fields, Target(kind), verdict=verdict)
            decide.step_up_proof(decision.step_up, rp_id="testserver")
        except DomainError as refused:
            assert refused.http_status in (403, 409, 422), refused
    try:
        batch = decide.read_batch(fields)
        decide.step_up_proof(batch.step_up, rp_id="testserver", covers=batch.confirmed())
    except DomainError as refused:
        assert refused.http_status == 422, refused


@hypothesis_settings(max_examples=150, deadline=None)
@given(body=st.dictionaries(DECISION_KEYS, JSON_VALUES, max_size=6), kind=st.sampled_from(["action", "suspension"]))
def test_any_json_a_surface_forwards_is_read_or_refused_with_a_code(body, kind):
    _read_everything(body, kind)


@hypothesis_settings(max_examples=150, deadline=None)
@given(
    pairs=st.lists(st.tuples(DECISION_KEYS, st.text(max_size=12)), max_size=8),
    kind=st.sampled_from(["action", "suspension"]),
)
def test_any_form_is_read_or_refused_with_a_code(pairs, kind):
    form = QueryDict(mutable=True)
    for key, value in pairs:
        form.appendlist(key, value)
    _read_everything(form, kind)


# --- One place that reads decisions --------------------------------------------------------


def _calls_of(path: Path, name: str) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and name in (getattr(node.func, "attr", None), getattr(node.func, "id", None))
    ]


def test_only_the_services_and_the_adapter_build_a_step_up_proof():
    """A surface that built its own proof would be a second parser, free to drift."""
    builders = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "approvals").rglob("*.py"))
        if "services" not in path.relative_to(ROOT).parts and path.name != "decide.py"
        for lines in [_calls_of(path, "StepUpProof") + _calls_of(path, "passkey") + _calls_of(path, "provider")]
        if lines
    }
    assert builders == {}


def test_the_adapter_imports_no_view():
    tree = ast.parse((ROOT / "approvals" / "decide.py").read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not [
        name
        for name in imported
        if name.split(".")[0] in ("web", "api") or ".web" in name or ".api" in name or "views" in name
    ]


def test_each_decision_service_is_called_from_the_adapter_alone():
    """The web and API views call the adapter, never a decision service of their own."""
    services_called = (
        "approve",
        "reject",
        "approve_with_edits",
        "respond_instead",
        "respond_to_suspension",
        "decide_batch",
    )
    # Every module of both HTTP surfaces, not a list of files that renames and splits outgrow.
    surfaces = sorted((ROOT / "approvals" / "web").rglob("*.py")) + sorted((ROOT / "approvals" / "api").rglob("*.py"))
    direct = {}
    for path in surfaces:
        tree = ast.parse(path.read_text())
        calls = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in services_called
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "services"
        ]
        if calls:
            direct[str(path.relative_to(ROOT))] = calls
    assert direct == {}
